"""tiny room: a tiny random Llama that servetune builds itself, so tests and the demo run real engines without
downloads (nothing here imports torch).

Entry points: `tiny_model()` (the one cached copy, served as `SERVED_NAME`) and `build_tiny_model(out_dir) ->
TinyModel` (HF files for vLLM and GGUF for llama.cpp from the same weights).
"""

from typing import TYPE_CHECKING

from servetune._exports import lazy_exports

if TYPE_CHECKING:
    from servetune.tiny.build import (
        SERVED_NAME as SERVED_NAME,
        TinyModel as TinyModel,
        build_tiny_model as build_tiny_model,
    )
    from servetune.tiny.cache import cache_dir as cache_dir, tiny_model as tiny_model
    from servetune.tiny.tokenizer import CHAT_TEMPLATE as CHAT_TEMPLATE, SPECIAL_TOKENS as SPECIAL_TOKENS
    from servetune.tiny.weights import TinyLlamaSpec as TinyLlamaSpec
else:
    __all__, __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "CHAT_TEMPLATE": "tokenizer",
            "SERVED_NAME": "build",
            "SPECIAL_TOKENS": "tokenizer",
            "TinyLlamaSpec": "weights",
            "TinyModel": "build",
            "build_tiny_model": "build",
            "cache_dir": "cache",
            "tiny_model": "cache",
        },
    )
