"""Shared fixtures: the tiny model and real engines serving it (one launch per engine per session).

`tiny_model` builds (or reuses) servetune's tiny random Llama under .servetune-cache/ (SERVETUNE_CACHE). `llama_server` and
`vllm_server` are `RunningEngine`s (`.base_url`, `.model_name`, `.facts`, `.log_path`) started on first use
and stopped at the end of the session, where their teardown must leave no process behind. Tests that use
them are marked `engine` automatically (`pytest -m "not engine"` skips them for a quick local run).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# The tests share one tiny model with the code under test (`model: tiny`, `--tiny`): servetune's own cache, here
# inside the checkout.
os.environ.setdefault("SERVETUNE_CACHE", str(REPO / ".servetune-cache"))

from servetune.engines.config import EngineConfig  # noqa: E402
from servetune.engines.launch import RunningEngine, launch  # noqa: E402
from servetune.tiny.build import TinyModel  # noqa: E402
from servetune.tiny.cache import tiny_model as cached_tiny_model  # noqa: E402

ENGINE_FIXTURES = {"llama_server", "vllm_server"}

LLAMA_FLAGS = {"ctx-size": 8192, "parallel": 4, "metrics": True}
"""4 slots of 2048 tokens each; /metrics on."""
VLLM_FLAGS = {"max-model-len": 4096, "max-num-seqs": 16, "enforce-eager": True}
"""Eager mode starts in about 40 s on two cores; 16 sequences keep the sampler warm-up short."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks every test that uses a real-engine fixture as `engine`."""
    for item in items:
        if ENGINE_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.engine)


def _require(module: str) -> None:
    """Skips when an engine is not installed locally; in CI (CI=true) a missing engine is a failure."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        if os.environ.get("CI"):
            pytest.fail(f"{module} is not installed: run scripts/setup.sh")
        pytest.skip(f"{module} not installed (scripts/setup.sh installs it)")


@pytest.fixture(scope="session")
def tiny_model() -> TinyModel:
    """Paths of the tiny model: `.hf_dir` (vLLM), `.gguf_path` (llama.cpp), `.tokenizer_json`."""
    return cached_tiny_model()


@pytest.fixture(scope="session")
def engine_log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the session's engine logs go."""
    return tmp_path_factory.mktemp("engine-logs")


def _serve(cfg: EngineConfig, log_dir: Path, timeout_s: float) -> Iterator[RunningEngine]:
    engine = launch(cfg, log_dir=log_dir, startup_timeout_s=timeout_s)
    try:
        yield engine
    finally:
        report = engine.stop()
        assert report is not None and report.clean, f"engine left processes behind: {report}"


@pytest.fixture(scope="session")
def llama_server(tiny_model: TinyModel, engine_log_dir: Path) -> Iterator[RunningEngine]:
    """llama.cpp's server (xllamacpp) serving the tiny GGUF as `servetune-tiny`."""
    _require("xllamacpp")
    cfg = EngineConfig(
        engine="llamacpp", model=str(tiny_model.gguf_path), served_model_name=tiny_model.served_name, flags=LLAMA_FLAGS
    )
    yield from _serve(cfg, engine_log_dir, 120)


@pytest.fixture(scope="session")
def vllm_server(tiny_model: TinyModel, engine_log_dir: Path) -> Iterator[RunningEngine]:
    """vLLM (CPU build) serving the tiny HF model as `servetune-tiny`."""
    _require("vllm")
    cfg = EngineConfig(
        engine="vllm", model=str(tiny_model.hf_dir), served_model_name=tiny_model.served_name, flags=VLLM_FLAGS
    )
    yield from _serve(cfg, engine_log_dir, 600)
