"""tiny room: a tiny random Llama that servetune builds itself, so tests and the demo run real engines without
downloads (nothing here imports torch).

Entry points: `cache.tiny_model()` (the one cached copy, served as `build.SERVED_NAME`) and
`build.build_tiny_model(out_dir) -> TinyModel` (HF files for vLLM and GGUF for llama.cpp from the same weights).
"""
