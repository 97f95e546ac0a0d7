"""A tiny random Llama that servetune builds itself, so tests and the demo run real engines without downloads.

`build.build_tiny_model(out_dir)` writes HF files (for vLLM) and a GGUF file (for llama.cpp) from the same
weights; nothing here imports torch.
"""
