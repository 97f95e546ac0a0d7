"""`build_tiny_model`: the tiny random Llama as HF files + GGUF, built once per directory and then reused.

A stamp file records what was built (spec, builder version, tokenizers version); a matching stamp means the
files are there and current, so repeated calls (every test session, every demo run) cost milliseconds.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from servetune.tiny.weights import TinyLlamaSpec

BUILDER_VERSION = 2
"""Bump when the output changes for the same spec, so cached builds are redone."""
STAMP = "servetune-tiny.json"
SERVED_NAME = "servetune-tiny"


@dataclass(frozen=True)
class TinyModel:
    """Where the built model lies: `hf_dir` for vLLM/SGLang, `gguf_path` for llama.cpp."""

    root: Path
    hf_dir: Path
    gguf_path: Path
    tokenizer_json: Path
    vocab_size: int
    max_position_embeddings: int
    served_name: str = SERVED_NAME


def _key(spec: TinyLlamaSpec) -> str:
    import tokenizers

    blob = json.dumps(
        {"spec": asdict(spec), "builder": BUILDER_VERSION, "tokenizers": tokenizers.__version__}, sort_keys=True
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _model(root: Path, vocab: int, spec: TinyLlamaSpec) -> TinyModel:
    return TinyModel(
        root=root,
        hf_dir=root / "hf",
        gguf_path=root / "tiny-llama-f32.gguf",
        tokenizer_json=root / "hf" / "tokenizer.json",
        vocab_size=vocab,
        max_position_embeddings=spec.max_position_embeddings,
    )


def build_tiny_model(out_dir: Path, spec: TinyLlamaSpec | None = None) -> TinyModel:
    """Builds (or reuses) the tiny model under `out_dir`; safe to call from several processes at once."""
    from servetune.tiny.gguf_file import write_gguf
    from servetune.tiny.hf_files import write_hf
    from servetune.tiny.tokenizer import corpus_text, train_tokenizer, unspeakable_ids
    from servetune.tiny.weights import random_weights

    spec = spec or TinyLlamaSpec()
    root = Path(out_dir).resolve()
    root.mkdir(parents=True, exist_ok=True)
    key = _key(spec)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp = root / STAMP
        if stamp.exists():
            done = json.loads(stamp.read_text())
            model = _model(root, done["vocab_size"], spec)
            if done.get("key") == key and model.gguf_path.exists() and (model.hf_dir / "model.safetensors").exists():
                return model
            stamp.unlink()
        tok = train_tokenizer(corpus_text(), spec.vocab_size)
        vocab = tok.get_vocab_size(with_added_tokens=True)
        tensors = random_weights(spec, vocab, unspeakable_ids(tok))
        model = _model(root, vocab, spec)
        write_hf(model.hf_dir, spec, tensors, tok)
        write_gguf(model.gguf_path, spec, tensors, tok)
        stamp.write_text(json.dumps({"key": key, "vocab_size": vocab, "spec": asdict(spec)}, indent=2) + "\n")
        return model
