"""model room: `ModelSpec` from a Hugging Face config.json (shapes, parameter counts, quantization).

`load_model_spec(path)` is the entry point (it maps the families' field names onto `spec`'s types; `read_config`
reads the file); `ParamCounts` come from the parameter formulas in `params`, `QuantSpec` from the weight formats in
`quant`; `bundled_model` / `bundled_names` are the shipped public configs (no weights), and `locate_model` /
`tokenizer_file` / `hub_cache` find a model's local files (`LocalModel`).
"""

from typing import TYPE_CHECKING

from servetune._exports import lazy_exports

if TYPE_CHECKING:
    from servetune.model.bundled import bundled_model as bundled_model
    from servetune.model.bundled import bundled_names as bundled_names
    from servetune.model.hf_config import load_model_spec as load_model_spec
    from servetune.model.hf_config import read_config as read_config
    from servetune.model.hub import (
        LocalModel as LocalModel,
    )
    from servetune.model.hub import (
        hub_cache as hub_cache,
    )
    from servetune.model.hub import (
        locate_model as locate_model,
    )
    from servetune.model.hub import (
        tokenizer_file as tokenizer_file,
    )
    from servetune.model.params import ParamCounts as ParamCounts
    from servetune.model.quant import QuantSpec as QuantSpec
    from servetune.model.spec import ModelSpec as ModelSpec
else:
    __all__, __getattr__, __dir__ = lazy_exports(
        __name__,
        {
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
