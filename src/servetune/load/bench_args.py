"""`servetune bench`'s arguments (`BenchArgs`): servetune's flags and `vllm bench serve`'s, by their names and
meanings, the one owner of bench's flags, defaults, units and bounds (the command's options are generated from
these fields; `load/bench.py` `run_bench` does what they ask).

A `vllm bench serve ...` line runs unchanged as `servetune bench ...`: the load flags are `LoadOptions`' (with
vLLM's names, `load/options.py`); the rest is read here — where to send (`--base-url`, or
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

import difflib
import json
import math
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, JsonValue, field_validator, model_validator

from servetune.errors import ServetuneError
from servetune.load.options import MAX_CONCURRENCY, MAX_SECONDS, LoadOptions, number_list
from servetune.metrics.latency import PERCENTILE_METRICS, LatencyMetric

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


MAX_WORKERS = 256
"""Client processes of one machine (or Ray actors): each sends hundreds of streams; more is a typo."""
SAMPLING = ("temperature", "top_p", "top_k", "min_p", "frequency_penalty", "presence_penalty", "repetition_penalty")
"""vLLM's sampling flags: fields of every request body (`--extra-body` overrides them, as in vLLM)."""
VLLM: dict[str, JsonValue] = {"negatable": False}
"""A vLLM switch: only ever turned on."""


def _flags(*names: str, **more: JsonValue) -> dict[str, JsonValue]:
    return {"flags": list(names), **more}


class BenchArgs(LoadOptions):
    """Everything `servetune bench` takes: the load (`LoadOptions`), where to send it and what to write. The
    properties say what the flags mean together (the server's URL, the model requests carry, the request body)."""

    url: str | None = Field(
        None,
        description="The server (default: http://--host:--port, vLLM's 127.0.0.1:8000)",
        json_schema_extra=_flags("--url", "--base-url"),
    )
    host: str = Field("127.0.0.1", description="vLLM: the server's host, without --base-url")
    port: int = Field(8000, ge=1, le=65535, description="vLLM: the server's port, without --base-url")
    model: str | None = Field(
        None,
        description="The model name requests carry (vLLM: with --served-model-name, the model id); neither: the "
        "server's first model",
    )
    served_model_name: str | None = Field(None, description="vLLM: the API model name")
    endpoint: str | None = Field(
        None, description="completions or chat (or vLLM's /v1/completions, /v1/chat/completions; default completions)"
    )
    backend: Literal["openai", "openai-chat", "vllm"] | None = Field(
        None, description="vLLM: the request format (openai-chat: chat)"
    )
    stream: bool = Field(True, description="Stream answers", json_schema_extra=_flags("--streaming"))
    api_key: str | None = Field(
        None, description="Bearer token the server demands", json_schema_extra={"envvar": "OPENAI_API_KEY"}
    )
    extra_body: str | None = Field(
        None, description="A JSON object merged into every request, after the sampling flags"
    )
    temperature: float | None = Field(None, ge=0, le=100, allow_inf_nan=False, description="vLLM: sampling temperature")
    top_p: float | None = Field(None, gt=0, le=1, description="vLLM: nucleus sampling's probability mass")
    top_k: int | None = Field(None, ge=-1, description="vLLM: sample among the k most likely tokens (-1: all)")
    min_p: float | None = Field(None, ge=0, le=1, description="vLLM: least probability relative to the likeliest")
    frequency_penalty: float | None = Field(None, ge=-2, le=2, description="vLLM: frequency penalty")
    presence_penalty: float | None = Field(None, ge=-2, le=2, description="vLLM: presence penalty")
    repetition_penalty: float | None = Field(
        None, gt=0, le=100, allow_inf_nan=False, description="vLLM: repetition penalty"
    )
    tokenizer: str | None = Field(
        None, description="tokenizer.json, model folder, Hugging Face id (local cache), server, or words"
    )
    sweep: tuple[float, ...] | None = Field(
        None,
        description="Concurrencies (or rates, with --rate) to sweep; stops at saturation; each > 0, a concurrency "
        f"whole and ≤ {MAX_CONCURRENCY:,}",
    )
    json_out: Path | None = Field(None, description="servetune's run JSON", json_schema_extra=_flags("--json"))
    jsonl_out: Path | None = Field(None, description="Every request's record", json_schema_extra=_flags("--jsonl"))
    csv_out: Path | None = Field(None, description="Per-request CSV", json_schema_extra=_flags("--csv"))
    html_out: Path | None = Field(
        None,
        description="The bench report: distributions, time series, per-class figures, warnings",
        json_schema_extra=_flags("--html"),
    )
    progress: bool = Field(True, description="A progress line", json_schema_extra={"off": ["--disable-tqdm"]})
    max_error_rate: float = Field(0.0, ge=0, le=1, description="Failed requests allowed before exit code 1 (0..1)")
    accept_warnings: bool = Field(False, description="Exit 0 despite validity warnings", json_schema_extra=VLLM)
    save_result: bool = Field(
        False, description="vLLM's result JSON, with servetune's run beside it", json_schema_extra=VLLM
    )
    save_detailed: bool = Field(False, description="vLLM: per-request lists in the result", json_schema_extra=VLLM)
    append_result: bool = Field(False, description="vLLM: append to the result file", json_schema_extra=VLLM)
    result_dir: Path | None = Field(None, description="vLLM: folder of the result file (`servetune report` draws it)")
    result_filename: str | None = Field(None, description="vLLM: the result file's name")
    label: str | None = Field(None, description="vLLM: the result's label")
    metadata: tuple[str, ...] = Field(
        (),
        description="vLLM: KEY=VALUE pairs written into the result",
        json_schema_extra={"nargs": "+", "split": False},
    )
    percentile_metrics: tuple[LatencyMetric, ...] = Field(
        PERCENTILE_METRICS, description="vLLM: the metrics the result gives percentiles of"
    )
    ready_check_timeout_s: float = Field(
        0.0,
        ge=0,
        le=MAX_SECONDS,
        allow_inf_nan=False,
        description="vLLM: wait this long for the server's /health first",
        json_schema_extra=_flags("--ready-check-timeout-sec"),
    )
    workers: int | None = Field(
        None,
        ge=1,
        le=MAX_WORKERS,
        description="Client processes (1: in process; default one per 32 streams, up to CPUs - 1)",
    )
    ray: str | None = Field(
        None, description="A Ray cluster's address (auto: this machine's): the workers run as Ray actors on its nodes"
    )
    ray_nodes: tuple[str, ...] | None = Field(
        None, description="With --ray: only these nodes (addresses or id prefixes)"
    )
    vllm_words: tuple[str, ...] = Field(
        (), description="vLLM flags with no effect here", json_schema_extra={"rest": True}
    )

    @model_validator(mode="before")
    @classmethod
    def _sweep_levels(cls, data: Any) -> Any:
        """`--sweep`'s levels are concurrencies (whole numbers) unless `--rate` makes them rates, and a bare
        `--sweep` runs its first level as the concurrency the load options are checked at."""
        if not isinstance(data, dict) or not data.get("sweep"):
            return data
        given = data["sweep"] if isinstance(data["sweep"], list | tuple) else [data["sweep"]]
        levels = tuple(number_list(",".join(str(v) for v in given), "--sweep"))
        _check_levels(levels, closed=data.get("rate") is None)
        bare = not {"concurrency", "rate", "max_concurrency"} & {k for k, v in data.items() if v is not None}
        return {**data, "sweep": levels, **({"concurrency": int(levels[0])} if bare else {})}

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, endpoint: str | None) -> str | None:
        if endpoint is not None:
            _endpoint(endpoint)
        return endpoint

    @field_validator("extra_body")
    @classmethod
    def _body(cls, text: str | None) -> str | None:
        if text is not None:
            _json_object(text)
        return text

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, items: tuple[str, ...]) -> tuple[str, ...]:
        for item in items:
            key, sep, _ = item.partition("=")
            if not sep or not key.strip():
                raise ServetuneError(f"--metadata {item!r} is not KEY=VALUE", "e.g. --metadata version=0.32 tp=1")
        return items

    @field_validator("ray")
    @classmethod
    def _ray(cls, address: str | None) -> str | None:
        if address is not None and not address.strip():
            raise ServetuneError("--ray needs the cluster's address", "e.g. --ray 10.0.0.1:6379, or --ray auto")
        return address.strip() if address else None

    @field_validator("vllm_words")
    @classmethod
    def _vllm_words(cls, words: tuple[str, ...]) -> tuple[str, ...]:
        _ignored(words)
        return words

    @model_validator(mode="after")
    def _levels(self) -> BenchArgs:
        if self.ray_nodes is not None and self.ray is None:
            raise ServetuneError("--ray-nodes selects nodes of the --ray cluster", "add --ray ADDRESS (or --ray auto)")
        if self.ray_nodes is not None and not self.ray_nodes:
            raise ServetuneError("--ray-nodes names no node", "e.g. --ray-nodes 10.0.0.2,10.0.0.3")
        if self.sweep is not None:
            load = self.load()
            for level in self.sweep:  # each level is the run it is
                LoadOptions.parse(**load.at_level(level).model_dump(exclude_unset=True))
            load.check_footprint(levels=self.sweep)  # every level's records are kept for the report
        return self

    @property
    def target(self) -> str:
        """The server's base URL."""
        host = f"[{self.host}]" if ":" in self.host and not self.host.startswith("[") else self.host
        return self.url or f"http://{host}:{self.port}"

    @property
    def request_model(self) -> str | None:
        """The model name requests carry (None: the server's first)."""
        return self.served_model_name or self.model

    @property
    def model_id(self) -> str | None:
        """vLLM's --model when --served-model-name names the API model: the id its result file records."""
        return self.model if self.served_model_name else None

    @property
    def api(self) -> Literal["completions", "chat"]:
        """The request format: --endpoint, else --backend, else completions."""
        if self.endpoint is not None:
            return _endpoint(self.endpoint)
        return "chat" if self.backend == "openai-chat" else "completions"

    @property
    def backend_name(self) -> str:
        """vLLM's name of the request format (`openai` completions, `openai-chat`)."""
        return "openai-chat" if self.api == "chat" else "openai"

    @property
    def key(self) -> str | None:
        return self.api_key or os.environ.get("OPENAI_API_KEY") or None

    @property
    def body(self) -> dict[str, Any] | None:
        """The request body's additions: the sampling flags, then --extra-body over them (as in vLLM)."""
        body: dict[str, Any] = {k: getattr(self, k) for k in SAMPLING if getattr(self, k) is not None}
        body.update(_json_object(self.extra_body) if self.extra_body else {})
        return body or None

    @property
    def metadata_items(self) -> dict[str, str]:
        return {k.strip(): v.strip() for k, _, v in (item.partition("=") for item in self.metadata)}

    @property
    def notes(self) -> tuple[str, ...]:
        """vLLM flags accepted without effect, and why."""
        return tuple(f"{flag} has no effect here: {IGNORED_FLAGS[flag]}" for flag in _ignored(self.vllm_words))

    @property
    def writes_vllm_result(self) -> bool:
        return self.save_result or self.append_result


def _ignored(words: tuple[str, ...]) -> list[str]:
    """The vLLM flags among `words` that change nothing here; a flag servetune does not do is an error saying what
    to use instead, and any other word an error with the closest flag."""
    found, rest = [], list(words)
    while rest:
        word = rest.pop(0)
        flag = word.split("=", 1)[0]
        if flag in REFUSED_FLAGS:
            raise ServetuneError(f"{flag} is not supported by servetune bench", REFUSED_FLAGS[flag])
        if flag in IGNORED_FLAGS:
            found.append(flag)
            if flag not in _IGNORED_SWITCHES and "=" not in word and rest and not rest[0].startswith("--"):
                rest.pop(0)  # its value
            continue
        close = difflib.get_close_matches(flag, _known_flags(), n=1) if flag.startswith("-") else []
        hint = f"did you mean {close[0]}? " if close else ""
        raise ServetuneError(f"servetune bench: unrecognized argument {word!r}", f"{hint}see `servetune bench --help`")
    return found


def _known_flags() -> list[str]:
    flags = [*IGNORED_FLAGS, *REFUSED_FLAGS]
    for name, info in BenchArgs.model_fields.items():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        named = extra.get("flags")
        flags += [str(f) for f in named] if isinstance(named, list) else ["--" + name.replace("_", "-")]
    return flags


def _endpoint(endpoint: str) -> Literal["completions", "chat"]:
    """servetune's `completions|chat`, or vLLM's path (`/v1/completions`, `/v1/chat/completions`)."""
    path = endpoint.strip().rstrip("/")
    if path in ("completions", "/v1/completions", "/completions"):
        return "completions"
    if path in ("chat", "/v1/chat/completions", "/chat/completions"):
        return "chat"
    raise ServetuneError(
        f"unknown endpoint {endpoint!r}", "use --endpoint completions or chat (or vLLM's /v1/chat/completions)"
    )


def _json_object(text: str) -> dict[str, Any]:
    try:
        extra = json.loads(text)
    except ValueError as err:
        raise ServetuneError(f"--extra-body is not JSON: {err}", "e.g. --extra-body '{\"temperature\": 0}'") from None
    if not isinstance(extra, dict):
        raise ServetuneError("--extra-body must be a JSON object", "e.g. --extra-body '{\"temperature\": 0}'")
    return extra


def _check_levels(levels: tuple[float, ...], *, closed: bool) -> None:
    """`--sweep`'s levels: concurrencies (whole numbers) unless `--rate` makes them rates."""
    shown = ",".join(f"{v:g}" for v in levels)
    if not levels or any(not v > 0 for v in levels):
        raise ServetuneError(f"--sweep {shown}: levels must be positive", "e.g. --sweep 1,2,4,8")
    bad = [v for v in levels if closed and not (math.isfinite(v) and v == int(v))]
    if bad:
        raise ServetuneError(
            f"--sweep {bad[0]:g}: a sweep of concurrencies takes whole numbers",
            "e.g. --sweep 1,4,16,64; for rates give --rate with it (--rate 1 --sweep 0.5,2)",
        )
