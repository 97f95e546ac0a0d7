"""model room: `spec.ModelSpec` from a Hugging Face config.json (shapes, parameter counts, quantization).

`hf_config.load_model_spec(path)` is the entry point (it maps the families' field names onto `spec`'s types);
`params` holds the parameter formulas, `quant` the weight formats, `bundled` the shipped public configs (no weights).
"""
