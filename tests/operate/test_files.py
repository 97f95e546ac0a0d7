"""Generated files against the real validators (nginx -t, promtool, kubernetes-validate, the compose schema),
the sizing rules, the planned fallback's numbers, redaction, and bad inputs. No engine is started."""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from servetune.engines.config import EngineConfig
from servetune.errors import ServetuneError
from servetune.hardware.catalog import get_gpu
from servetune.operate import alerts, proxy
from servetune.operate.deploy import DeployInputs, write_deployment
from servetune.operate.deploy_args import TARGETS
from servetune.operate.evidence import Sized
from servetune.operate.fallback import plan_fallback
from servetune.operate.source import load_source, load_tuning_folder
from servetune.operate.supervisor import ServeOptions
from servetune.plan.api import plan_for

HERE = Path(__file__).parent
REPO = HERE.parents[1]
DATA = HERE / "data"
PLANS = REPO / "examples" / "plans"
EXAMPLES = REPO / "examples" / "deploy"
CANARY = "sk-canary-5e1f0b7d"


def _need(tool: str) -> str:
    found = shutil.which(tool) or (f"/usr/sbin/{tool}" if Path(f"/usr/sbin/{tool}").exists() else None)
    if not found:
        pytest.skip(f"{tool} not installed (scripts/setup.sh installs it)")
    return found


def _run(argv: list[str], cwd: Path | None = None) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, timeout=60, check=False)
    assert proc.returncode == 0, f"{argv}: {proc.stdout}\n{proc.stderr}"
    return proc.stdout + proc.stderr


def nginx_t(conf: Path, tmp_path: Path) -> None:
    (tmp_path / "ngx").mkdir(exist_ok=True)
    proxy.check_config(conf, tmp_path / "ngx")


def validate_compose(path: Path) -> None:
    import jsonschema

    schema = json.loads((DATA / "compose-spec.json").read_text())
    jsonschema.Draft7Validator(schema).validate(yaml.safe_load(path.read_text()))


def validate_kubernetes(path: Path) -> None:
    import kubernetes_validate

    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert {d["kind"] for d in docs} >= {"Deployment", "Service", "PodDisruptionBudget", "ConfigMap"}
    for doc in docs:
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)


def validate_prometheus(folder: Path, rules: Path) -> None:
    promtool = _need("promtool")
    _run([promtool, "check", "rules", str(rules)])
    _run([promtool, "check", "config", "prometheus.yml"], cwd=folder)


def validate_dashboard(path: Path, tmp_path: Path) -> None:
    """Every panel query parses as PromQL: checked by promtool as recording rules."""
    board = json.loads(path.read_text())
    exprs = [t["expr"] for p in board["panels"] for t in p["targets"]]
    rules = {"groups": [{"name": "dash", "rules": [{"record": f"dash:q{i}", "expr": e} for i, e in enumerate(exprs)]}]}
    f = tmp_path / "dash-rules.yml"
    f.write_text(yaml.safe_dump(rules))
    _run([_need("promtool"), "check", "rules", str(f)])


def check_all(out: Path, tmp_path: Path) -> None:
    nginx_t(out / "compose" / "nginx.conf", tmp_path)
    validate_compose(out / "compose" / "compose.yaml")
    validate_prometheus(out / "compose", out / "compose" / "alerts.yml")
    validate_prometheus(out / "systemd", out / "systemd" / "alerts.yml")
    validate_dashboard(out / "compose" / "grafana" / "dashboards" / "servetune.json", tmp_path)
    validate_dashboard(out / "systemd" / "grafana-dashboard.json", tmp_path)
    (k8s,) = (out / "kubernetes").glob("*.yaml")
    validate_kubernetes(k8s)


def test_above_regex_matches_exactly_the_larger_numbers() -> None:
    rng = random.Random(7)
    for n in [0, 1, 9, 10, 99, 100, 1999, 4096, 65535, *(rng.randrange(1, 10**7) for _ in range(200))]:
        rx = re.compile(proxy.above_regex(n))
        for value in {0, 1, n - 1, n, n + 1, n * 10, *(rng.randrange(0, 3 * n + 10) for _ in range(50))}:
            if value < 0:
                continue
            assert bool(rx.match(str(value))) == (value > n), (n, value)
            assert bool(rx.match("00" + str(value))) == (value > n)


def test_serve_config_passes_nginx_t_in_every_state(tmp_path: Path) -> None:
    settings = proxy.ProxySettings(
        read_timeout=Sized(value=300, source="test"),
        body_bytes=Sized(value=4 << 20, source="test"),
        long_prompt_bytes=Sized(value=20000, source="test"),
    )
    for ups in ({"main": None}, {"main": "127.0.0.1:1234"}, {"main": "127.0.0.1:1", "long": None}):
        conf = tmp_path / "nginx.conf"
        conf.write_text(proxy.render(settings, ups, prefix=tmp_path))
        proxy.check_config(conf, tmp_path)
        text = conf.read_text()
        assert "proxy_buffering off" in text and "proxy_read_timeout 300s" in text
        assert ("long;" in text) == ("long" in ups)


def test_servetune_nginx_names_the_nginx_serve_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An nginx unpacked from Debian's package into a prefix of its own (the GPU device has none installed) is
    found through $SERVETUNE_NGINX; a path that is no executable is a clear error naming the variable."""
    real = _need("nginx")
    wrapper = tmp_path / "bin" / "nginx"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv(proxy.NGINX_ENV, str(wrapper))
    assert proxy.nginx_binary() == str(wrapper)
    conf = tmp_path / "nginx.conf"
    settings = proxy.ProxySettings(
        read_timeout=Sized(value=60, source="t"), body_bytes=Sized(value=1 << 20, source="t")
    )
    conf.write_text(proxy.render(settings, {"main": None}, prefix=tmp_path))
    proxy.check_config(conf, tmp_path)
    monkeypatch.setenv(proxy.NGINX_ENV, str(tmp_path / "missing"))
    with pytest.raises(ServetuneError) as info:
        proxy.nginx_binary()
    assert "SERVETUNE_NGINX" in info.value.problem and "SERVETUNE_NGINX" in info.value.fix


def test_no_idle_connections_kept_to_llamacpp_and_none_past_the_engines_idle_limit(tmp_path: Path) -> None:
    """llama.cpp's server gives each open connection a thread and drops idle ones at 5 s (a request sent on a
    closing one failed through nginx in benchmarks/operate): no upstream keepalive for it; vLLM's connections are
    kept, for 4 s at most (uvicorn closes idle ones at 5 s)."""
    assert proxy.upstream_keepalive(["llamacpp"]) == 0 and proxy.upstream_keepalive(["vllm", "llamacpp"]) == 0
    assert proxy.upstream_keepalive(["vllm"]) == 64
    for engine in ("llamacpp", "vllm"):
        settings = proxy.ProxySettings(
            read_timeout=Sized(value=300, source="test"),
            body_bytes=Sized(value=4 << 20, source="test"),
            upstream_keepalive=proxy.upstream_keepalive([engine]),
        )
        conf = tmp_path / f"{engine}.conf"
        conf.write_text(proxy.render(settings, {"main": "127.0.0.1:1234"}, prefix=tmp_path))
        proxy.check_config(conf, tmp_path)
        upstream = conf.read_text().split("upstream servetune_main {")[1].split("}")[0]
        assert ("keepalive 64;" in upstream and "keepalive_timeout 4s;" in upstream) == (engine == "vllm"), upstream


@pytest.mark.parametrize("plan", sorted(p.name for p in PLANS.glob("*.json")))
def test_seed_plans_deploy_files_validate(plan: str, tmp_path: Path) -> None:
    inputs = DeployInputs.from_path(PLANS / plan, name="seed", cold_start_s=251, cold_start_source="test")
    write_deployment(inputs, tmp_path / "out", TARGETS)
    check_all(tmp_path / "out", tmp_path)


def test_committed_examples_validate(tmp_path: Path) -> None:
    """examples/deploy/ (regenerated by examples/deploy/run.sh) passes every validator as committed."""
    folders = sorted(p for p in EXAMPLES.iterdir() if (p / "compose").is_dir())
    assert len(folders) >= 5
    for folder in folders:
        check_all(folder, tmp_path)


def test_tuning_folder_sizes_every_number_from_measurements(tmp_path: Path) -> None:
    src = load_tuning_folder(DATA / "tune-tiny")
    assert src.cfg.engine == "llamacpp" and src.cfg.flags["parallel"] == 4
    ev = src.evidence
    assert set(ev.cold_starts_s) == {"llama-4-slots", "llama-2-slots"}
    assert ev.longest_request and "long_generation.e2el_ms" in ev.longest_request.source
    assert ev.slos["ttft_p99_ms"] == 2000
    inputs = DeployInputs.from_path(DATA / "tune-tiny", name="tiny")
    out = write_deployment(inputs, tmp_path / "out", TARGETS)
    check_all(tmp_path / "out", tmp_path)
    k8s = next(p for p in out if p.suffix == ".yaml" and "kubernetes" in str(p)).read_text()
    dep = next(d for d in yaml.safe_load_all(k8s) if d and d["kind"] == "Deployment")
    probe = dep["spec"]["template"]["spec"]["containers"][0]["startupProbe"]
    longest = max(ev.cold_starts_s.values())
    assert probe["failureThreshold"] * probe["periodSeconds"] >= 2 * longest  # sized from the measured cold start
    assert "measured launch_s" in k8s
    conf = (tmp_path / "out" / "compose" / "nginx.conf").read_text()
    assert "read timeout:" in conf and "long_generation.e2el_ms" in conf


def test_alert_thresholds_come_from_slos_and_capacity() -> None:
    inp = alerts.AlertInputs(
        name="x",
        engine="vllm",
        ttft_p99_s=alerts.latency_bound(500, None, "ttft_p99"),
        tpot_p99_s=alerts.latency_bound(None, Sized(value=0.04, source="measured"), "tpot_p99"),
        max_concurrency=Sized(value=10.0, source="facts"),
    )
    data, _ = alerts.rules(inp)
    by = {r["alert"]: r for r in data["groups"][0]["rules"]}
    assert by["TTFTp99AboveSLO"]["expr"].endswith("> 0.5") and "SLO" in by["TTFTp99AboveSLO"]["annotations"]["source"]
    assert by["TPOTp99AboveSLO"]["expr"].endswith("> 0.08")  # no SLO: 2x the measured p99
    assert by["KVCacheNearlyFull"]["expr"].endswith("> 0.9")  # 1 - 1/10
    assert "histogram_quantile(0.99" in by["TTFTp99AboveSLO"]["expr"]
    assert {"EngineDown", "EngineCrashLoop", "EngineRestarted", "QueueBacklog", "Preempting"} <= set(by)


def test_planned_fallback_numbers_are_the_planners() -> None:
    """Seed 000: TP2 on 2x A100 PCIe → TP1 on one, 128K kept, max_num_seqs lowered to what fits."""
    cfg = EngineConfig(
        model="qwen3.6-27b", flags={"tensor-parallel-size": 2, "max-model-len": "128K", "language-model-only": True}
    )
    gpu = get_gpu("A100-80G-PCIe")
    fb = plan_fallback(cfg, gpu, 2)
    before, after = plan_for(cfg, gpu, 2), plan_for(fb.cfg, gpu, 1)
    assert after.feasible and after.tensor_parallel_size == 1 and after.max_model_len == 131072
    assert fb.before and fb.after
    assert fb.before.kv_cache_tokens == before.kv_cache_tokens and fb.after.kv_cache_tokens == after.kv_cache_tokens
    assert fb.after.max_num_seqs == int(after.max_concurrency) == fb.cfg.flags["max-num-seqs"]
    text = fb.gives_up()
    assert f"{before.kv_cache_tokens:,} → {after.kv_cache_tokens:,}" in text and "tensor parallel 2 → 1" in text


def test_fallback_shortens_max_model_len_when_it_no_longer_fits() -> None:
    """Seed 004's Qwen2-7B at its full 131K on TP2 of A10G: one A10G cannot hold 131K, the fallback says how much."""
    cfg = EngineConfig(model="qwen2-7b", flags={"tensor-parallel-size": 2})
    fb = plan_fallback(cfg, get_gpu("A10G"), 2)
    assert fb.after and fb.before and fb.after.max_model_len < fb.before.max_model_len
    assert plan_for(fb.cfg, get_gpu("A10G"), 1).feasible


def test_no_secret_in_any_generated_file(tmp_path: Path) -> None:
    cfg = {
        "engine": "vllm",
        "model": "/models/m",
        "flags": {"api-key": CANARY, "max-model-len": 4096},
        "env": {"HF_TOKEN": CANARY + "-hf", "VLLM_LOGGING_LEVEL": "INFO"},
    }
    src = tmp_path / "engine.yaml"
    src.write_text(yaml.safe_dump(cfg))
    out = write_deployment(DeployInputs.from_path(src, name="canary"), tmp_path / "out", TARGETS)
    for path in out:
        assert CANARY not in path.read_text(), path
    compose = (tmp_path / "out" / "compose" / "compose.yaml").read_text()
    assert "${VLLM_API_KEY:?" in compose and "${HF_TOKEN:?" in compose and "VLLM_LOGGING_LEVEL: INFO" in compose
    k8s = (tmp_path / "out" / "kubernetes" / "canary.yaml").read_text()
    assert "secretKeyRef" in k8s


@pytest.mark.parametrize(
    ("values", "word"),
    [
        ({"liveness_period_s": 0}, "liveness_period_s"),
        ({"liveness_period_s": float("nan")}, "liveness_period_s"),
        ({"crash_loop_failures": 0}, "crash_loop_failures"),
        ({"listen_port": 99999}, "listen_port"),
        ({"drain_s": -1}, "drain_s"),
    ],
)
def test_bad_serve_options_are_clear_errors(values: dict, word: str, tmp_path: Path) -> None:
    with pytest.raises(ServetuneError) as info:
        ServeOptions.build(run_dir=tmp_path, **values)
    assert word in info.value.problem and info.value.fix


def _numeric_fields() -> list[tuple[str, type]]:
    from servetune.operate.serve_options import ServeArgs

    out = []
    for name, field in ServeArgs.model_fields.items():
        kinds = {a for a in getattr(field.annotation, "__args__", (field.annotation,)) if a is not type(None)}
        if kinds & {int, float}:
            out.append((name, int if int in kinds else float))
    return out


@pytest.mark.parametrize(("name", "kind"), _numeric_fields())
def test_every_numeric_serve_option_has_an_upper_bound(name: str, kind: type, tmp_path: Path) -> None:
    """`--liveness-period 1e300` was accepted and killed the liveness thread (OverflowError: serve ran unwatched);
    `--drain 1e300` made nginx refuse its own config. A huge value of any number is refused, naming it."""
    from servetune.operate.serve_options import ServeArgs

    huge = 10**18 if kind is int else 1e300
    with pytest.raises(ServetuneError) as info:
        ServeArgs.build(run_dir=tmp_path, **{name: huge})
    assert f"{name}: input should be less than" in info.value.problem and info.value.fix


def test_bad_sources_are_clear_errors(tmp_path: Path) -> None:
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00garbage")
    (tmp_path / "list.yaml").write_text("[1, 2]")
    (tmp_path / "bad.yaml").write_text("engine: nosuch\nmodel: m\n")
    (tmp_path / "empty").mkdir()
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "results.json").write_text('{"hello": 1}')
    for name in ("bin.yaml", "list.yaml", "bad.yaml", "missing.yaml", "empty", "foreign"):
        with pytest.raises(ServetuneError) as info:
            load_source(tmp_path / name)
        assert info.value.problem, name
    with pytest.raises(ServetuneError):
        DeployInputs.from_path(PLANS / "000-2xa100-pcie-tp2-128k.json", name="Bad Name")
    with pytest.raises(ServetuneError):
        DeployInputs.from_path(PLANS / "000-2xa100-pcie-tp2-128k.json", cold_start_s=float("inf"))
