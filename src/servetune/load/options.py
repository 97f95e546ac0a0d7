"""`LoadOptions`: a load run as a command line asks for it — workload, load shape, SLOs and percentiles.

`servetune bench` (against a server) and `servetune estimate` (against the simulator) take the same options
and turn them into a `Workload` and a `LoadShape` here, so the same flags mean the same requests in both.
Every value is checked at the edge, before any work starts (positive counts, finite numbers, one of
concurrency or rate); a bad one is a `ServetuneError` naming the flag. `from_argv` reads the options from raw
argv (estimate passes vLLM flags through as well), `parse` from values a CLI framework already parsed.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any, Literal, NoReturn

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from servetune.errors import ServetuneError
from servetune.load.shape import LoadShape, Timeouts
from servetune.load.workload import Dist, RequestClass, Workload
from servetune.metrics.slo import Slos

MAX_CONCURRENCY = 100_000
"""A sanity bound on requests in flight (a typo such as `--concurrency 1000000000` is an error, not a run)."""
DEFAULT_REQUESTS = 100
"""Measured requests when neither `--requests` nor `--duration` bounds the run."""


class LoadOptions(BaseModel):
    """The load options of `bench` and `estimate` (each field is the flag `--<name with dashes>`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input_tokens: int = Field(256, ge=1, description="Input tokens per request (exact with a tokenizer)")
    output_tokens: int = Field(128, ge=1, description="Output tokens per request")
    output_std: float = Field(
        0.0, ge=0, allow_inf_nan=False, description="Output length standard deviation (normal distribution); 0 = fixed"
    )
    range_ratio: float = Field(
        0.0, ge=0, lt=1, description="Input and output lengths uniform in [1-r, 1+r] x the given ones; 0 = fixed"
    )
    prefix_tokens: int = Field(
        0, ge=0, description="Shared prefix tokens (a long system prompt), counted in input-tokens"
    )
    prefix_groups: int = Field(1, ge=1, description="Number of different shared prefixes")
    turns: int = Field(1, ge=1, description="Turns per conversation (multi-turn)")
    mix: str | None = Field(None, description="Traffic mix name:weight:in:out,... (instead of input/output tokens)")
    dataset: Path | None = Field(None, description="Requests from a JSONL or ShareGPT JSON file")
    output_control: Literal["ignore_eos", "min_tokens", "none"] = Field(
        "ignore_eos", description="ignore_eos, min_tokens or none"
    )
    seed: int = Field(0, ge=0, description="Seed of the requests' lengths, texts and arrival times")
    concurrency: int | None = Field(None, ge=1, le=MAX_CONCURRENCY, description="Closed loop: requests in flight")
    rate: float | None = Field(None, gt=0, description="Open loop: requests per second (inf: all at once)")
    arrival: Literal["poisson", "gamma", "constant"] = Field("poisson", description="poisson, gamma or constant")
    burstiness: float = Field(1.0, gt=0, allow_inf_nan=False, description="Gamma shape (1 = Poisson, <1 burstier)")
    max_concurrency: int | None = Field(
        None, ge=1, le=MAX_CONCURRENCY, description="Cap on requests in flight (open loop)"
    )
    requests: int | None = Field(None, ge=1, description=f"Measured requests (default {DEFAULT_REQUESTS})")
    duration: float | None = Field(None, gt=0, allow_inf_nan=False, description="Measured seconds")
    warmup_requests: int = Field(0, ge=0, description="Requests before the measured ones (not measured)")
    warmup_s: float = Field(0.0, ge=0, allow_inf_nan=False, description="Seconds of warm-up (not measured)")
    cooldown_s: float = Field(
        0.0, ge=0, allow_inf_nan=False, description="Seconds the load stays on after the measured requests"
    )
    connect_timeout: float = Field(10.0, gt=0, allow_inf_nan=False, description="Seconds to connect")
    first_token_timeout: float = Field(600.0, gt=0, allow_inf_nan=False, description="Seconds to the first token")
    inter_token_timeout: float = Field(120.0, gt=0, allow_inf_nan=False, description="Seconds between two tokens")
    goodput: str | None = Field(None, description="SLOs in ms, vLLM syntax: 'ttft:500 tpot:50 e2el:10000'")
    percentiles: str = Field("50,90,95,99", description="Percentiles to report, e.g. 50,90,99.9")

    @field_validator("rate")
    @classmethod
    def _rate(cls, value: float | None) -> float | None:
        if value is not None and math.isnan(value):
            raise ValueError("must be a number (inf: all at once)")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> LoadOptions:
        if (self.concurrency is None) == (self.rate is None):
            raise ServetuneError("give exactly one of --concurrency and --rate", "e.g. --concurrency 8, or --rate 4")
        if self.max_concurrency is not None and self.concurrency is not None:
            raise ServetuneError("--max-concurrency caps an open loop", "use it with --rate, or drop it")
        if self.output_std and self.range_ratio:
            raise ServetuneError("--output-std and --range-ratio both spread the output length", "give one of them")
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
        return self

    @classmethod
    def parse(cls, **values: Any) -> LoadOptions:
        """The options from already-parsed values, a bad one as a `ServetuneError` naming its flag."""
        try:
            return cls(**values)
        except ValidationError as err:
            raise _flag_error(err) from None

    @classmethod
    def from_argv(cls, argv: list[str], aliases: dict[str, str] | None = None) -> tuple[LoadOptions, list[str]]:
        """The options found in `argv` (and the words left for others); `aliases` maps other spellings of a flag
        (`--num-requests`) to a field (`requests`)."""
        parser = _Parser(prog="load options", add_help=False, allow_abbrev=False)
        for name in cls.model_fields:
            extra = [flag for flag, field in (aliases or {}).items() if field == name]
            parser.add_argument(_flag(name), *extra, dest=name, default=argparse.SUPPRESS)
        ns, rest = parser.parse_known_args(argv)
        return cls.parse(**vars(ns)), rest

    @classmethod
    def help_lines(cls) -> list[str]:
        """One line per option, for a command's help text."""
        return [f"  {_flag(name):<24} {info.description}" for name, info in cls.model_fields.items()]

    def classes(self) -> tuple[RequestClass, ...]:
        """The traffic classes of a synthetic workload (`--mix`, or the single class of the length options)."""
        if self.mix:
            return tuple(_mix(self.mix))
        spread = self.range_ratio * 3**-0.5
        n_in: int | Dist = Dist(kind="uniform", mean=self.input_tokens, std=spread * self.input_tokens)
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
        if self.dataset is not None:
            workload = Workload.from_file(str(self.dataset), seed=self.seed)
        else:
            workload = Workload(seed=self.seed, classes=self.classes())
        return workload.model_copy(update={"output_control": self.output_control})

    def shape(self) -> LoadShape:
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
            return LoadShape.closed(self.concurrency, **common)
        assert self.rate is not None  # _consistent
        return LoadShape.open(
            self.rate, arrival=self.arrival, burstiness=self.burstiness, max_concurrency=self.max_concurrency, **common
        )

    def slos(self) -> Slos | None:
        return Slos.parse(self.goodput) if self.goodput else None

    def percentile_values(self) -> tuple[float, ...]:
        values = number_list(self.percentiles, "--percentiles")
        if not values or any(not 0 < p < 100 for p in values):
            raise ServetuneError(f"--percentiles {self.percentiles!r}: each must be in (0, 100)", "e.g. 50,90,99")
        return tuple(values)

    @property
    def level(self) -> str:
        """The load level in words, for a summary's title."""
        return f"concurrency {self.concurrency}" if self.concurrency is not None else f"rate {self.rate:g}/s"


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


def _flag_error(err: ValidationError) -> ServetuneError:
    first = err.errors()[0]
    name = str(first["loc"][0]) if first["loc"] else ""
    info = LoadOptions.model_fields.get(name)
    flag = _flag(name) if name else "load options"
    return ServetuneError(
        f"{flag}: {first['msg'][0].lower()}{first['msg'][1:]} (got {first.get('input')!r})",
        f"{flag}: {info.description}" if info and info.description else None,
    )


class _Parser(argparse.ArgumentParser):
    """argparse that raises a `ServetuneError` instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise ServetuneError(message, "see the command's --help")
