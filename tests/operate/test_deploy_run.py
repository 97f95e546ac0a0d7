"""The command each deployment file would run, run against the tiny model.

The command is read out of the generated compose, Kubernetes and systemd files; the container's model path is
mapped to this machine's tiny model (where the file's own volume says it lies), the image's program to the one
servetune launches here (the adapter's `program()`: llama.cpp's server through xllamacpp, vLLM's API server),
`--host` to 127.0.0.1 and the ports to free ones; the secret references are filled from the environment, as
compose and the kubelet fill them. It runs until /health answers; then its process group is stopped and proven
gone.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from servetune.engines.registry import adapter_for
from servetune.operate.deploy import DeployInputs, write_deployment
from servetune.process.ports import free_port
from servetune.process.proctable import group_members, living
from servetune.tiny.build import TinyModel

HERE = Path(__file__).parent
TINY_FOLDER = HERE / "data" / "tune-tiny"
CANARY = "sk-canary-90be1f2c"
pytestmark = pytest.mark.engine


def _need(module: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        if os.environ.get("CI"):
            pytest.fail(f"{module} is not installed: run scripts/setup.sh")
        pytest.skip(f"{module} not installed (scripts/setup.sh installs it)")


def _compose_word(word: str, env: dict[str, str]) -> str:
    """What compose makes of a value: `${VAR:?…}` / `${VAR:-default}` filled, `$$` a literal `$`."""

    def fill(m: re.Match[str]) -> str:
        name, op, rest = m.group(1), m.group(2), m.group(3)
        if name in env:
            return env[name]
        assert op == ":-", f"compose would stop: {rest}"
        return rest

    return re.sub(r"(?<!\$)\$\{(\w+)(:[?-])?([^}]*)\}", fill, word).replace("$$", "$")


def _kubelet_word(word: str, env: dict[str, str]) -> str:
    """What the kubelet makes of a container argument: `$(VAR)` from the container's environment, `$$(` → `$(`."""
    return re.sub(r"(?<!\$)\$\((\w+)\)", lambda m: env[m.group(1)], word).replace("$$(", "$(")


def _local(engine: str, program: list[str], args: list[str], mount: str, local_dir: str, port: int) -> list[str]:
    """The container's command as this machine runs it (see the module docstring)."""
    adapter = adapter_for(engine)
    assert program == list(adapter.image_program), program
    words = [local_dir + a[len(mount) :] if a == mount or a.startswith(mount + "/") else a for a in args]
    model, rest = (words[0], words[1:]) if adapter.model_flag is None else (words[1], words[2:])
    assert adapter.model_flag is None or words[0] == adapter.model_flag
    here = adapter.program()
    out = [*here, *adapter.model_args(model, here), *rest]
    out[out.index("--host") + 1] = "127.0.0.1"
    out[out.index("--port") + 1] = str(port)
    return out


def _run_until_healthy(
    argv: list[str],
    url: str,
    log: Path,
    timeout_s: float,
    env: dict[str, str],
    then: Callable[[], None] | None = None,
) -> float:
    """Starts `argv` in its own session, waits for `url` to answer 200, runs `then`, stops the group; the seconds
    /health took."""
    start = time.monotonic()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, **env}
        )
    try:
        while True:
            assert proc.poll() is None, f"{shlex.join(argv)} exited {proc.returncode}:\n{log.read_text()[-3000:]}"
            assert time.monotonic() - start < timeout_s, f"no /health in {timeout_s} s:\n{log.read_text()[-3000:]}"
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    healthy = response.status == 200
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                healthy = False
            if healthy:
                took = time.monotonic() - start
                if then is not None:
                    then()
                return took
            time.sleep(0.5)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        deadline = time.monotonic() + 10
        while living(group_members(proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not living(group_members(proc.pid)), f"left running: {living(group_members(proc.pid))}"


def _generate(base: str, model: str, key: str | None) -> int:
    """The HTTP status of a one-token completion, sent with `key` as the bearer token (or none)."""
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    body = json.dumps({"model": model, "prompt": "hi", "max_tokens": 1}).encode()
    request = urllib.request.Request(f"{base}/v1/completions", data=body, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as err:
        return int(err.code)


def test_llamacpp_compose_command_serves_the_gguf_with_the_key_from_the_environment(
    tiny_model: TinyModel, tmp_path: Path
) -> None:
    _need("xllamacpp")
    config = {
        "engine": "llamacpp",
        "model": str(tiny_model.gguf_path),
        "served_model_name": "tiny",
        "flags": {"ctx-size": 2048, "parallel": 1, "threads": 1, "api-key": CANARY},
    }
    source = tmp_path / "engine.yaml"
    source.write_text(yaml.safe_dump(config))
    write_deployment(DeployInputs.from_path(source, name="tiny"), tmp_path / "out", ("compose",))
    text = (tmp_path / "out" / "compose" / "compose.yaml").read_text()
    assert CANARY not in text
    engine = yaml.safe_load(text)["services"]["engine"]
    env = {"LLAMA_API_KEY": CANARY}  # what the operator puts in the environment or .env
    volume = engine["volumes"][0]
    host = _compose_word(volume["source"], env)
    assert host == str(tiny_model.gguf_path.parent)  # the file's own default: where the model lies
    port = free_port()
    argv = _local(
        "llamacpp",
        [_compose_word(w, env) for w in engine["entrypoint"]],
        [_compose_word(w, env) for w in engine["command"]],
        volume["target"],
        host,
        port,
    )
    base = f"http://127.0.0.1:{port}"

    def the_key_is_demanded() -> None:
        assert _generate(base, "tiny", None) == 401 and _generate(base, "tiny", CANARY) == 200

    took = _run_until_healthy(argv, f"{base}/health", tmp_path / "compose.log", 120, {}, the_key_is_demanded)
    print(f"llama.cpp from compose.yaml answered /health in {took:.1f} s")


def test_llamacpp_kubernetes_command_serves_the_tuned_winner(tiny_model: TinyModel, tmp_path: Path) -> None:
    _need("xllamacpp")
    write_deployment(DeployInputs.from_path(TINY_FOLDER, name="tiny"), tmp_path / "out", ("kubernetes",))
    docs = yaml.safe_load_all((tmp_path / "out" / "kubernetes" / "tiny.yaml").read_text())
    container = next(d for d in docs if d and d["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0]
    mount = next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == "model")
    port = free_port()
    argv = _local(
        "llamacpp",
        [_kubelet_word(w, {}) for w in container["command"]],
        [_kubelet_word(w, {}) for w in container["args"]],
        mount,
        str(tiny_model.gguf_path.parent),  # what the PersistentVolumeClaim holds
        port,
    )
    took = _run_until_healthy(argv, f"http://127.0.0.1:{port}/health", tmp_path / "k8s.log", 120, {})
    print(f"llama.cpp from the Kubernetes manifest answered /health in {took:.1f} s")


def test_systemd_unit_command_serves_behind_nginx(tiny_model: TinyModel, tmp_path: Path) -> None:
    """ExecStart is `servetune serve /etc/servetune/NAME/engine.yaml …`: run with the unit's folders here."""
    _need("xllamacpp")
    import shutil

    if not (shutil.which("nginx") or Path("/usr/sbin/nginx").exists()):
        pytest.skip("nginx not installed (scripts/setup.sh installs it)")
    out = tmp_path / "out"
    write_deployment(DeployInputs.from_path(TINY_FOLDER, name="tiny"), out, ("systemd",))
    unit = (out / "systemd" / "servetune-tiny.service").read_text()
    (line,) = [x for x in unit.splitlines() if x.startswith("ExecStart=")]
    words = [w.replace("$$", "$").replace("%%", "%") for w in shlex.split(line.removeprefix("ExecStart="))]
    assert words[:2] == ["/usr/local/bin/servetune", "serve"]
    folders = {"/etc/servetune/tiny": str(out / "systemd"), "/var/lib/servetune/tiny": str(tmp_path / "state")}
    for inside, here in folders.items():
        words = [here + w[len(inside) :] if w.startswith(inside + "/") else w for w in words]
    port = free_port()
    words[words.index("--port") + 1] = str(port)
    words[words.index("--control-port") + 1] = str(free_port())
    argv = [sys.executable, "-m", "servetune", *words[1:]]
    took = _run_until_healthy(argv, f"http://127.0.0.1:{port}/health", tmp_path / "systemd.log", 180, {})
    print(f"servetune serve from the systemd unit answered /health in {took:.1f} s")


def test_vllm_compose_command_serves_the_hf_model(tiny_model: TinyModel, tmp_path: Path) -> None:
    """vLLM's CPU build from the compose file's command (eager, 4096 tokens: about a minute on two idle cores)."""
    _need("vllm")
    config = {
        "engine": "vllm",
        "model": str(tiny_model.hf_dir),
        "served_model_name": "tiny",
        "flags": {"max-model-len": 4096, "max-num-seqs": 16, "enforce-eager": True, "api-key": CANARY},
    }
    source = tmp_path / "engine.yaml"
    source.write_text(yaml.safe_dump(config))
    write_deployment(DeployInputs.from_path(source, name="tiny"), tmp_path / "out", ("compose",))
    engine = yaml.safe_load((tmp_path / "out" / "compose" / "compose.yaml").read_text())["services"]["engine"]
    env = {"VLLM_API_KEY": CANARY}
    volume = engine["volumes"][0]
    port = free_port()
    argv = _local(
        "vllm",
        [_compose_word(w, env) for w in engine["entrypoint"]],
        [_compose_word(w, env) for w in engine["command"]],
        volume["target"],
        _compose_word(volume["source"], env),
        port,
    )
    cfg = DeployInputs.from_path(source).cfg
    local_env = adapter_for("vllm").env(cfg, "127.0.0.1")  # what this CPU machine needs (KV cache space, offline)
    # 900 s, the serve tests' bound: a vLLM CPU start took over 500 s on this 2-core machine under load
    took = _run_until_healthy(argv, f"http://127.0.0.1:{port}/health", tmp_path / "vllm.log", 900, local_env)
    print(f"vLLM from compose.yaml answered /health in {took:.1f} s")
