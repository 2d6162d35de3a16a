"""Sphinx configuration of agnograd's documentation.

Build with ``sphinx-build -W -b html docs docs/_build/html``; tests/test_docs.py
does so with ``-W`` on every test run. Pages are Markdown (MyST) or
reStructuredText. Importing this file has no side effects: pytest collects it
under ``--doctest-modules``.
"""

import importlib.util

import agnograd

project = "agnograd"
author = "the agnograd developers"
copyright = "the agnograd developers"  # noqa: A001 - the name Sphinx reads
release = agnograd.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

# Markdown pages may use definition lists and ``:::`` fences, and get anchors for
# headings down to level 3, so pages can link to each other's sections.
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# numpydoc-style docstrings. Only "Examples" is rendered as its own section; the
# rest are turned into parameter and return fields.
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True}
# The bridges (agnograd.interop.torch, agnograd.interop.jax) import their library at
# the top. The docs extra installs neither (torch's CUDA build is gigabytes), so
# autodoc reads their docstrings with the missing ones mocked; where one is installed
# it is imported for real.
autodoc_mock_imports = [name for name in ("torch", "jax") if importlib.util.find_spec(name) is None]

html_theme = "alabaster"
html_title = f"agnograd {release}"
html_static_path: list[str] = []
