"""A tiny random Llama that servetune builds itself, so tests and the demo run real engines without downloads.

`build_tiny_model(out_dir) -> TinyModel` writes HF files (for vLLM) and a GGUF file (for llama.cpp) from the same
weights (`TinyLlamaSpec`); `tiny_model()` is the one cached copy (in `cache_dir()`), served as `SERVED_NAME` with
`CHAT_TEMPLATE` and `SPECIAL_TOKENS`; nothing here imports torch.
"""

from typing import TYPE_CHECKING

from servetune._exports import lazy_exports

if TYPE_CHECKING:
    from servetune.tiny.build import (
        SERVED_NAME as SERVED_NAME,
    )
    from servetune.tiny.build import (
        TinyModel as TinyModel,
    )
    from servetune.tiny.build import (
        build_tiny_model as build_tiny_model,
    )
    from servetune.tiny.cache import cache_dir as cache_dir
    from servetune.tiny.cache import tiny_model as tiny_model
    from servetune.tiny.tokenizer import CHAT_TEMPLATE as CHAT_TEMPLATE
    from servetune.tiny.tokenizer import SPECIAL_TOKENS as SPECIAL_TOKENS
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
