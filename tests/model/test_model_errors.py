"""Bad configs give a ServetuneError naming the problem (never a traceback)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servetune.errors import ServetuneError
from servetune.model.bundled import bundled_model
from servetune.model.hf_config import load_model_spec


def _write(tmp_path: Path, cfg: dict) -> Path:
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return tmp_path


def test_missing_field_is_named(tmp_path: Path) -> None:
    base = json.loads((bundled_model("llama-3-8b") / "config.json").read_text())  # type: ignore[operator]
    del base["num_hidden_layers"]
    with pytest.raises(ServetuneError, match="num_hidden_layers"):
        load_model_spec(_write(tmp_path, base))


def test_unknown_architecture_lists_supported(tmp_path: Path) -> None:
    with pytest.raises(ServetuneError) as err:
        load_model_spec(_write(tmp_path, {"architectures": ["FalconForCausalLM"]}))
    assert "FalconForCausalLM" in err.value.problem
    assert err.value.fix is not None and "LlamaForCausalLM" in err.value.fix


def test_missing_file_and_bad_json(tmp_path: Path) -> None:
    with pytest.raises(ServetuneError, match=r"no config\.json"):
        load_model_spec(tmp_path / "nope")
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ServetuneError, match="not valid JSON"):
        load_model_spec(tmp_path)


def test_unknown_quantization_flag() -> None:
    with pytest.raises(ServetuneError, match="unknown quantization"):
        load_model_spec("llama-3-8b", quantization="int3")
