"""What servetune reads of other tools' result files, as pydantic models: each number it takes is a number (never
text), finite, and inside a bound no real run reaches; time stamps are in order and per-request lists agree.

Why: the readers (`metrics/imports.py`) turn these values into figures and records, and a value that is not one
— `"abc"` for a rate, a NaN, `1e308` — ended as an uncaught `ValueError`, or was imported as a figure that every
table then printed as `nan req/s`. Validated here, such a file is refused before anything is written, naming the
file, the key (its dotted path inside the file), the value and the fix (`errors.from_validation_error`).

Keys a reader does not read (a tool's settings, metadata, figures servetune has no name for) stay open
(`extra="allow"`), so a newer version of a tool that adds keys still imports; a number among them is kept as a
figure and must be finite as well.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator, model_validator

from servetune.errors import ServetuneError, from_validation_error

MAX_FIGURE = 1e9
"""A latency in ms (11.6 days) or a rate per second (requests or tokens): no measured run comes near it, so a larger
value is a broken file (1e308 would print as `inf` in every table)."""
MAX_COUNT = 1e12
"""Requests or tokens of one run."""
MAX_STAMP_S = 1e11
"""A time stamp in seconds (the Unix epoch is at 1.8e9 now; a monotonic clock is below it)."""
MAX_STAMP_NS = MAX_STAMP_S * 1e9
MAX_NUMBER = 1e15
"""Any other number a file holds (a setting, a figure servetune has no name for): finite and not absurd."""
MAX_REBUILT_CHUNKS = 20_000_000
"""Streamed chunks servetune may rebuild from one file's counts (GuideLLM keeps a count per request, not the
times): each costs memory, and a file that claims more is refused rather than grown into."""

Figure = Annotated[float, Field(ge=0, le=MAX_FIGURE, strict=True, allow_inf_nan=False)]
Count = Annotated[float, Field(ge=0, le=MAX_COUNT, strict=True, allow_inf_nan=False)]
Stamp = Annotated[float, Field(ge=0, le=MAX_STAMP_S, strict=True, allow_inf_nan=False)]
StampNs = Annotated[int, Field(ge=0, le=int(MAX_STAMP_NS), strict=True)]
Number = Annotated[float, Field(ge=-MAX_NUMBER, le=MAX_NUMBER, strict=True, allow_inf_nan=False)]
Whole = Annotated[int, Field(ge=0, le=int(MAX_COUNT), strict=True)]
"""A whole number ≥ 0: tokens of one request, an index (a record keeps them as ints)."""
Level = Annotated[float, Field(gt=0, le=MAX_FIGURE, strict=True, allow_inf_nan=False)]
"""A load level: requests in flight or per second."""


class _Open(BaseModel):
    """A part of a tool's file: the keys servetune reads are typed, the others kept as they are."""

    model_config = ConfigDict(extra="allow")


# --- vLLM bench serve (and bench sweep's run=N.json) ----------------------------------------------------------

VLLM_COUNTS = frozenset(
    {"completed", "failed", "num_prompts", "total_input_tokens", "total_output_tokens", "max_concurrent_requests"}
)
_VLLM_FIGURE = re.compile(r"^(duration|.*_ms|.*_throughput|.*_goodput|.*_per_s)$")
"""vLLM's flat figure keys besides the counts: seconds, `*_ms` latencies, throughputs, goodput, peaks."""
_PER_REQUEST = ("start_times", "ttfts", "itls", "latencies", "queue_times", "input_lens", "output_lens", "errors")


class VllmResult(_Open):
    """The keys of `vllm bench serve --save-result` servetune reads besides its flat figures (`check_vllm`)."""

    date: str | None = None
    model_id: str | None = None
    label: str | None = None
    request_rate: float | None = None
    """Requests per second, or vLLM's `"inf"` (all at once)."""
    max_concurrency: Annotated[int, Field(ge=1, le=int(MAX_COUNT), strict=True)] | None = None
    """The cap on requests in flight (with rate "inf": a closed loop of that many)."""
    start_times: list[Stamp] | None = None
    ttfts: list[Figure] | None = None
    itls: list[list[Figure]] | None = None
    latencies: list[Figure] | None = None
    queue_times: list[Figure] | None = None
    input_lens: list[Whole | None] | None = None
    output_lens: list[Whole | None] | None = None
    errors: list[str | None] | None = None

    @field_validator("request_rate", mode="before")
    @classmethod
    def _rate(cls, value: Any) -> Any:
        if value == "inf":
            return float("inf")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError('must be a number of requests per second, or "inf"')
        if value != value or not (0 < value <= MAX_FIGURE or value == float("inf")):
            raise ValueError(f'must be a number of requests per second above 0 and at most {MAX_FIGURE:g}, or "inf"')
        return value

    @model_validator(mode="after")
    def _same_requests(self) -> VllmResult:
        sizes = {name: len(v) for name in _PER_REQUEST if (v := getattr(self, name))}
        if len(set(sizes.values())) > 1:
            listed = ", ".join(f"{k} {v}" for k, v in sizes.items())
            raise ValueError(f"the per-request lists must have one entry per request each, got {listed}")
        return self


_FLAT: dict[str, TypeAdapter[Any]] = {
    "count": TypeAdapter(dict[str, Count | None]),
    "figure": TypeAdapter(dict[str, Figure | None]),
    "number": TypeAdapter(dict[str, Number]),
}


def _flat_kind(key: str, value: Any) -> str | None:
    """Which bound a flat key of a vLLM result (or a servetune run's figures) takes; None: not a figure (a list, a
    text, a mapping or a flag, kept as a setting)."""
    if key in VLLM_COUNTS:
        return "count"
    if _VLLM_FIGURE.match(key):
        return "figure"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return "number"
    return None


def check_flat_figures(data: Mapping[str, Any]) -> None:
    """Every flat figure of a vLLM result object (or of a servetune run's `figures`): a count, a latency or a rate
    within its bound, or null; any other number finite (raises pydantic's ValidationError, loc = the key)."""
    groups: dict[str, dict[str, Any]] = {}
    for key, value in data.items():
        if key in VllmResult.model_fields:
            continue
        kind = _flat_kind(key, value)
        if kind is not None:
            groups.setdefault(kind, {})[key] = value
    for kind, values in groups.items():
        _FLAT[kind].validate_python(values)


# --- GuideLLM ----------------------------------------------------------------------------------------------------


class GuidellmDistribution(_Open):
    mean: Figure | None = None
    median: Figure | None = None
    std_dev: Figure | None = None
    percentiles: dict[str, Figure | None] | None = None


class GuidellmMetric(_Open):
    successful: GuidellmDistribution | None = None


class GuidellmMetrics(_Open):
    """The metrics servetune reads (others, such as `request_totals`, have other shapes and are kept)."""

    time_to_first_token_ms: GuidellmMetric | None = None
    inter_token_latency_ms: GuidellmMetric | None = None
    request_latency: GuidellmMetric | None = None
    time_to_first_output_token_ms: GuidellmMetric | None = None
    requests_per_second: GuidellmMetric | None = None
    output_tokens_per_second: GuidellmMetric | None = None


class GuidellmTimings(_Open):
    request_start: Stamp | None = None
    request_end: Stamp | None = None
    resolve_end: Stamp | None = None
    targeted_start: Stamp | None = None
    first_token_iteration: Stamp | None = None
    last_token_iteration: Stamp | None = None
    token_iterations: Whole | None = None

    @model_validator(mode="after")
    def _in_order(self) -> GuidellmTimings:
        order = [
            (name, value)
            for name in ("request_start", "first_token_iteration", "last_token_iteration")
            if (value := getattr(self, name)) is not None
        ]
        end = self.request_end or self.resolve_end
        if end is not None:
            order.append(("request_end" if self.request_end is not None else "resolve_end", end))
        for (a, x), (b, y) in itertools.pairwise(order):
            if y < x:
                raise ValueError(f"{b} ({y}) is before {a} ({x}): a request's times must be in order")
        return self


class GuidellmInfo(_Open):
    timings: GuidellmTimings | None = None


class GuidellmRequest(_Open):
    info: GuidellmInfo | None = None
    output_tokens: Whole | None = None
    prompt_tokens: Whole | None = None


class GuidellmRequests(_Open):
    successful: list[GuidellmRequest] | None = None
    errored: list[GuidellmRequest] | None = None
    incomplete: list[GuidellmRequest] | None = None


class GuidellmStrategy(_Open):
    type_: str | None = None
    type: str | None = None
    streams: Level | None = None
    rate: Level | None = None
    max_concurrency: Level | None = None


class GuidellmBackend(_Open):
    model: str | None = None


class GuidellmConfig(_Open):
    strategy: GuidellmStrategy | None = None
    backend: GuidellmBackend | None = None


class GuidellmBenchmark(_Open):
    metrics: GuidellmMetrics | None = None
    duration: Figure | None = None
    requests: GuidellmRequests | None = None
    config: GuidellmConfig | None = None


class GuidellmReport(_Open):
    """GuideLLM's `benchmarks.json` (`GenerativeBenchmarksReport`)."""

    benchmarks: list[GuidellmBenchmark]

    @model_validator(mode="after")
    def _rebuildable(self) -> GuidellmReport:
        chunks = 0.0
        for bench in self.benchmarks:
            requests = bench.requests
            for item in (requests.successful or []) if requests else []:
                timings = item.info.timings if item.info else None
                chunks += max(1.0, (timings.token_iterations or 0) if timings else 0)
        if chunks > MAX_REBUILT_CHUNKS:
            raise ValueError(
                f"its requests' token_iterations add up to {chunks:,.0f} streamed chunks to rebuild, more than "
                f"{MAX_REBUILT_CHUNKS:,} (a real run's file this size holds its figures, not so many requests)"
            )
        return self


# --- AIPerf ------------------------------------------------------------------------------------------------------

AIPERF_LATENCIES = ("time_to_first_token", "inter_token_latency", "inter_chunk_latency", "request_latency")


class AiperfMetric(BaseModel):
    """One metric of `profile_export_aiperf.json`: its unit and its figures (`avg`, `std`, `min`, `pNN`, ...)."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, Figure | None]

    unit: str | None = None


class AiperfLoadgen(_Open):
    request_rate: Level | None = None
    concurrency: Level | None = None


class AiperfEndpoint(_Open):
    model_names: list[str] | None = None


class AiperfInputConfig(_Open):
    loadgen: AiperfLoadgen | None = None
    endpoint: AiperfEndpoint | None = None


class AiperfSummary(_Open):
    """AIPerf's `profile_export_aiperf.json` besides its metrics (`check_aiperf_summary` reads those)."""

    input_config: AiperfInputConfig | None = None


class AiperfValue(_Open):
    value: Figure | list[Figure] | None = None


class AiperfMetadata(_Open):
    request_start_ns: StampNs
    request_end_ns: StampNs | None = None
    turn_index: Whole | None = None

    @model_validator(mode="after")
    def _in_order(self) -> AiperfMetadata:
        if self.request_end_ns is not None and self.request_end_ns < self.request_start_ns:
            raise ValueError("request_end_ns is before request_start_ns")
        return self


class AiperfError(_Open):
    code: int | None = None
    message: str | None = None


class AiperfRecord(_Open):
    """One line of AIPerf's `profile_export.jsonl`."""

    metadata: AiperfMetadata
    metrics: dict[str, AiperfValue] | None = None
    error: AiperfError | str | None = None


_AIPERF_METRICS = TypeAdapter(dict[str, AiperfMetric])


# --- the checks, each refusing a bad file the one way ------------------------------------------------------------


def check_vllm(data: Any, where: str) -> None:
    """A `vllm bench serve` result object (one run of a file)."""

    def run() -> None:
        VllmResult.model_validate(data)
        check_flat_figures(data)

    _check(run, where, "vllm bench serve")


def check_guidellm(data: Any, where: str) -> None:
    """A GuideLLM `benchmarks.json`."""
    _check(lambda: GuidellmReport.model_validate(data), where, "GuideLLM")


def check_aiperf_summary(data: Any, where: str) -> None:
    """An AIPerf `profile_export_aiperf.json`: every metric (a mapping with a `unit`) and the input config."""

    def run() -> None:
        metrics = {k: v for k, v in data.items() if isinstance(v, dict) and "unit" in v}
        _AIPERF_METRICS.validate_python(metrics)
        AiperfSummary.model_validate(data)
        for tag in AIPERF_LATENCIES:
            unit = metrics.get(tag, {}).get("unit")
            if unit not in (None, "ms"):
                raise ServetuneError(
                    f"{where}: {tag}.unit is {unit!r}; AIPerf writes its latencies in ms", _fix("AIPerf")
                )

    _check(run, where, "AIPerf")


def check_aiperf_record(row: Any, where: str) -> None:
    """One line of an AIPerf `profile_export.jsonl`."""
    _check(lambda: AiperfRecord.model_validate(row), where, "AIPerf")


def check_run_figures(figures: Any, where: str) -> None:
    """The `figures` of a servetune run file (vLLM's flat names)."""
    _check(lambda: check_flat_figures(_FIGURES.validate_python(figures)), where, "servetune")


_FIGURES = TypeAdapter(dict[str, Any])


def _check(validate: Callable[[], object], where: str, tool: str) -> None:
    try:
        validate()
    except ValidationError as err:
        raise from_validation_error(err, where=where, fix=lambda key: _fix(tool)) from None


def _fix(tool: str) -> str:
    return f"{tool} writes no such value: correct it in the file, or measure again with {tool}"
