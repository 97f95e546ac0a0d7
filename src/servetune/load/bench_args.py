"""`servetune bench`'s command line: servetune's flags and `vllm bench serve`'s, by their names and meanings.

A `vllm bench serve ...` line runs unchanged as `servetune bench ...`: the load flags are `LoadOptions`' (with
vLLM's names, `load/options.py`); the rest is read here into `BenchArgs` — where to send (`--base-url`, or
`--host`/`--port`; `--endpoint /v1/chat/completions` or `--backend openai-chat` for chat), which model
(`--served-model-name`, else `--model`, else the server's first), the request body (`--extra-body` and the
sampling flags `--temperature`, `--top-p`, ...), and vLLM's result files (`--save-result`, `--save-detailed`,
`--append-result`, `--result-dir`, `--result-filename`, `--label`, `--metadata`, `--percentile-metrics`).
Flags of vLLM that change nothing here (`--trust-remote-code`, `--tokenizer-mode`, `--no-stream`: datasets are
local files, never streamed from the Hub) are accepted and named in a note; the ones servetune does not do
(`--profile`, `--ramp-up-strategy`, LoRA, beam search, headers, ...) are errors that say so. Servetune's own
non-streamed requests are `--no-streaming` (vLLM's `--no-stream` is about dataset loading).
"""

from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path
from typing import Any, Literal, NoReturn

from pydantic import BaseModel, ConfigDict, Field

from servetune.errors import ServetuneError
from servetune.load.options import VLLM_FLAGS, LoadOptions, add_arguments, number_list
from servetune.metrics.vllm_format import PERCENTILE_METRICS

SAMPLING_FLAGS = {
    "--temperature": ("temperature", float),
    "--top-p": ("top_p", float),
    "--top-k": ("top_k", int),
    "--min-p": ("min_p", float),
    "--frequency-penalty": ("frequency_penalty", float),
    "--presence-penalty": ("presence_penalty", float),
    "--repetition-penalty": ("repetition_penalty", float),
}
"""vLLM's sampling flags: fields of every request body (`--extra-body` overrides them, as in vLLM)."""
IGNORED_FLAGS = {
    "--trust-remote-code": "servetune runs no model code",
    "--tokenizer-mode": "servetune counts with tokenizer.json or the server's /tokenize",
    "--skip-tokenizer-init": "servetune counts tokens with the server's /tokenize by default",
    "--no-stream": "datasets are local files, never streamed from the Hub",
    "--no-oversample": "a file shorter than --num-prompts is cycled through",
    "--skip-chat-template": "chat requests go through the server's own template",
    "--request-id-prefix": "servetune's requests carry no id header",
}
"""vLLM flags accepted as no-ops (value or switch), each with why it changes nothing here."""
_IGNORED_SWITCHES = {
    "--trust-remote-code",
    "--skip-tokenizer-init",
    "--no-stream",
    "--no-oversample",
    "--skip-chat-template",
}
REFUSED_FLAGS = {
    "--header": "servetune sends only Authorization (from --api-key / OPENAI_API_KEY)",
    "--profile": "servetune does not drive vLLM's profiler",
    "--plot-timeline": "use --html for servetune's report (timeline, distributions, time series)",
    "--plot-dataset-stats": "use --html for servetune's report",
    "--ramp-up-strategy": "use --sweep for a series of rates",
    "--ramp-up-start-rps": "use --sweep for a series of rates",
    "--ramp-up-end-rps": "use --sweep for a series of rates",
    "--lora-modules": "servetune sends one model name",
    "--lora-assignment": "servetune sends one model name",
    "--use-beam-search": "servetune measures sampling, not beam search",
    "--logprobs": "servetune asks for no logprobs",
    "--self-timed": "servetune replays no timed traces",
    "--probe-request-rate": "servetune sends no side probes",
    "--chat-template-kwargs": "pass them in --extra-body '{\"chat_template_kwargs\": {...}}'",
    "--insecure": "servetune verifies TLS certificates",
    "--hf-name": "servetune never downloads datasets: use --dataset-name sharegpt|custom with a local file",
    "--hf-split": "servetune never downloads datasets",
    "--hf-subset": "servetune never downloads datasets",
}
"""vLLM flags servetune does not do: an error that names the flag and what to use instead."""


class BenchArgs(BaseModel):
    """What `bench` sends and writes, besides the load (`LoadOptions`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str
    model: str | None = Field(None, description="The model name requests carry (None: the server's first)")
    model_id: str | None = Field(None, description="vLLM's --model when --served-model-name names the API model")
    endpoint: Literal["completions", "chat"] = "completions"
    stream: bool = True
    api_key: str | None = None
    extra_body: dict[str, Any] | None = None
    tokenizer: str | None = None
    sweep: tuple[float, ...] | None = None
    json_out: Path | None = None
    jsonl_out: Path | None = None
    csv_out: Path | None = None
    html_out: Path | None = None
    progress: bool = True
    max_error_rate: float = Field(0.0, ge=0, le=1)
    accept_warnings: bool = False
    save_result: bool = False
    save_detailed: bool = False
    append_result: bool = False
    result_dir: Path | None = None
    result_filename: str | None = None
    label: str | None = None
    metadata: dict[str, str] = {}
    percentile_metrics: tuple[str, ...] = PERCENTILE_METRICS
    ready_check_timeout_s: float = Field(0.0, ge=0)
    workers: int | None = Field(None, ge=1, description="Client processes (None: one per 32 streams, up to CPUs - 1)")
    ray: str | None = Field(None, description="A Ray cluster's address: the workers run as Ray actors on its nodes")
    ray_nodes: tuple[str, ...] | None = Field(None, description="With ray: only these nodes (addresses or id prefixes)")
    notes: tuple[str, ...] = ()
    """vLLM flags accepted without effect, and why."""

    @property
    def backend(self) -> str:
        """vLLM's name of the request format (`openai` completions, `openai-chat`)."""
        return "openai-chat" if self.endpoint == "chat" else "openai"

    @property
    def writes_vllm_result(self) -> bool:
        return self.save_result or self.append_result


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        import difflib

        fix = "see `servetune bench --help`"
        if message.startswith("unrecognized arguments:"):
            flags = [f for action in self._actions for f in action.option_strings]
            unknown = next((w for w in message.split(":", 1)[1].split() if w.startswith("--")), "")
            if close := difflib.get_close_matches(unknown.split("=")[0], flags, n=1):
                fix = f"did you mean {close[0]}? ({fix})"
        raise ServetuneError(f"servetune bench: {message}", fix)


def _parser() -> _Parser:
    p = _Parser(prog="servetune bench", add_help=False, allow_abbrev=False)
    add_arguments(p)
    p.add_argument("--url", "--base-url", dest="url")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", default="8000")
    p.add_argument("--model", dest="model")
    p.add_argument("--served-model-name", dest="served_model_name")
    p.add_argument("--endpoint", default=None)
    p.add_argument("--backend", default=None)
    p.add_argument("--streaming", dest="stream", action="store_true", default=True)
    p.add_argument("--no-streaming", dest="stream", action="store_false")
    p.add_argument("--api-key", dest="api_key")
    p.add_argument("--extra-body", dest="extra_body")
    p.add_argument("--tokenizer")
    p.add_argument("--sweep")
    p.add_argument("--json", dest="json_out")
    p.add_argument("--jsonl", dest="jsonl_out")
    p.add_argument("--csv", dest="csv_out")
    p.add_argument("--html", dest="html_out")
    p.add_argument("--progress", dest="progress", action="store_true", default=True)
    p.add_argument("--no-progress", "--disable-tqdm", dest="progress", action="store_false")
    p.add_argument("--max-error-rate", dest="max_error_rate", default="0")
    p.add_argument("--accept-warnings", dest="accept_warnings", action="store_true")
    p.add_argument("--save-result", dest="save_result", action="store_true")
    p.add_argument("--save-detailed", dest="save_detailed", action="store_true")
    p.add_argument("--append-result", dest="append_result", action="store_true")
    p.add_argument("--result-dir", dest="result_dir")
    p.add_argument("--result-filename", dest="result_filename")
    p.add_argument("--label")
    p.add_argument("--metadata", nargs="*", default=[])
    p.add_argument("--percentile-metrics", dest="percentile_metrics")
    p.add_argument("--ready-check-timeout-sec", dest="ready_check_timeout_s", default="0")
    p.add_argument("--workers")
    p.add_argument("--ray", dest="ray")
    p.add_argument("--ray-nodes", dest="ray_nodes")
    for flag in SAMPLING_FLAGS:
        p.add_argument(flag, dest=f"sampling{flag}")
    for flag in IGNORED_FLAGS:
        if flag in _IGNORED_SWITCHES:
            p.add_argument(flag, dest=f"ignored{flag}", action="store_true")
        else:
            p.add_argument(flag, dest=f"ignored{flag}")
    for flag in REFUSED_FLAGS:
        p.add_argument(flag, dest=f"refused{flag}", nargs="*")
    return p


LOAD_KEYS = frozenset(LoadOptions.model_fields) | {v.dest for v in VLLM_FLAGS}
"""The argparse destinations that belong to the load options (servetune's fields and vLLM's translated keys)."""


def parse_bench_argv(argv: list[str]) -> tuple[BenchArgs, LoadOptions]:
    """Reads a bench command line (servetune's or vLLM's flags) into what to send and how to load."""
    ns = vars(_parser().parse_args(argv))
    for key, value in ns.items():
        if key.startswith("refused") and value is not None:
            flag = key.removeprefix("refused")
            raise ServetuneError(f"{flag} is not supported by servetune bench", REFUSED_FLAGS[flag])
    values = {k: ns.pop(k) for k in LOAD_KEYS & set(ns)}
    levels = _levels(ns["sweep"], closed="rate" not in values) if ns["sweep"] else None
    if levels and not {"concurrency", "rate", "max_concurrency"} & set(values):
        values["concurrency"] = levels[0]  # a bare sweep is of concurrencies, as --help says
    load = LoadOptions.parse(**values)
    if levels:
        for level in levels:  # each level is the run it is
            LoadOptions.parse(**load.at_level(level).model_dump(exclude_unset=True))
        load.check_footprint(levels=levels)  # every level's records are kept for the report
    ns["sweep"] = levels
    notes = tuple(
        f"{key.removeprefix('ignored')} has no effect here: {IGNORED_FLAGS[key.removeprefix('ignored')]}"
        for key, value in ns.items()
        if key.startswith("ignored") and value not in (None, False)
    )
    return _bench_args(ns, notes), load


def _bench_args(ns: dict[str, Any], notes: tuple[str, ...]) -> BenchArgs:
    url = ns["url"] or f"http://{_host(ns['host'])}:{ns['port']}"
    model, model_id = ns["model"], None
    if ns["served_model_name"]:
        model, model_id = ns["served_model_name"], ns["model"]
    values: dict[str, Any] = {
        "url": url,
        "model": model,
        "model_id": model_id,
        "endpoint": _endpoint(ns["endpoint"], ns["backend"]),
        "stream": ns["stream"],
        "api_key": ns["api_key"] or os.environ.get("OPENAI_API_KEY") or None,
        "extra_body": _body(ns),
        "tokenizer": ns["tokenizer"],
        "sweep": ns["sweep"],
        "progress": ns["progress"],
        "max_error_rate": _fraction(ns["max_error_rate"]),
        "accept_warnings": ns["accept_warnings"],
        "save_result": ns["save_result"],
        "save_detailed": ns["save_detailed"],
        "append_result": ns["append_result"],
        "result_filename": ns["result_filename"],
        "label": ns["label"],
        "metadata": _metadata(ns["metadata"]),
        "percentile_metrics": _metrics(ns["percentile_metrics"]),
        "ready_check_timeout_s": _seconds(ns["ready_check_timeout_s"]),
        "workers": _count(ns["workers"], "--workers") if ns["workers"] is not None else None,
        **_ray(ns["ray"], ns["ray_nodes"]),
        "notes": notes,
    }
    for key in ("json_out", "jsonl_out", "csv_out", "html_out", "result_dir"):
        values[key] = Path(ns[key]) if ns[key] else None
    return BenchArgs(**values)


def _ray(address: str | None, nodes: str | None) -> dict[str, Any]:
    """`--ray ADDRESS [--ray-nodes A,B]`: where the load workers run (`auto`: the cluster this machine runs)."""
    if nodes is not None and address is None:
        raise ServetuneError("--ray-nodes selects nodes of the --ray cluster", "add --ray ADDRESS (or --ray auto)")
    if address is not None and not address.strip():
        raise ServetuneError("--ray needs the cluster's address", "e.g. --ray 10.0.0.1:6379, or --ray auto")
    chosen = tuple(n.strip() for n in nodes.split(",") if n.strip()) if nodes is not None else None
    if chosen is not None and not chosen:
        raise ServetuneError(f"--ray-nodes {nodes!r} names no node", "e.g. --ray-nodes 10.0.0.2,10.0.0.3")
    return {"ray": address.strip() if address else None, "ray_nodes": chosen}


MAX_WORKERS = 256
"""Client processes of one machine (or Ray actors): each sends hundreds of streams; more is a typo."""


def _count(text: str, flag: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_WORKERS:
        raise ServetuneError(f"{flag} {text!r} is not a whole number from 1 to {MAX_WORKERS}", f"e.g. {flag} 2")
    return value


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _endpoint(endpoint: str | None, backend: str | None) -> Literal["completions", "chat"]:
    """servetune's `completions|chat`, vLLM's path (`/v1/completions`, `/v1/chat/completions`) or `--backend`."""
    by_backend: dict[str, Literal["completions", "chat"]] = {"openai": "completions", "vllm": "completions"}
    by_backend["openai-chat"] = "chat"
    if backend is not None and backend not in by_backend:
        raise ServetuneError(
            f"--backend {backend!r} is not an OpenAI-compatible text endpoint servetune speaks",
            "use --backend openai (completions) or openai-chat (chat), or --endpoint completions|chat",
        )
    if endpoint is None:
        return by_backend.get(backend or "openai", "completions")
    path = endpoint.strip().rstrip("/")
    if path in ("completions", "/v1/completions", "/completions"):
        return "completions"
    if path in ("chat", "/v1/chat/completions", "/chat/completions"):
        return "chat"
    raise ServetuneError(
        f"unknown endpoint {endpoint!r}", "use --endpoint completions or chat (or vLLM's /v1/chat/completions)"
    )


def _body(ns: dict[str, Any]) -> dict[str, Any] | None:
    body: dict[str, Any] = {}
    for flag, (field, kind) in SAMPLING_FLAGS.items():
        raw = ns.pop(f"sampling{flag}", None)
        if raw is None:
            continue
        try:
            value = kind(raw)
        except ValueError:
            raise ServetuneError(f"{flag} {raw!r} is not a number", f"e.g. {flag} 0") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise ServetuneError(f"{flag} {raw!r} is not a finite number", f"e.g. {flag} 0")
        body[field] = value
    if ns["extra_body"]:
        try:
            extra = json.loads(ns["extra_body"])
        except ValueError as err:
            raise ServetuneError(
                f"--extra-body is not JSON: {err}", "e.g. --extra-body '{\"temperature\": 0}'"
            ) from None
        if not isinstance(extra, dict):
            raise ServetuneError("--extra-body must be a JSON object", "e.g. --extra-body '{\"temperature\": 0}'")
        body.update(extra)
    return body or None


def _levels(text: str, *, closed: bool) -> tuple[float, ...]:
    """`--sweep`'s levels: concurrencies (whole numbers) unless `--rate` makes them rates."""
    levels = number_list(text, "sweep")
    if not levels or any(v <= 0 for v in levels):
        raise ServetuneError(f"--sweep {text!r}: levels must be positive", "e.g. --sweep 1,2,4,8")
    bad = [v for v in levels if closed and not (math.isfinite(v) and v == int(v))]
    if bad:
        raise ServetuneError(
            f"--sweep {bad[0]:g}: a sweep of concurrencies takes whole numbers",
            "e.g. --sweep 1,4,16,64; for rates give --rate with it (--rate 1 --sweep 0.5,1,2)",
        )
    return tuple(levels)


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value <= 1:
        raise ServetuneError(f"--max-error-rate {text} is not a fraction", "give 0..1, e.g. 0.01 for 1%")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise ServetuneError(f"--ready-check-timeout-sec {text} is not a number of seconds", "e.g. 600")
    return value


def _metadata(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ServetuneError(f"--metadata {item!r} is not KEY=VALUE", "e.g. --metadata version=0.32 tp=1")
        out[key.strip()] = value.strip()
    return out


def _metrics(text: str | None) -> tuple[str, ...]:
    if not text:
        return PERCENTILE_METRICS
    names = tuple(m.strip() for m in text.split(",") if m.strip())
    unknown = [m for m in names if m not in PERCENTILE_METRICS]
    if unknown or not names:
        raise ServetuneError(
            f"--percentile-metrics {text!r}: unknown {', '.join(unknown) or 'list'}",
            "choose among " + ",".join(PERCENTILE_METRICS),
        )
    return names


def help_text() -> str:
    """`servetune bench --help`."""
    lines = [
        "Measure a server with a streaming load: vLLM-named metrics, goodput, errors by class, validity.",
        "",
        "Usage: servetune bench --url URL --model NAME (--concurrency N | --rate R) [options]",
        "   or: servetune bench <the flags of a `vllm bench serve` line>   (vLLM's names and meanings)",
        "",
        "Exit code 1 when more requests failed than --max-error-rate allows (default 0) or when the run has",
        "validity warnings (unless --accept-warnings); 2 for bad options.",
        "",
        "Target and requests:",
        "  --url, --base-url URL        the server (else http://--host:--port, vLLM's 127.0.0.1:8000)",
        "  --model NAME                 the model name requests carry (vLLM: with --served-model-name, the model id)",
        "  --served-model-name NAME     the API model name (vLLM); without --model either: the server's first model",
        "  --endpoint completions|chat  or vLLM's /v1/completions, /v1/chat/completions; --backend openai|openai-chat",
        "  --streaming/--no-streaming   stream answers (default) or not",
        "  --api-key KEY                bearer token (default $OPENAI_API_KEY)",
        "  --extra-body JSON            merged into every request, after vLLM's sampling flags "
        + " ".join(SAMPLING_FLAGS),
        "  --tokenizer T                tokenizer.json, model folder, Hugging Face id (local cache), server, words",
        "  --sweep L1,L2,...            concurrencies (or rates with --rate) to sweep; stops at saturation",
        "  --ready-check-timeout-sec S  wait up to S seconds for the server's /health first (vLLM)",
        "",
        "Files:",
        "  --json PATH, --jsonl PATH, --csv PATH   servetune's run JSON, every request's record, per-request CSV",
        "  --html PATH                  the bench report: distributions, time series, per-class figures, warnings",
        "  --save-result [--save-detailed] [--append-result] [--result-dir D] [--result-filename F]",
        "                               vLLM's result JSON (its schema and file name), with servetune's run",
        "                               (<name>.servetune.json + <name>.records.jsonl) next to it;",
        "                               `servetune report D` draws the bench report of the folder",
        "  --label L, --metadata K=V .., --percentile-metrics ttft,tpot,itl,e2el   as in vLLM's file",
        "",
        "Verdict: --max-error-rate F (0..1), --accept-warnings; --no-progress (--disable-tqdm)",
        "Client: --workers N   processes sending the load (1: in process; default one per 32 streams, CPUs - 1)",
        "        --ray ADDRESS [--ray-nodes A,B]   the workers as Ray actors on the cluster's nodes (all, or those",
        "                     named), one per node by default; each node's clock offset is measured and stated",
        "",
        "Load options (shared with `servetune estimate`):",
        *LoadOptions.help_lines(),
        "",
        "vLLM flags with no effect here: " + ", ".join(IGNORED_FLAGS),
        "vLLM flags servetune does not do (an error says what to use): " + ", ".join(REFUSED_FLAGS),
    ]
    return "\n".join(lines)
