"""The tiny model: deterministic, cached, consistent HF/GGUF files, and banned tokens really unreachable."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file
from tokenizers import Tokenizer

from servetune.tiny.build import build_tiny_model
from servetune.tiny.gguf_file import gguf_tensors
from servetune.tiny.tokenizer import CHAT_TEMPLATE, SPECIAL_TOKENS, corpus_text, token_bytes, unspeakable_ids
from servetune.tiny.weights import TinyLlamaSpec


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_build_writes_all_files_and_is_deterministic(tmp_path: Path, tiny_model) -> None:
    fresh = build_tiny_model(tmp_path / "again")
    for name in (
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "generation_config.json",
    ):
        assert (fresh.hf_dir / name).is_file()
        assert _digest(fresh.hf_dir / name) == _digest(tiny_model.hf_dir / name), name
    assert _digest(fresh.gguf_path) == _digest(tiny_model.gguf_path)


def test_second_build_is_cached(tmp_path: Path) -> None:
    first = build_tiny_model(tmp_path)
    mtime = first.gguf_path.stat().st_mtime_ns
    again = build_tiny_model(tmp_path)
    assert again == first and again.gguf_path.stat().st_mtime_ns == mtime


def test_config_matches_tensors(tiny_model) -> None:
    config = json.loads((tiny_model.hf_dir / "config.json").read_text())
    tensors = load_file(str(tiny_model.hf_dir / "model.safetensors"))
    assert config["architectures"] == ["LlamaForCausalLM"] and config["hidden_size"] == 256
    assert tensors["model.embed_tokens.weight"].shape == (config["vocab_size"], 256)
    assert tensors["model.layers.0.self_attn.k_proj.weight"].shape == (config["num_key_value_heads"] * 64, 256)
    assert sum(1 for k in tensors if k.endswith("mlp.up_proj.weight")) == config["num_hidden_layers"]


def test_tokenizer_roundtrips_and_has_chat_template(tiny_model) -> None:
    tok = Tokenizer.from_file(str(tiny_model.tokenizer_json))
    text = "The baker laughs: 3.14, {key: value}!"
    assert tok.decode(tok.encode(text).ids) == text
    cfg = json.loads((tiny_model.hf_dir / "tokenizer_config.json").read_text())
    assert cfg["chat_template"] == CHAT_TEMPLATE and "<|im_start|>" in CHAT_TEMPLATE
    assert [tok.token_to_id(t) for t in SPECIAL_TOKENS] == [0, 1, 2]


def test_lone_bytes_and_specials_are_banned(tiny_model) -> None:
    tok = Tokenizer.from_file(str(tiny_model.tokenizer_json))
    banned = set(unspeakable_ids(tok))
    for token, idx in tok.get_vocab().items():
        raw = token_bytes(token)
        invalid = raw is None
        if raw is not None:
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                invalid = True
        if invalid:
            assert idx in banned, token
    assert {0, 1, 2} <= banned
    assert len(banned) < tok.get_vocab_size() // 4  # plenty of tokens remain speakable


def test_banned_tokens_lose_every_step(tiny_model) -> None:
    """Numpy forward of the final norm + lm_head over random residual states: banned logits stay far below."""
    tensors = load_file(str(tiny_model.hf_dir / "model.safetensors"))
    tok = Tokenizer.from_file(str(tiny_model.tokenizer_json))
    banned = unspeakable_ids(tok)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 256)).astype(np.float32) * 0.5
    x[:, 0] = 1.0  # the constant dimension no layer writes to
    h = x / np.sqrt((x**2).mean(axis=1, keepdims=True) + 1e-5) * tensors["model.norm.weight"]
    logits = h @ tensors["lm_head.weight"].T
    allowed = np.setdiff1d(np.arange(logits.shape[1]), banned)
    assert (logits[:, banned].max(axis=1) < logits[:, allowed].max(axis=1) - 20).all()


def test_layers_never_write_or_read_the_constant_dimension(tiny_model) -> None:
    tensors = load_file(str(tiny_model.hf_dir / "model.safetensors"))
    for name, w in tensors.items():
        if name.endswith(("o_proj.weight", "down_proj.weight")):
            assert not w[0].any(), name
        if name.endswith("layernorm.weight"):
            assert w[0] == 0.0, name


def test_gguf_holds_same_weights_with_rope_permutation(tiny_model) -> None:
    gguf = pytest.importorskip("gguf")
    reader = gguf.GGUFReader(str(tiny_model.gguf_path))
    arch = reader.fields["general.architecture"]
    assert bytes(arch.parts[arch.data[0]]).decode() == "llama"
    stored = {t.name: np.asarray(t.data) for t in reader.tensors}
    expected = gguf_tensors(TinyLlamaSpec(), load_file(str(tiny_model.hf_dir / "model.safetensors")))
    assert set(stored) == set(expected)
    for name in ("token_embd.weight", "blk.0.attn_q.weight", "blk.3.attn_k.weight", "output.weight"):
        np.testing.assert_array_equal(stored[name].reshape(expected[name].shape), expected[name])


def test_corpus_is_local_text() -> None:
    text = corpus_text()
    assert len(text) > 2000 and text.isascii()


def test_cli_builds_the_model(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from servetune.cli.entry import app

    result = CliRunner().invoke(app, ["tiny-model", str(tmp_path / "m")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "m" / "tiny-llama-f32.gguf").is_file() and "servetune-tiny" in result.output
