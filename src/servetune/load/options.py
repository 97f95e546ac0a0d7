"""`LoadOptions`: a load run as a command line asks for it — workload, load shape, SLOs and percentiles.

`servetune bench` (against a server) and `servetune estimate` (against the simulator) take the same options
and turn them into a `Workload` and a `LoadShape` here, so the same flags mean the same requests in both.
Every value is checked at the edge, before any work starts (positive counts, finite numbers, one of
concurrency or rate); a bad one is a `ServetuneError` naming the flag. The commands' options are generated from
these fields (`bench`'s `load/bench_args.py` `BenchArgs` and `estimate`'s `sim/args.py` `EstimateArgs` build on
this model); `parse` reads values given in code.

`vllm bench serve`'s load flags are read by their names with vLLM's meanings (each field's other flags):
`--num-prompts` is `--requests`, `--request-rate` is `--rate`, `--random-input-len` is `--input-tokens`, and the
flags whose
meaning needs arithmetic are translated: `--random-prefix-len P` is a shared prefix of P tokens *on top of* the
input length (vLLM counts it apart; servetune's `--prefix-tokens` counts it in), `--max-concurrency N` alone is a
closed loop of N (vLLM sends every request at t = 0 and lets N run at once: the same load), no load flag at all
is vLLM's default `--request-rate inf`, `--burstiness` other than 1 means gamma arrivals, `--dataset-name
sharegpt|custom` read a local file without `ignore_eos` unless `--ignore-eos` is given (vLLM's rule; `random`
always ignores EOS), `--dataset-name prefix_repetition` is servetune's shared-prefix workload. vLLM's spelling
of the random dataset brings its default input length (1024 tokens); other defaults are servetune's (100 requests,
not vLLM's 1000; percentiles 50,90,95,99, not 99 alone — a superset).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError, field_validator, model_validator

from servetune.errors import ServetuneError, from_validation_error

if TYPE_CHECKING:  # the commands' options are generated from this model at start-up: the load path is not
    from servetune.load.shape import LoadShape
    from servetune.load.workload import RequestClass, Workload
    from servetune.metrics.slo import Slos

MAX_CONCURRENCY = 100_000
"""A sanity bound on requests in flight (a typo such as `--concurrency 1000000000` is an error, not a run)."""
MAX_TOKENS = 10_000_000
"""Tokens of one request, input or output: the longest context windows served (10M); a typo beyond is an error."""
MAX_TURNS = 1_000
"""Turns of one conversation."""
MAX_RATE = 1_000_000.0
"""Requests per second of an open loop (inf aside: all at once)."""
MAX_SECONDS = 7 * 86_400.0
"""Any phase of a run in seconds (measured, warm-up, cool-down, ramp), and any timeout: a week."""
RECORD_BYTES = 1_200
"""Memory one kept request record takes besides its chunk times (measured: 6.3 KB for 128 output tokens)."""
TOKEN_BYTES = 40
"""Memory of one output token's chunk time in a kept record (a Python int in a list)."""
MAX_RECORD_BYTES = 4 * 1024**3
"""The records a run may keep in memory (every request's record is kept for the summary): 4 GiB."""
DEFAULT_REQUESTS = 100
"""Measured requests when neither `--requests` nor `--duration` bounds the run."""
_PREFIX_REPETITION = {"prefix_len": 256, "suffix_len": 256, "num_prefixes": 10, "output_len": 128}
"""vLLM's defaults of `--prefix-repetition-*`."""


def _also(*flags: str, **more: JsonValue) -> dict[str, JsonValue]:
    """A field's flags: its own name first, then vLLM bench serve's (and servetune 0.1's) spellings of it."""
    return {"flags": list(flags), **more}


SECONDS: dict[str, JsonValue] = {"unit": "seconds"}
TOKENS: dict[str, JsonValue] = {"unit": "tokens"}
VLLM: dict[str, JsonValue] = {"negatable": False}
"""A vLLM switch: only ever turned on."""


class LoadOptions(BaseModel):
    """The load options of `bench` and `estimate`: each field is the flag `--<name with dashes>`, and where vLLM
    bench serve has another name for it, that one too (the same meaning); the fields after `percentiles` are
    vLLM's flags whose meaning needs arithmetic, translated into servetune's (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)  # built when first used, not at start-up

    input_tokens: int = Field(
        256,
        ge=1,
        le=MAX_TOKENS,
        description="Input tokens per request (exact with a tokenizer)",
        json_schema_extra=_also("--input-tokens", "--random-input-len", "--input-len", unit="tokens"),
    )
    output_tokens: int = Field(
        128,
        ge=1,
        le=MAX_TOKENS,
        description="Output tokens per request (also a dataset's output length)",
        json_schema_extra=_also(
            "--output-tokens", "--random-output-len", "--output-len", "--sharegpt-output-len", unit="tokens"
        ),
    )
    output_std: float = Field(
        0.0,
        ge=0,
        le=MAX_TOKENS,
        allow_inf_nan=False,
        description="Output length standard deviation (normal distribution); 0 = fixed",
        json_schema_extra=TOKENS,
    )
    range_ratio: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="Input and output lengths uniform in [1-r, 1+r] x the given ones; 0 = fixed (vLLM's "
        "--random-range-ratio also takes {'input': r, 'output': r} with equal ratios)",
        json_schema_extra=_also("--range-ratio", "--random-range-ratio", "--spread"),
    )
    prefix_tokens: int = Field(
        0,
        ge=0,
        le=MAX_TOKENS,
        description="Shared prefix tokens (a long system prompt), counted in --input-tokens",
        json_schema_extra=_also("--prefix-tokens", "--shared-prefix-len", unit="tokens"),
    )
    prefix_groups: int = Field(1, ge=1, le=MAX_CONCURRENCY, description="Number of different shared prefixes")
    turns: int = Field(1, ge=1, le=MAX_TURNS, description="Turns per conversation (multi-turn)")
    mix: str | None = Field(None, description="Traffic mix name:weight:in:out,... (instead of input/output tokens)")
    dataset: Path | None = Field(
        None,
        description="Requests from a local JSONL or ShareGPT JSON file (servetune never downloads)",
        json_schema_extra=_also("--dataset", "--dataset-path"),
    )
    dataset_name: Literal["random", "sharegpt", "custom", "prefix_repetition"] | None = Field(
        None, description="vLLM's --dataset-name (custom: a JSONL file)"
    )
    shuffle: bool = Field(
        False,
        description="Requests of a file in a seeded random order (vLLM shuffles ShareGPT)",
        json_schema_extra=VLLM,
    )
    output_control: Literal["ignore_eos", "min_tokens", "none"] = Field(
        "ignore_eos", description="How an answer is held to its output length"
    )
    seed: int = Field(
        0,
        ge=0,
        lt=2**63,
        description="Seed of the requests' lengths, texts and arrival times",
        json_schema_extra=_also("--seed", "--workload-seed"),
    )
    concurrency: int | None = Field(None, ge=1, le=MAX_CONCURRENCY, description="Closed loop: requests in flight")
    rate: float | None = Field(
        None,
        gt=0,
        description=f"Open loop: requests per second, up to {MAX_RATE:,.0f} (inf: all at once, the default without "
        "--concurrency)",
        json_schema_extra=_also("--rate", "--request-rate", unit="requests/s"),
    )
    arrival: Literal["poisson", "gamma", "constant"] = Field("poisson", description="Open loop: arrival process")
    burstiness: float = Field(
        1.0,
        gt=0,
        le=1000,
        allow_inf_nan=False,
        description="Gamma shape (1 = Poisson, <1 burstier; not 1: gamma arrivals)",
    )
    max_concurrency: int | None = Field(
        None, ge=1, le=MAX_CONCURRENCY, description="Cap on requests in flight (alone: a closed loop of that many)"
    )
    requests: int | None = Field(
        None,
        ge=1,
        description=f"Measured requests (default {DEFAULT_REQUESTS})",
        json_schema_extra=_also("--requests", "--num-prompts", "--num-requests"),
    )
    duration: float | None = Field(
        None, gt=0, le=MAX_SECONDS, allow_inf_nan=False, description="Measured time", json_schema_extra=SECONDS
    )
    warmup_requests: int = Field(
        0,
        ge=0,
        description="Requests before the measured ones (not measured)",
        json_schema_extra=_also("--warmup-requests", "--num-warmups"),
    )
    warmup_s: float = Field(
        0.0,
        ge=0,
        le=MAX_SECONDS,
        allow_inf_nan=False,
        description="Warm-up time (not measured)",
        json_schema_extra=_also("--warmup-s"),
    )
    cooldown_s: float = Field(
        0.0,
        ge=0,
        le=MAX_SECONDS,
        allow_inf_nan=False,
        description="Time the load stays on after the measured requests",
        json_schema_extra=_also("--cooldown-s"),
    )
    ramp_s: float | None = Field(
        None,
        ge=0,
        le=MAX_SECONDS,
        allow_inf_nan=False,
        description="Closed loop: start the streams spread over this time (default: --warmup-s; 0: at once)",
        json_schema_extra=_also("--ramp-s"),
    )
    connect_timeout: float = Field(
        10.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False, description="Time to connect", json_schema_extra=SECONDS
    )
    first_token_timeout: float = Field(
        600.0,
        gt=0,
        le=MAX_SECONDS,
        allow_inf_nan=False,
        description="Time to the first token",
        json_schema_extra=SECONDS,
    )
    inter_token_timeout: float = Field(
        120.0,
        gt=0,
        le=MAX_SECONDS,
        allow_inf_nan=False,
        description="Time between two tokens",
        json_schema_extra=SECONDS,
    )
    goodput: str | None = Field(
        None,
        description="SLOs in ms, vLLM's syntax: ttft:500 tpot:50 e2el:10000 (one word or several)",
        json_schema_extra={"nargs": "+"},
    )
    percentiles: str = Field(
        "50,90,95,99",
        description="Percentiles to report, e.g. 50,90,99.9",
        json_schema_extra=_also("--percentiles", "--metric-percentiles"),
    )
    ignore_eos: bool = Field(False, description="vLLM: = --output-control ignore_eos", json_schema_extra=VLLM)
    disable_shuffle: bool = Field(False, description="vLLM: keep a ShareGPT file's order", json_schema_extra=VLLM)
    custom_output_len: int | None = Field(
        None, ge=-1, description="vLLM: output tokens of a custom file (vLLM's 256; -1: the file's)"
    )
    random_prefix_len: int | None = Field(
        None,
        ge=0,
        le=MAX_TOKENS,
        description="vLLM: a shared prefix of this many tokens on top of the input length",
        json_schema_extra=TOKENS,
    )
    prefix_repetition_prefix_len: int | None = Field(
        None, ge=0, le=MAX_TOKENS, description="vLLM: shared prefix tokens (256)", json_schema_extra=TOKENS
    )
    prefix_repetition_suffix_len: int | None = Field(
        None, ge=0, le=MAX_TOKENS, description="vLLM: tokens after the prefix (256)", json_schema_extra=TOKENS
    )
    prefix_repetition_num_prefixes: int | None = Field(
        None, ge=1, le=MAX_CONCURRENCY, description="vLLM: different prefixes (10)"
    )
    prefix_repetition_output_len: int | None = Field(
        None, ge=1, le=MAX_TOKENS, description="vLLM: output tokens (128)", json_schema_extra=TOKENS
    )

    @model_validator(mode="before")
    @classmethod
    def _vllm_meanings(cls, data: Any) -> Any:
        """Translates vLLM's flags whose meaning needs arithmetic (see the module docstring) into servetune's."""
        if not isinstance(data, dict):
            return data
        values = dict(data)
        if isinstance(values.get("goodput"), list | tuple):
            values["goodput"] = " ".join(values["goodput"])
        if isinstance(values.get("range_ratio"), str) and values["range_ratio"].strip().startswith("{"):
            values["range_ratio"] = _one_ratio(values["range_ratio"])
        name = values.get("dataset_name")
        if name == "random" or values.get("random_prefix_len") is not None:
            values.setdefault("input_tokens", 1024)  # vLLM's --random-input-len default comes with its spelling
        if values.pop("ignore_eos", False):
            values["output_control"] = "ignore_eos"
        elif name in ("sharegpt", "custom") and "output_control" not in values:
            values["output_control"] = "none"  # vLLM asks for ignore_eos only on random data or with --ignore-eos
        if name == "sharegpt" and not values.pop("disable_shuffle", False):
            values.setdefault("shuffle", True)
        values.pop("disable_shuffle", None)
        custom = values.pop("custom_output_len", None)
        if name == "custom" and "output_tokens" not in values:
            custom = 256 if custom is None else _int(custom, "--custom-output-len")
            if custom != -1:
                values["output_tokens"] = custom
        if (prefix := values.pop("random_prefix_len", None)) is not None and (n := _int(prefix, "--random-prefix-len")):
            values["prefix_tokens"] = n
            values["input_tokens"] = _int(values["input_tokens"], "--random-input-len") + n
        repetition = {k: values.pop(f"prefix_repetition_{k}", None) for k in _PREFIX_REPETITION}
        if name == "prefix_repetition":
            got = {k: _int(v, f"--prefix-repetition-{k.replace('_', '-')}") for k, v in repetition.items() if v}
            r = {**_PREFIX_REPETITION, **got}
            values.update(
                prefix_tokens=r["prefix_len"],
                input_tokens=r["prefix_len"] + r["suffix_len"],
                prefix_groups=r["num_prefixes"],
                output_tokens=r["output_len"],
            )
        concurrency, rate = values.get("concurrency"), values.get("rate")
        if concurrency is None and values.get("max_concurrency") is not None:
            if rate is None or _is_inf(rate):
                values["concurrency"] = values.pop("max_concurrency")  # all at t=0 with N in flight = a closed loop
                values.pop("rate", None)
        elif concurrency is None and rate is None:
            timed = [f for f in ("duration", "warmup_s", "cooldown_s") if _nonzero(values.get(f))]
            if timed:
                raise ServetuneError(
                    f"--{timed[0].replace('_', '-')} needs a load: give --concurrency or --rate",
                    "without either, every request is sent at once (vLLM's --request-rate inf), bounded by a count",
                )
            values["rate"] = math.inf  # vLLM's default --request-rate
        return values

    @field_validator("rate")
    @classmethod
    def _rate(cls, value: float | None) -> float | None:
        if value is not None and (math.isnan(value) or MAX_RATE < value < math.inf):
            raise ValueError(f"must be a number of requests per second up to {MAX_RATE:,.0f} (inf: all at once)")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> LoadOptions:
        if (self.concurrency is None) == (self.rate is None):
            raise ServetuneError("give exactly one of --concurrency and --rate", "e.g. --concurrency 8, or --rate 4")
        if self.max_concurrency is not None and self.concurrency is not None:
            raise ServetuneError("--max-concurrency caps an open loop", "use it with --rate, or drop it")
        if self.ramp_s and self.rate is not None:
            raise ServetuneError(
                "--ramp-s spreads the starts of a closed loop's streams; an open loop's arrivals have their own times",
                "drop --ramp-s with --rate, or use --concurrency N",
            )
        if self.output_std and self.range_ratio:
            raise ServetuneError("--output-std and --range-ratio both spread the output length", "give one of them")
        if self.dataset_name in ("sharegpt", "custom") and self.dataset is None:
            raise ServetuneError(
                f"--dataset-name {self.dataset_name} needs --dataset-path",
                "give the local file (servetune never downloads)",
            )
        if self.dataset_name in ("random", "prefix_repetition") and self.dataset is not None:
            raise ServetuneError(
                f"--dataset-name {self.dataset_name} makes its own requests: --dataset-path does not go with it",
                "drop --dataset-path, or use --dataset-name sharegpt or custom for the file",
            )
        if (self.mix or self.dataset) and (self.output_std or self.range_ratio):
            raise ServetuneError(
                "--output-std and --range-ratio spread --input-tokens/--output-tokens",
                "describe each class's lengths in --mix, or drop the spread",
            )
        if self.mix and self.dataset:
            raise ServetuneError("--mix and --dataset both describe the requests", "give one of them")
        if self.prefix_tokens and self.prefix_tokens >= self.input_tokens:
            raise ServetuneError(
                f"--prefix-tokens {self.prefix_tokens} must be less than --input-tokens {self.input_tokens}",
                "the input length counts the shared prefix: raise --input-tokens",
            )
        if self.dataset is not None and not self.dataset.is_file():
            raise ServetuneError(f"--dataset {self.dataset} is not a file", "give a JSONL or ShareGPT JSON file")
        self.classes()
        self.shape()
        self.slos()
        self.percentile_values()
        self.check_footprint()
        return self

    @classmethod
    def parse(cls, **values: Any) -> LoadOptions:
        """The options from already-parsed values, a bad one as a `ServetuneError` naming its flag."""
        try:
            return cls(**values)
        except ValidationError as err:
            raise from_validation_error(err, name=_flag, fix=_described) from None

    def load(self) -> LoadOptions:
        """The load options alone, of a command's args model that builds on them (what a run's files record):
        copied as they stand, since that model ran these validators already (vLLM's flags are translated once)."""
        if type(self) is LoadOptions:
            return self
        fields = set(LoadOptions.model_fields)
        return LoadOptions.model_construct(
            _fields_set=self.model_fields_set & fields, **{k: getattr(self, k) for k in fields}
        )

    def classes(self) -> tuple[RequestClass, ...]:
        """The traffic classes of a synthetic workload (`--mix`, or the single class of the length options)."""
        from servetune.load.workload import Dist, RequestClass

        if self.mix:
            return tuple(_mix(self.mix))
        spread = self.range_ratio * 3**-0.5
        unique = self.input_tokens - self.prefix_tokens  # a shared prefix keeps its length (as vLLM's does)
        n_in: int | Dist = Dist(kind="uniform", mean=self.input_tokens, std=spread * unique)
        n_out: int | Dist = Dist(kind="uniform", mean=self.output_tokens, std=spread * self.output_tokens)
        if not self.range_ratio:
            n_in = self.input_tokens
            n_out = (
                Dist(kind="normal", mean=self.output_tokens, std=self.output_std)
                if self.output_std
                else self.output_tokens
            )
        klass = RequestClass(
            input_tokens=n_in,
            output_tokens=n_out,
            shared_prefix_tokens=self.prefix_tokens,
            prefix_groups=self.prefix_groups,
            turns=self.turns,
        )
        return (klass,)

    def workload(self) -> Workload:
        from servetune.load.workload import FileSource, Workload

        if self.dataset is not None:
            fmt: Literal["auto", "jsonl", "sharegpt"] = "auto"
            if self.dataset_name == "sharegpt":
                fmt = "sharegpt"
            elif self.dataset_name == "custom":
                fmt = "jsonl"
            given = self.output_tokens if "output_tokens" in self.model_fields_set else None
            source = FileSource(path=str(self.dataset), format=fmt, output_tokens=given, shuffle=self.shuffle)
            workload = Workload(seed=self.seed, source=source)
        else:
            workload = Workload(seed=self.seed, classes=self.classes())
        return workload.model_copy(update={"output_control": self.output_control})

    def shape(self) -> LoadShape:
        from servetune.load.shape import LoadShape, Timeouts

        timeouts = Timeouts(
            connect_s=self.connect_timeout,
            first_token_s=self.first_token_timeout,
            inter_token_s=self.inter_token_timeout,
        )
        requests = self.requests if self.requests is not None or self.duration is not None else DEFAULT_REQUESTS
        common: dict[str, Any] = dict(
            requests=requests,
            duration_s=self.duration,
            warmup_requests=self.warmup_requests,
            warmup_s=self.warmup_s,
            cooldown_s=self.cooldown_s,
            seed=self.seed,
            timeouts=timeouts,
        )
        if self.concurrency is not None:
            return LoadShape.closed(self.concurrency, ramp_s=self.ramp_s, **common)
        assert self.rate is not None  # _consistent
        arrival = "gamma" if self.arrival == "poisson" and self.burstiness != 1 else self.arrival  # vLLM's rule
        return LoadShape.open(
            self.rate, arrival=arrival, burstiness=self.burstiness, max_concurrency=self.max_concurrency, **common
        )

    def slos(self) -> Slos | None:
        from servetune.metrics.slo import Slos

        return Slos.parse(self.goodput) if self.goodput else None

    def percentile_values(self) -> tuple[float, ...]:
        values = number_list(self.percentiles, "--percentiles")
        if not values or any(not 0 < p < 100 for p in values):
            raise ServetuneError(f"--percentiles {self.percentiles!r}: each must be in (0, 100)", "e.g. 50,90,99")
        return tuple(values)

    def at_level(self, level: float) -> LoadOptions:
        """The same options at another concurrency (a whole number) or rate: a point of a sweep."""
        if self.rate is not None:
            return self.model_copy(update={"rate": float(level)})
        return self.model_copy(update={"concurrency": int(level)})

    def _shortest_output(self) -> int:
        """The fewest output tokens a request may ask for (1 where a distribution or a file decides)."""
        if self.dataset is not None or self.output_std:
            return 1
        if self.mix:
            return min(int(c.output_dist.mean) for c in self.classes())
        return max(1, math.floor(self.output_tokens * (1 - self.range_ratio)))

    @property
    def level(self) -> str:
        """The load level in words, for a summary's title."""
        return f"concurrency {self.concurrency}" if self.concurrency is not None else f"rate {self.rate:g}/s"

    def footprint(
        self, request_floor_s: Callable[[int], float] | None = None, levels: Sequence[float] = ()
    ) -> Footprint:
        """What the run would send and keep, known before it starts (`shape_footprint` of its shape). A closed loop
        bounded by seconds sends as many as the backend answers, so it is counted only with `request_floor_s`, the
        shortest a request of so many output tokens can take there (the simulator knows it; a live server does not
        say); an open loop's arrivals are counted from its rate. A sweep (`levels`: one run per concurrency or
        rate, all kept) is the sum of its runs."""
        if levels:
            return Footprint.total(self.at_level(v).footprint(request_floor_s) for v in levels)
        if self.rate is not None:
            per_s: float | None = self.rate if math.isfinite(self.rate) else None
        elif request_floor_s:
            per_s = (self.concurrency or 1) / (self.turns * request_floor_s(self._shortest_output()))
        else:
            per_s = None
        longest = max((c.output_dist.mean for c in self.classes()), default=self.output_tokens)
        return shape_footprint(self.shape(), longest, turns=self.turns, per_s=per_s)

    def check_footprint(
        self,
        request_floor_s: Callable[[int], float] | None = None,
        requests_per_s: float | None = None,
        limit_s: float | None = None,
        levels: Sequence[float] = (),
    ) -> Footprint:
        """Refuses, before it starts, a run whose records would not fit in `MAX_RECORD_BYTES`, or one that a backend
        doing `requests_per_s` would take longer than `limit_s` to finish, naming the options that size it."""
        size = self.footprint(request_floor_s, levels)
        given = [n for n in _SIZING if n in self.model_fields_set and getattr(self, n)]
        sized_by = " x ".join(f"{_flag(n)} {getattr(self, n)}" for n in given) or f"{DEFAULT_REQUESTS} requests"
        if levels:
            sized_by += f" x {len(levels)} sweep levels"
        fix = "lower " + (", ".join(_flag(n) for n in given) or "--requests") + ", or split the run into several"
        size.check(sized_by, fix, requests_per_s, limit_s)
        return size


def shape_footprint(
    shape: LoadShape, longest_output: float, *, turns: int = 1, per_s: float | None = None
) -> Footprint:
    """What a run of `shape` would send and keep, known before it starts: its warm-up, measured and cool-down
    conversations x `turns` requests, each kept as a record with a chunk time per output token (`longest_output`
    at most). A phase bounded by seconds is counted at `per_s` conversations per second (None: not known before
    the run, counted as none). The one pricing of a run: bench, estimate and a tune suite's probes alike."""

    def within(seconds: float | None) -> float:
        return per_s * seconds if per_s is not None and seconds else 0.0

    measured = float(shape.requests) if shape.requests is not None else math.inf
    if shape.duration_s is not None and (per_s is not None or shape.requests is None):
        measured = min(measured, within(shape.duration_s))
    conversations = max(shape.warmup_requests, within(shape.warmup_s)) + measured + within(shape.cooldown_s)
    requests = conversations * turns
    return Footprint(requests=requests, record_bytes=requests * (RECORD_BYTES + TOKEN_BYTES * longest_output))


@dataclass(frozen=True)
class Footprint:
    """What a run would send and keep, estimated before it starts (`LoadOptions.footprint`)."""

    requests: float
    """Requests at most, of those known before the run (a live closed loop bounded by seconds counts none)."""
    record_bytes: float
    """Memory of their records."""

    @classmethod
    def total(cls, sizes: Iterable[Footprint]) -> Footprint:
        """Several runs' footprints added up (a sweep's levels, a suite's probes)."""
        listed = list(sizes)
        return cls(sum(f.requests for f in listed), sum(f.record_bytes for f in listed))

    def check(self, sized_by: str, fix: str, requests_per_s: float | None = None, limit_s: float | None = None) -> None:
        """The limits of a run, the one rule: records that would not fit in `MAX_RECORD_BYTES`, or more requests
        than a backend doing `requests_per_s` finishes in `limit_s`, are refused before the run starts, saying what
        sized it (`sized_by`) and `fix`."""
        if self.record_bytes > MAX_RECORD_BYTES:
            fits = int(MAX_RECORD_BYTES / self.record_bytes * self.requests)
            room = f"about {fits:,} requests at these lengths" if fits else "not one request of this length"
            raise ServetuneError(
                f"{sized_by} would keep ~{_amount(self.requests)} request records (~{self.record_bytes / 1e9:,.3g} GB);"
                f" the limit is {MAX_RECORD_BYTES / 1024**3:g} GiB, {room}",
                fix,
            )
        if requests_per_s and limit_s and self.requests / requests_per_s > limit_s:
            raise ServetuneError(
                f"{sized_by} is ~{_amount(self.requests)} requests, ~{_duration(self.requests / requests_per_s)} of"
                f" work here; the limit is {_duration(limit_s)}, about {int(requests_per_s * limit_s):,} requests",
                fix,
            )


_SIZING = ("requests", "warmup_requests", "duration", "warmup_s", "cooldown_s", "turns", "rate")
"""The options that size a run, as its refusal names them."""


def _amount(n: float) -> str:
    return "unbounded" if not math.isfinite(n) else f"{n:,.0f}" if n < 1e15 else f"{n:.3g}"


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "forever"
    for unit, size in (("days", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:,.3g} {unit}"
    return f"{seconds:.3g} s"


def _int(value: Any, flag: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ServetuneError(f"{flag} {value!r} is not a whole number", f"give {flag} a token count") from None
    if number < 0 and not (flag == "--custom-output-len" and number == -1):
        raise ServetuneError(f"{flag} {value!r} is negative", f"give {flag} a token count ≥ 0")
    return number


def _nonzero(value: Any) -> bool:
    """A time given and not zero (words the model refuses count as given: it says why)."""
    try:
        return value is not None and float(value) != 0
    except (TypeError, ValueError):
        return True


def _is_inf(value: Any) -> bool:
    try:
        return math.isinf(float(value))
    except (TypeError, ValueError):
        return False


def _one_ratio(text: str) -> float:
    """vLLM's `--random-range-ratio '{"input": r, "output": r}'`: servetune spreads both by one ratio."""
    import json

    try:
        ratios = json.loads(text)
        values = {float(ratios[k]) for k in ("input", "output") if k in ratios}
    except (ValueError, TypeError, KeyError):
        raise ServetuneError(f"--random-range-ratio {text!r} is not a number or a JSON object", "e.g. 0.1") from None
    if len(values) != 1:
        raise ServetuneError(
            f"--random-range-ratio {text}: servetune spreads input and output lengths by one ratio",
            "give one number, or equal input and output ratios",
        )
    return values.pop()


def number_list(text: str, what: str) -> list[float]:
    """`1,2,4,8` → numbers (finite, or inf)."""
    try:
        values = [float(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise ServetuneError(f"bad {what} list {text!r}", "write numbers separated by commas, e.g. 1,2,4,8") from None
    if any(math.isnan(v) for v in values):
        raise ServetuneError(f"bad {what} list {text!r}: nan is not a number", "e.g. 1,2,4,8")
    return values


def _mix(text: str) -> list[RequestClass]:
    """`short:0.65:256:128,medium:0.25:2048:256,long:0.10:16384:512` → request classes (name:weight:in:out)."""
    from servetune.load.workload import RequestClass

    classes = []
    for item in text.split(","):
        parts = item.split(":")
        try:
            name, weight, n_in, n_out = parts[0], float(parts[1]), int(parts[2]), int(parts[3])
        except (IndexError, ValueError):
            raise ServetuneError(
                f"bad traffic class {item!r} in --mix", "write classes as name:weight:input_tokens:output_tokens"
            ) from None
        if len(parts) != 4 or not (math.isfinite(weight) and weight > 0) or n_in < 1 or n_out < 1:
            raise ServetuneError(
                f"bad traffic class {item!r} in --mix", "a positive weight and token counts, e.g. short:0.65:256:128"
            )
        classes.append(RequestClass(name=name, weight=weight, input_tokens=n_in, output_tokens=n_out))
    return classes


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _described(flag: str) -> str | None:
    """The fix of a bad load option: what the option is (its help line)."""
    info = LoadOptions.model_fields.get(flag.removeprefix("--").replace("-", "_"))
    return info.description.lower() if info and info.description else None
