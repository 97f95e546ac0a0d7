"""Hugging Face model ids resolved from the local cache the way huggingface_hub lays it out (HF_HOME, HF_HUB_CACHE,
refs → snapshots, revisions), with no network: the test builds the cache itself; a name that is not cached is an
error that says how to fetch it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from servetune.errors import ServetuneError
from servetune.model.bundled import bundled_model
from servetune.model.hf_config import load_model_spec
from servetune.model.hub import hub_cache, locate_model, tokenizer_file
from servetune.tiny.build import TinyModel

ROOT = Path(__file__).resolve().parents[2]
MAIN = "a" * 40
OLD = "b" * 40


def build_cache(home: Path, repo: str = "Qwen/Qwen3-32B") -> Path:
    """A hub cache as `hf download` leaves it: blobs, snapshots/<commit>/ links to them, refs/main naming the commit."""
    base = home / "hub" / ("models--" + repo.replace("/", "--"))
    config = bundled_model("qwen3-32b")
    assert config is not None
    for commit, layers in ((MAIN, None), (OLD, 48)):
        data = json.loads((config / "config.json").read_text())
        if layers:
            data["num_hidden_layers"] = layers
        blob = base / "blobs" / f"config-{commit[:4]}"
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_text(json.dumps(data))
        snap = base / "snapshots" / commit
        snap.mkdir(parents=True, exist_ok=True)
        (snap / "config.json").symlink_to(os.path.relpath(blob, snap))
    (base / "refs").mkdir()
    (base / "refs" / "main").write_text(MAIN)
    (base / "refs" / "v1").write_text(OLD)
    return base


@pytest.fixture
def hf_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "hf"
    build_cache(home)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    return home


def test_repo_id_resolves_through_refs_and_revisions(hf_home: Path) -> None:
    found = locate_model("Qwen/Qwen3-32B")
    assert (found.source, found.revision, found.name) == ("hf-cache", MAIN, "Qwen/Qwen3-32B")
    spec = load_model_spec("Qwen/Qwen3-32B")
    assert spec.name == "Qwen/Qwen3-32B" and spec.num_layers == 64
    assert load_model_spec("Qwen/Qwen3-32B", revision="v1").num_layers == 48  # a tag
    assert load_model_spec("Qwen/Qwen3-32B", revision=OLD).num_layers == 48  # a commit


def test_hf_hub_cache_wins_over_hf_home(hf_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "elsewhere"
    monkeypatch.setenv("HF_HUB_CACHE", str(other))
    assert hub_cache() == other
    with pytest.raises(ServetuneError) as err:
        locate_model("Qwen/Qwen3-32B")
    assert "not in the local Hugging Face cache" in err.value.problem and str(other) in err.value.problem


def test_missing_model_revision_and_file_say_how_to_fetch(hf_home: Path) -> None:
    with pytest.raises(ServetuneError) as err:
        locate_model("meta-llama/Llama-3.1-8B")
    assert "never downloads" in err.value.problem
    assert err.value.fix is not None and "hf download meta-llama/Llama-3.1-8B config.json" in err.value.fix
    with pytest.raises(ServetuneError) as err:
        locate_model("Qwen/Qwen3-32B", revision="nope")
    assert "revision 'nope'" in err.value.problem and "main" in err.value.problem
    with pytest.raises(ServetuneError) as err:
        tokenizer_file("Qwen/Qwen3-32B")
    assert "no tokenizer.json" in err.value.problem and "tokenizer.json" in (err.value.fix or "")


def test_tokenizer_from_the_cache(hf_home: Path, tiny_model: TinyModel) -> None:
    snap = hf_home / "hub" / "models--Qwen--Qwen3-32B" / "snapshots" / MAIN
    shutil.copy(tiny_model.tokenizer_json, snap / "tokenizer.json")
    assert tokenizer_file("Qwen/Qwen3-32B") == snap / "tokenizer.json"
    from servetune.load.tokens import LocalTokenizer

    assert LocalTokenizer("Qwen/Qwen3-32B").count_one("hello world") > 0


def test_plan_works_offline_from_a_test_built_cache(tmp_path: Path) -> None:
    home = tmp_path / "hf"
    build_cache(home)
    env = dict(
        os.environ, PYTHONPATH=str(ROOT / "src"), HF_HOME=str(home), HF_HUB_OFFLINE="1", no_proxy="*",
        HTTPS_PROXY="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9",
    )  # fmt: skip
    env.pop("HF_HUB_CACHE", None)
    run = [sys.executable, "-m", "servetune", "plan", "--model", "Qwen/Qwen3-32B", "--gpu", "H200"]
    proc = subprocess.run(run, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "FITS" in proc.stdout and "Qwen/Qwen3-32B on 1x H200" in proc.stdout
    assert "vllm serve Qwen/Qwen3-32B" in proc.stdout  # the command names the model as the user did
    plans = [
        subprocess.run([*run, *rev, "--json"], capture_output=True, text=True, env=env, timeout=120)
        for rev in ([], ["--revision", "v1"])
    ]
    assert all(p.returncode == 0 for p in plans), plans[1].stderr
    new, old = (json.loads(p.stdout) for p in plans)
    assert old["params_loaded"] < new["params_loaded"]  # vLLM's --revision picks the snapshot (48 layers, not 64)
    assert "--revision v1" in old["serve_command"]
    missing = subprocess.run(
        [sys.executable, "-m", "servetune", "plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H200"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert (
        missing.returncode == 2 and "hf download Qwen/Qwen3-8B" in missing.stderr and "Traceback" not in missing.stderr
    )
