"""model room: a model's shapes and sizes from its Hugging Face config.json, and where its local files are.

Entry points: `hf_config.load_model_spec(path) -> ModelSpec` (`params.ParamCounts`, `quant.QuantSpec`),
`bundled.bundled_model(name)` for the shipped configs, and `hub.locate_model` / `hub.tokenizer_file`
(`hub.LocalModel`) for the local cache (never downloads).
"""
