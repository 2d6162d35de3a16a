"""array-api-strict adapter: the standard and nothing else, so no scatter-add hook."""

from agnograd import Adapter

adapter = Adapter(name="array_api_strict", modules=("array_api_strict",))
