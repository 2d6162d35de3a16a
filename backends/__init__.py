"""The adapters shipped with agnograd, one module per array library.

Each module defines ``adapter`` and is registered in ``pyproject.toml`` under the
``agnograd.backends`` entry-point group; agnograd finds them only through that
group, exactly as it finds a third party's adapter.
"""
