"""How requests look, deterministic by seed.

A `Workload` is a traffic mix of request classes (seed 004's 65% short / 25% medium / 10% long), each with an
input length (exact, for the chosen token counter), an output length (fixed or a distribution), an optional
shared prefix reused by groups of requests (seed 001's prefix test), and a number of turns (multi-turn
conversations); or requests read from a JSONL or ShareGPT file. The same seed gives the same requests in the
same order on every run, whatever the load shape. The prompts' words may have a seed of their own (`text_seed`):
two workloads with one `seed` and different text seeds send requests of the same classes and lengths with
different texts (a tune's repeat on two variants: the same draws, and no prompt either finds in a prefix cache).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from servetune.errors import ServetuneError


class Dist(BaseModel):
    """A token-length distribution; `fixed` by default. Samples are rounded and clipped to [min, max]."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["fixed", "uniform", "normal", "lognormal", "exponential"] = "fixed"
    mean: float
    std: float = 0.0
    min: int = 1
    max: int | None = None

    def sample(self, rng: np.random.Generator) -> int:
        if self.kind == "fixed":
            value = self.mean
        elif self.kind == "uniform":
            value = rng.uniform(self.mean - self.std * 3**0.5, self.mean + self.std * 3**0.5)
        elif self.kind == "normal":
            value = rng.normal(self.mean, self.std)
        elif self.kind == "exponential":
            value = rng.exponential(self.mean)
        else:
            sigma2 = (1 + (self.std / self.mean) ** 2) if self.mean else 1.0
            import math

            value = rng.lognormal(math.log(self.mean) - math.log(sigma2) / 2, math.log(sigma2) ** 0.5)
        value = max(self.min, round(value))
        return value if self.max is None else min(self.max, value)


def _dist(value: int | Dist) -> Dist:
    return value if isinstance(value, Dist) else Dist(mean=value)


class RequestClass(BaseModel):
    """One class of traffic.

    shared_prefix_tokens: the first tokens of the input are a prefix shared by all requests of the same group
    (a long system prompt); prefix_groups: how many different prefixes (requests go round-robin over them).
    turns: a conversation of this many requests; each turn's input is the whole history (previous prompts and
    answers of the requested output length) plus `input_tokens` new tokens.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = "default"
    weight: float = Field(1.0, gt=0)
    input_tokens: int | Dist = 256
    output_tokens: int | Dist = 128
    shared_prefix_tokens: int = Field(0, ge=0)
    prefix_groups: int = Field(1, ge=1)
    turns: int = Field(1, ge=1)

    @model_validator(mode="after")
    def _prefix_fits(self) -> RequestClass:
        if self.shared_prefix_tokens and self.shared_prefix_tokens >= self.input_dist.mean:
            raise ServetuneError(
                f"class {self.name!r}: input_tokens must include the shared prefix "
                f"({self.shared_prefix_tokens} tokens)",
                "set input_tokens > shared_prefix_tokens (the input length counts the prefix)",
            )
        return self

    @property
    def input_dist(self) -> Dist:
        return _dist(self.input_tokens)

    @property
    def output_dist(self) -> Dist:
        return _dist(self.output_tokens)


class FileSource(BaseModel):
    """Requests from a file: JSONL (`prompt` or `messages`, optional `max_tokens`) or ShareGPT JSON."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    format: Literal["auto", "jsonl", "sharegpt"] = "auto"
    output_tokens: int | None = None  # overrides the file's lengths
    shuffle: bool = False


class PromptSource(BaseModel):
    """Requests given as texts (a probe's "Hello"): sent in turn, each asking `output_tokens`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prompts: tuple[str, ...] = Field(min_length=1)
    output_tokens: int = Field(ge=1)


class Workload(BaseModel):
    """How requests look. `output_control` decides how a fixed output length is asked for: `ignore_eos`
    (vLLM, SGLang), `min_tokens` (min_tokens = max_tokens, keeps stop tokens working), or `none` (max_tokens
    only; the validity report then shows how many answers ended early)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int = 0
    """Draws each conversation's class and lengths (and, without `text_seed`, its words)."""
    text_seed: int | None = None
    """Draws the prompts' words apart from the lengths (None: `seed` draws them)."""
    classes: tuple[RequestClass, ...] = (RequestClass(),)
    source: FileSource | PromptSource | None = None
    output_control: Literal["ignore_eos", "min_tokens", "none"] = "ignore_eos"

    @property
    def words_seed(self) -> int:
        """The seed of the prompts' words (the generator of `load.prompts` and the simulator's content ids)."""
        return self.seed if self.text_seed is None else self.text_seed

    @classmethod
    def synthetic(
        cls, input_tokens: int | Dist = 256, output_tokens: int | Dist = 128, *, seed: int = 0, **kw: Any
    ) -> Workload:
        return cls(seed=seed, classes=(RequestClass(input_tokens=input_tokens, output_tokens=output_tokens),), **kw)

    @classmethod
    def shared_prefix(
        cls,
        prefix_tokens: int,
        suffix_tokens: int,
        output_tokens: int | Dist = 128,
        *,
        groups: int = 1,
        seed: int = 0,
        text_seed: int | None = None,
    ) -> Workload:
        """A long system prompt reused by every request of its group, then a unique question."""
        klass = RequestClass(
            name="prefix",
            input_tokens=prefix_tokens + suffix_tokens,
            output_tokens=output_tokens,
            shared_prefix_tokens=prefix_tokens,
            prefix_groups=groups,
        )
        return cls(seed=seed, text_seed=text_seed, classes=(klass,))

    @classmethod
    def long_document(
        cls, target_tokens: int, output_tokens: int | Dist = 128, *, seed: int = 0, text_seed: int | None = None
    ) -> Workload:
        """One long document up to `target_tokens` input tokens (128K and beyond)."""
        return cls(
            seed=seed,
            text_seed=text_seed,
            classes=(RequestClass(name="long_document", input_tokens=target_tokens, output_tokens=output_tokens),),
        )

    @classmethod
    def mix(cls, classes: list[RequestClass], *, seed: int = 0) -> Workload:
        """A traffic mix: each request's class is drawn by weight (deterministic by seed)."""
        return cls(seed=seed, classes=tuple(classes))

    @classmethod
    def texts(cls, prompts: list[str], output_tokens: int, *, seed: int = 0) -> Workload:
        """Fixed prompt texts (a chat message for the chat endpoint, a prompt for completions)."""
        return cls(seed=seed, source=PromptSource(prompts=tuple(prompts), output_tokens=output_tokens))

    @classmethod
    def from_file(
        cls,
        path: str,
        *,
        format: Literal["auto", "jsonl", "sharegpt"] = "auto",
        output_tokens: int | None = None,
        seed: int = 0,
    ) -> Workload:
        return cls(seed=seed, source=FileSource(path=path, format=format, output_tokens=output_tokens))
