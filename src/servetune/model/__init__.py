"""model room: `spec.ModelSpec` from a Hugging Face config.json (shapes, parameter counts, quantization).

`spec.load_model_spec(path)` is the entry point; `hf_config` maps the families' field names, `params` holds
the parameter formulas, `quant` the weight formats, `bundled` the shipped public configs (no weights).
"""
