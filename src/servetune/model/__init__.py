"""model room: a model's shapes and sizes from its Hugging Face config.json, and where its local files are.

Entry points: `load_model_spec(path) -> ModelSpec` (`ParamCounts`, `QuantSpec`), `bundled_model(name)` for the
shipped configs, and `locate_model` / `tokenizer_file` (`LocalModel`) for the local cache (never downloads).
"""

from typing import TYPE_CHECKING

from servetune._exports import lazy_exports

if TYPE_CHECKING:
    from servetune.model.bundled import (
        BUNDLED_DIR as BUNDLED_DIR,
        bundled_model as bundled_model,
        bundled_names as bundled_names,
    )
    from servetune.model.hf_config import load_model_spec as load_model_spec, read_config as read_config
    from servetune.model.hub import (
        LocalModel as LocalModel,
        hub_cache as hub_cache,
        locate_model as locate_model,
        tokenizer_file as tokenizer_file,
    )
    from servetune.model.params import ParamCounts as ParamCounts
    from servetune.model.quant import QuantSpec as QuantSpec
    from servetune.model.spec import ModelSpec as ModelSpec
else:
    __all__, __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "BUNDLED_DIR": "bundled",
            "LocalModel": "hub",
            "ModelSpec": "spec",
            "ParamCounts": "params",
            "QuantSpec": "quant",
            "bundled_model": "bundled",
            "bundled_names": "bundled",
            "hub_cache": "hub",
            "load_model_spec": "hf_config",
            "locate_model": "hub",
            "read_config": "hf_config",
            "tokenizer_file": "hub",
        },
    )
