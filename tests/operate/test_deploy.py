"""`servetune deploy` per engine: each file runs the engine itself (llama.cpp's server on the GGUF file, SGLang's
image and module, vLLM's image), images pinned, no secret in clear, no input able to add a line or a key, a
PodDisruptionBudget that permits drains, bounded inputs; checked by the real validators (the compose schema,
kubernetes-validate, `systemd-analyze verify`). No engine is started (test_deploy_run.py starts them)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tests.operate.deploy_checks import UNIT_KEYS, unit_lines, validate_compose, validate_kubernetes

from servetune.cli.entry import main
from servetune.engines.commands import EnvRef, container_launch
from servetune.engines.config import EngineConfig
from servetune.engines.flagtable import ENGINES, table_for, versions
from servetune.errors import ServetuneError
from servetune.operate.deploy import DeployInputs, write_deployment
from servetune.operate.deploy_args import TARGETS, parse_targets
from servetune.secrets import Redactor, is_secret_flag, redact_argv, secret_texts

HERE = Path(__file__).parent
DATA = HERE / "data"
TINY_FOLDER = DATA / "tune-tiny"
CANARY = "sk-canary-2c9d41e7"


def _config(tmp_path: Path, data: dict, name: str = "engine.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def _deploy(source: Path, out: Path, **kw) -> dict[str, Path]:
    files = write_deployment(DeployInputs.from_path(source, **kw), out, TARGETS)
    return {str(p.relative_to(out)): p for p in files}


def _engine(out: Path) -> dict:
    return yaml.safe_load((out / "compose" / "compose.yaml").read_text())["services"]["engine"]


def _container(out: Path) -> dict:
    (k8s,) = (out / "kubernetes").glob("*.yaml")
    dep = next(d for d in yaml.safe_load_all(k8s.read_text()) if d and d["kind"] == "Deployment")
    return dep["spec"]["template"]["spec"]["containers"][0]


def verify_unit(unit: Path, tmp_path: Path) -> None:
    """`systemd-analyze verify` of the unit, with its ExecStart program pointed at this checkout's servetune (the
    unit names /usr/local/bin/servetune, where an install puts it); a warning (an unknown key, a line without
    `=`) fails as an error does."""
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed (Debian: apt-get install systemd)")
    servetune = Path(sys.executable).with_name("servetune")
    copy = tmp_path / unit.name
    copy.write_text(unit.read_text().replace("/usr/local/bin/servetune", str(servetune)))
    proc = subprocess.run([tool, "verify", str(copy)], capture_output=True, text=True, timeout=60, check=False)
    said = [line for line in (proc.stdout + proc.stderr).splitlines() if str(copy) in line or "ignoring" in line]
    assert proc.returncode == 0 and not said, proc.stdout + proc.stderr


# ---- targets ----------------------------------------------------------------------------------------------------
def test_targets_take_a_comma_list_and_repeated_flags_alike(tmp_path: Path, capsys) -> None:
    """The README's `--target compose,kubernetes,systemd` was 'unknown target'; a repeated --target kept the last."""
    assert parse_targets(["compose,kubernetes,systemd"]) == TARGETS
    assert parse_targets(["systemd", "compose"]) == ("compose", "systemd")
    assert parse_targets(["kubernetes, systemd", "kubernetes"]) == ("kubernetes", "systemd")
    assert parse_targets([]) == TARGETS and parse_targets(["all"]) == TARGETS
    with pytest.raises(ServetuneError, match="unknown --target 'swarm'"):
        parse_targets(["compose,swarm"])
    for argv, made in (
        ([], {"compose", "kubernetes", "systemd"}),  # none given: all (the args model's default, as written)
        (["--target", "compose,kubernetes,systemd"], {"compose", "kubernetes", "systemd"}),
        (["--target", "compose", "--target", "systemd"], {"compose", "systemd"}),
    ):
        out = tmp_path / ("-".join(argv) or "none-given")
        with pytest.raises(SystemExit) as done:
            main(["deploy", str(TINY_FOLDER), "--out", str(out), "--name", "tiny", *argv])
        assert done.value.code == 0, capsys.readouterr().err
        assert {p.name for p in out.iterdir()} == made


def test_a_target_that_refuses_the_config_stops_every_target_before_a_file_is_written(tmp_path: Path, capsys) -> None:
    """With the default --target all, an SGLang flag systemd cannot pass exited 2 with compose/ and kubernetes/
    already written: a half deployment that looked whole."""
    flags = {"ssl-keyfile-password": CANARY}
    path = _config(tmp_path, {"engine": "sglang", "model": "/models/qwen", "version": "0.5.23", "flags": flags})
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as done:
        main(["deploy", str(path), "--out", str(out)])
    err = capsys.readouterr().err
    assert done.value.code == 2 and "systemd target cannot pass" in err, err
    assert not out.exists(), sorted(str(p.relative_to(out)) for p in out.rglob("*"))


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--gpu", "junk"], "unknown GPU 'junk'"),  # was written into the files as a GPU type
        (["--gpu", "H200x0"], "GPU count in 'H200x0'"),
        (["--gpu", "H200x100"], "100 GPUs per replica"),
        (["--gpu", "H200x2", "--gpus", "4"], "--gpus says 4"),
        (["--gpus", "0"], "--gpus: input should be greater than or equal to 1"),  # the args model's bound
        (["--slo", "ttft_p99_ms=1e308"], "more than a day"),  # was accepted as an alert threshold
        (["--slo", "ttft_p99_ms=nan"], "bad --slo"),
        (["--slo", "ttft_p99=500"], "did you mean `ttft_p99_ms`"),
    ],
)
def test_bad_gpu_and_slo_arguments_are_refused(argv: list[str], said: str, tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as done:
        main(["deploy", str(TINY_FOLDER), "--out", str(tmp_path / "o"), *argv])
    err = capsys.readouterr().err
    assert done.value.code == 2 and said in err and "unexpectedly" not in err, err
    assert not (tmp_path / "o").exists()


def test_the_gpu_count_of_gpu_is_the_replicas(tmp_path: Path, capsys) -> None:
    """`--gpu H200x2` was taken as a GPU type named "H200x2" and the count left at the source's (1)."""
    out = tmp_path / "o"
    with pytest.raises(SystemExit) as done:
        main(["deploy", str(TINY_FOLDER), "--out", str(out), "--gpu", "H200x2", "--target", "compose,kubernetes"])
    assert done.value.code == 0, capsys.readouterr().err
    (device,) = _engine(out)["deploy"]["resources"]["reservations"]["devices"]
    assert device["count"] == 2 and _container(out)["resources"]["limits"] == {"nvidia.com/gpu": 2}
    assert "H200x2" not in (out / "compose" / "compose.yaml").read_text()


# ---- per engine -------------------------------------------------------------------------------------------------
def test_llamacpp_files_run_llama_server_on_the_gguf_file_with_a_pinned_image(tmp_path: Path) -> None:
    """They ran `/app/llama-server -m servetune.engines.llamacpp_server -m /models/tiny` from `:server`."""
    out = tmp_path / "out"
    _deploy(TINY_FOLDER, out, name="tiny")
    engine, container = _engine(out), _container(out)
    for program, args in ((engine["entrypoint"], engine["command"]), (container["command"], container["args"])):
        assert program == ["/app/llama-server"]
        assert args[:4] == ["-m", "/models/tiny-llama-f32.gguf", "--alias", "servetune-tiny"]
        assert args.count("-m") == 1 and not any("servetune" in a and "engines" in a for a in args)
    for image in (engine["image"], container["image"]):
        assert re.fullmatch(r"ghcr\.io/ggml-org/llama\.cpp:server-b\d+", image), image
    assert engine["volumes"] == [
        {"type": "bind", "source": "${MODEL_DIR:-./models}", "target": "/models", "read_only": True}
    ]
    assert {"name": "model", "mountPath": "/models", "readOnly": True} in container["volumeMounts"]
    validate_compose(out / "compose" / "compose.yaml")
    validate_kubernetes(out / "kubernetes" / "tiny.yaml")
    verify_unit(out / "systemd" / "servetune-tiny.service", tmp_path)
    assert yaml.safe_load((out / "systemd" / "engine.yaml").read_text().split("\n", 1)[1])["model"] == "tiny"


def test_llamacpp_gpu_image_is_the_cuda_build(tmp_path: Path) -> None:
    path = _config(tmp_path, {"engine": "llamacpp", "model": "/srv/m/q.gguf", "version": "b6000"})
    inputs = DeployInputs.from_path(path, gpu="L4")
    assert inputs.image.ref == "ghcr.io/ggml-org/llama.cpp:server-cuda-b6000" and not inputs.image.guessed
    with pytest.raises(ServetuneError, match="GGUF"):
        DeployInputs.from_path(_config(tmp_path, {"engine": "llamacpp", "model": "/srv/m/folder"}, "d.yaml"))


def test_sglang_gets_its_own_image_and_module_and_no_secret_in_clear(tmp_path: Path) -> None:
    """An SGLang config got vllm/vllm-openai:latest, /app/llama-server and two secrets in clear (review F1)."""
    flags = {
        "tp-size": 1,
        "ssl-keyfile-password": CANARY + "-ssl",
        "admin-api-key": CANARY + "-admin",
        "api-key": CANARY,
    }
    path = _config(tmp_path, {"engine": "sglang", "model": "/models/qwen", "version": "0.5.23", "flags": flags})
    out = tmp_path / "out"
    files = write_deployment(DeployInputs.from_path(path, gpu="H200"), out, ("compose", "kubernetes"))
    for f in files:
        assert CANARY not in f.read_text(), f
    engine, container = _engine(out), _container(out)
    assert engine["image"] == container["image"] == "lmsysorg/sglang:v0.5.23"
    assert engine["entrypoint"] == container["command"] == ["python3", "-m", "sglang.launch_server"]
    assert engine["command"][:2] == ["--model-path", "/models/qwen"]
    args = engine["command"]
    assert args[args.index("--ssl-keyfile-password") + 1].startswith("${SGLANG_SSL_KEYFILE_PASSWORD:?")
    assert args[args.index("--admin-api-key") + 1].startswith("${SGLANG_ADMIN_API_KEY:?")
    assert args[args.index("--api-key") + 1].startswith("${SGLANG_API_KEY:?")
    k8s_args = container["args"]
    assert k8s_args[k8s_args.index("--api-key") + 1] == "$(SGLANG_API_KEY)"
    keys = {e["name"]: e["valueFrom"]["secretKeyRef"]["key"] for e in container["env"] if "valueFrom" in e}
    assert keys == {
        "SGLANG_SSL_KEYFILE_PASSWORD": "sglang-ssl-keyfile-password",
        "SGLANG_ADMIN_API_KEY": "sglang-admin-api-key",
        "SGLANG_API_KEY": "sglang-api-key",
    }
    validate_compose(out / "compose" / "compose.yaml")
    validate_kubernetes(out / "kubernetes" / "servetune.yaml")
    with pytest.raises(ServetuneError, match=r"systemd target cannot pass .*--ssl-keyfile-password"):
        write_deployment(DeployInputs.from_path(path), tmp_path / "sd", ("systemd",))


def test_vllm_files_run_vllm_serve_from_the_pinned_image(tmp_path: Path) -> None:
    path = _config(tmp_path, {"engine": "vllm", "model": "/srv/Qwen3-8B", "flags": {"max-model-len": "32k"}})
    out = tmp_path / "out"
    _deploy(path, out, name="q", gpu="H200")
    engine, container = _engine(out), _container(out)
    assert engine["entrypoint"] == container["command"] == ["vllm", "serve"]
    assert engine["command"][:3] == ["/models/Qwen3-8B", "--served-model-name", "/srv/Qwen3-8B"]
    assert engine["image"] == f"vllm/vllm-openai:v{versions('vllm')[-1]}"  # no version given: the newest known
    assert "pin the release you measured" in (out / "compose" / "compose.yaml").read_text()
    assert "32000" in engine["command"]
    versioned = _config(tmp_path, {"engine": "vllm", "model": "/srv/m", "version": "0.24.0+cu128"}, "v.yaml")
    assert DeployInputs.from_path(versioned).image.ref == "vllm/vllm-openai:v0.24.0"
    validate_compose(out / "compose" / "compose.yaml")
    validate_kubernetes(out / "kubernetes" / "q.yaml")
    verify_unit(out / "systemd" / "servetune-q.service", tmp_path)


def test_engines_deploy_cannot_run_are_refused(tmp_path: Path) -> None:
    path = _config(tmp_path, {"engine": "sim", "model": "/srv/m", "flags": {"gpu": "H200"}})
    with pytest.raises(ServetuneError, match="not sim") as info:
        DeployInputs.from_path(path)
    assert "imitates" in (info.value.fix or "")


# ---- secrets ----------------------------------------------------------------------------------------------------
def test_one_rule_of_secret_flags_over_every_engines_flag_table() -> None:
    """`is_secret_flag` is the only rule: over every table, of the flags that take text, it finds exactly those
    that take a secret (the fixed list it replaces missed SGLang's --ssl-keyfile-password and --admin-api-key);
    a secret-sounding flag of numbers (SGLang's --bucket-time-to-first-token) holds no secret text."""
    secret: dict[str, set[str]] = {}
    for engine in ENGINES:
        for version in versions(engine) or [None]:
            table = table_for(engine, version)
            for name in table.names:
                spec = table[name]
                text = spec.kind in ("str", "json_or_str") or (spec.kind in ("list", "append") and spec.item == "str")
                if is_secret_flag(name) and text:
                    secret.setdefault(engine, set()).add(name)
    assert secret == {
        "vllm": {"api-key", "hf-token"},
        "sim": {"api-key", "hf-token"},
        "llamacpp": {"api-key", "hf-token"},
        "sglang": {"api-key", "admin-api-key", "ssl-keyfile-password"},
    }
    assert table_for("vllm").lookup("--api-key").kind == "list"  # several keys: each one a secret
    assert (
        is_secret_flag("--api-key=sk-1") and not is_secret_flag("--ssl-keyfile") and not is_secret_flag("spec-tokens")
    )
    assert secret_texts([0.1, 0.5]) == [] and secret_texts(["a", "b"]) == ["a", "b"]


def test_list_valued_and_dash_led_secrets_are_redacted_and_referenced(tmp_path: Path) -> None:
    """vLLM's --api-key is a list: the one Redactor and EngineConfig.public() missed list values."""
    keys = [CANARY, CANARY + "-second"]
    cfg = EngineConfig(engine="vllm", model="/srv/m", flags={"api-key": keys}, env={"HF_TOKEN": CANARY + "-hf"})
    assert CANARY not in json.dumps(cfg.public())
    assert CANARY not in Redactor.of(cfg).text(f"vllm serve --api-key {keys[0]} --api-key={keys[1]}")
    assert cfg.api_key == CANARY
    dashed = EngineConfig(engine="sglang", model="/srv/m", flags={"api-key": "-" + CANARY})  # written --api-key=KEY
    launch = container_launch(dashed, model="/models/m")
    assert EnvRef("SGLANG_API_KEY", "--api-key=") in launch.args and CANARY not in str(launch)
    out = tmp_path / "out"
    for f in _deploy(_config(tmp_path, cfg.model_dump(mode="json")), out, name="keys", gpu="H200").values():
        assert CANARY not in f.read_text(), f
    args = _engine(out)["command"]
    first, second = args[args.index("--api-key") + 1 :][:2]
    assert first == "${VLLM_API_KEY:?set VLLM_API_KEY in the environment or .env}" and "VLLM_API_KEY_2" in second
    assert "VLLM_API_KEY=" in (out / "systemd" / "keys.env.example").read_text()
    assert "HF_TOKEN=" in (out / "systemd" / "keys.env.example").read_text()


def test_a_command_line_is_redacted_by_the_same_rule() -> None:
    """A serve's lock file says its command line: `-- --api-key K1 K2` (vLLM's list) and `--hf-token=T` are not
    written in clear; numbers after `--max-num-batched-tokens` stay."""
    argv = ["servetune", "serve", "--", "--api-key", "sk-a1b2", "sk-c3d4", "--enforce-eager", "--hf-token=hf_x1"]
    argv += ["--max-num-batched-tokens", "8192"]
    assert redact_argv(argv) == [
        "servetune", "serve", "--", "--api-key", "<redacted>", "<redacted>", "--enforce-eager", "--hf-token=<redacted>",
        "--max-num-batched-tokens", "8192",
    ]  # fmt: skip


def test_an_alias_of_a_secret_flag_is_a_secret_too(tmp_path: Path) -> None:
    """llama.cpp's `-hft` is --hf-token: flags are read under their canonical names before the rule applies."""
    path = _config(tmp_path, {"engine": "llamacpp", "model": "/m/x.gguf", "flags": {"hft": CANARY}})
    for f in _deploy(path, tmp_path / "out").values():
        assert CANARY not in f.read_text(), f


def test_an_api_key_from_the_environment_is_the_one_probes_send(monkeypatch) -> None:
    """A systemd EnvironmentFile sets VLLM_API_KEY; vLLM demands it, so servetune's probes must send it."""
    monkeypatch.setenv("VLLM_API_KEY", CANARY)
    assert EngineConfig(engine="vllm", model="m").api_key == CANARY
    assert EngineConfig(engine="vllm", model="m", flags={"api-key": "own"}).api_key == "own"
    assert EngineConfig(engine="sglang", model="m").api_key is None  # SGLang reads no variable


# ---- PodDisruptionBudget ----------------------------------------------------------------------------------------
def test_the_disruption_budget_permits_a_drain(tmp_path: Path) -> None:
    """minAvailable 1 with 1 replica blocked every node drain."""
    out = tmp_path / "out"
    _deploy(TINY_FOLDER, out, name="tiny")
    docs = [d for d in yaml.safe_load_all((out / "kubernetes" / "tiny.yaml").read_text()) if d]
    pdb = next(d for d in docs if d["kind"] == "PodDisruptionBudget")
    replicas = next(d for d in docs if d["kind"] == "Deployment")["spec"]["replicas"]
    spec = pdb["spec"]
    allowed = spec["maxUnavailable"] if "maxUnavailable" in spec else replicas - spec["minAvailable"]
    assert allowed >= 1, spec


# ---- injection ----------------------------------------------------------------------------------------------------
def _hostile_folder(tmp_path: Path) -> Path:
    """tune-tiny with its winner renamed to carry systemd and YAML lines (tune accepts any variant name)."""
    folder = tmp_path / "hostile"
    folder.mkdir()
    evil = "llama-4\\nExecStartPre=/bin/touch /tmp/pwned\\n[Service]\\nUser=root\\u2028evil: key\\\\"
    text = (TINY_FOLDER / "results.json").read_text().replace('"llama-4-slots"', f'"{evil}"')
    (folder / "results.json").write_text(text)
    return folder


def test_no_input_adds_a_line_or_a_key(tmp_path: Path) -> None:
    """A variant name with newlines became live `[Service]` / `ExecStartPre=` lines in the unit, and a hostile
    --cold-start-source or model path new YAML keys."""
    out = tmp_path / "out"
    files = _deploy(_hostile_folder(tmp_path), out, name="tiny")
    unit = out / "systemd" / "servetune-tiny.service"
    assert unit_lines(unit) == UNIT_KEYS
    verify_unit(unit, tmp_path)
    for rel, path in files.items():
        text = path.read_text()
        assert not any(line.startswith(("ExecStartPre", "User=root", "evil:")) for line in text.splitlines()), rel
    compose = yaml.safe_load((out / "compose" / "compose.yaml").read_text())
    assert set(compose) == {"name", "x-servetune-sources", "services"}
    validate_compose(out / "compose" / "compose.yaml")
    validate_kubernetes(out / "kubernetes" / "tiny.yaml")
    with pytest.raises(ServetuneError, match="--cold-start-source must be one line"):
        DeployInputs.from_path(TINY_FOLDER, cold_start_s=10, cold_start_source="ok\nservices: {evil: {}}")
    with pytest.raises(ServetuneError, match="environment variable name"):
        DeployInputs.from_path(_config(tmp_path, {"model": "/m", "env": {"A\nB": "1"}}))


def test_dollar_and_percent_are_literal_in_every_file(tmp_path: Path) -> None:
    """compose interpolates `$`, the kubelet `$(VAR)`, systemd `$VAR` and `%x`: a literal one is escaped."""
    cfg = {
        "engine": "vllm",
        "model": "/srv/$HOME/m%i",
        "flags": {"chat-template": "$(whoami) ${USER} 100%"},
        "env": {"NOTE": "$(id)"},
    }
    out = tmp_path / "out"
    _deploy(_config(tmp_path, cfg), out, name="lit", gpu="H200")
    engine = _engine(out)
    assert engine["command"][-1] == "$$(whoami) $${USER} 100%"
    assert engine["environment"]["NOTE"] == "$$(id)"
    assert engine["volumes"][0]["source"] == "${MODEL_DIR:-/srv/$$HOME/m%i}"
    container = _container(out)
    assert container["args"][-1] == "$$(whoami) ${USER} 100%"
    assert {"name": "NOTE", "value": "$$(id)"} in container["env"]
    validate_compose(out / "compose" / "compose.yaml")
    validate_kubernetes(out / "kubernetes" / "lit.yaml")
    verify_unit(out / "systemd" / "servetune-lit.service", tmp_path)


# ---- bounds -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["1e308", "nan", "inf", "-5", "0", "abc", "86401"])
def test_cold_start_is_bounded_with_a_clear_error(value: str, tmp_path: Path, capsys) -> None:
    """`deploy --cold-start-s 1e308` ended in "servetune failed unexpectedly"."""
    with pytest.raises(SystemExit) as done:
        main(["deploy", str(TINY_FOLDER), "--out", str(tmp_path / "o"), f"--cold-start-s={value}"])
    err = capsys.readouterr().err
    assert done.value.code == 2 and "--cold-start-s" in err and "unexpectedly" not in err, err
    assert not (tmp_path / "o").exists()


def test_bad_names_and_plans_are_clear_errors(tmp_path: Path) -> None:
    for name in ("Bad", "é-x", "a" * 41, "x-", "1x"):
        with pytest.raises(ServetuneError, match="bad deployment name"):
            DeployInputs.from_path(TINY_FOLDER, name=name)
    bad = tmp_path / "plan.json"
    bad.write_text(json.dumps({"serve_flags": {}, "model": "m"}))
    with pytest.raises(ServetuneError, match="not a `servetune plan --json` file"):
        DeployInputs.from_path(bad)
