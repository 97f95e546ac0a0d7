"""`Backend`: what a probe sends load to — a live OpenAI-compatible server, or the simulator in process.

Both answer `run(workload, shape)` with the same `LoadResult` (every `RequestRecord` and the `Summary` of the
measured ones, vLLM's definitions), `scrape()` with the same `MetricsSnapshot`, and `models()` with the same
`Models`; so a probe is written once and the tuner's estimates run the very probe the suite runs
(`servetune.sim.backend.SimBackend` is the simulated one).
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from servetune.control.client import ControlClient, ControlError, ControlTimeouts, Models
from servetune.load.runner import LoadResult, run_load
from servetune.load.shape import LoadShape
from servetune.load.workload import Workload
from servetune.metrics.prometheus import MetricsSnapshot, scrape
from servetune.metrics.slo import Slos


class ClientSpec(BaseModel):
    """How requests reach a live server (the same for every variant unless a variant overrides it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    endpoint: Literal["chat", "completions"] = "chat"
    stream: bool = True
    api_key: str | None = None
    sampling: str | None = Field(default=None, description="Name of a sampling preset used for every request.")
    extra_body: dict[str, Any] = Field(default_factory=dict, description="Fields added to every request body.")
    tokenizer: str | None = Field(default=None, description="tokenizer.json for exact prompt lengths.")
    request_timeout_s: float = Field(default=600.0, gt=0, allow_inf_nan=False)

    def limit(self, shape: LoadShape) -> LoadShape:
        """The shape with its first-token and whole-request timeouts capped by this client's request timeout."""
        timeouts = shape.timeouts.model_copy(
            update={
                "first_token_s": min(shape.timeouts.first_token_s, self.request_timeout_s),
                "request_s": min(shape.timeouts.request_s, self.request_timeout_s),
            }
        )
        return shape.model_copy(update={"timeouts": timeouts})

    def control(self) -> ControlTimeouts:
        """The control-plane calls' limits (`/metrics` around every probe, `/v1/models`, `/tokenize`): the
        client's defaults, never longer than its request timeout (a frozen engine costs a probe the seconds the
        experiment allowed, not the control client's own 30 s per call)."""
        default = ControlTimeouts()
        rt = self.request_timeout_s
        return ControlTimeouts(connect_s=min(default.connect_s, rt), total_s=min(default.total_s, rt))


class GreedyText(BaseModel):
    """One prompt's greedy answer (temperature 0): its tokens as the engine split them and each token's
    log-probability, what a correctness check compares between two configs of one model."""

    model_config = ConfigDict(frozen=True)

    prompt: str
    tokens: list[str] = Field(default_factory=list)
    logprobs: list[float | None] = Field(default_factory=list)
    prompt_tokens: int | None = None
    error: str | None = None


class Backend(Protocol):
    """A server to measure, live or simulated."""

    @property
    def label(self) -> str:
        """Where the load goes, for messages (`http://127.0.0.1:8000`, `simulated vLLM 0.24.0 on 1x H200`)."""

    @property
    def model(self) -> str: ...

    @property
    def engine(self) -> str: ...

    @property
    def max_model_len(self) -> int | None: ...

    @property
    def time_scale(self) -> float:
        """Simulated seconds per wall second of the figures `run` returns (sim-serve's --time-scale; 1 for a real
        engine and for the in-process simulator, whose records are in simulated time already)."""

    @property
    def gpu_count(self) -> int: ...

    async def run(self, workload: Workload, shape: LoadShape, *, slos: Slos | None = None) -> LoadResult: ...

    async def scrape(self) -> MetricsSnapshot | None:
        """The engine's counters now (None when it exposes none)."""

    async def models(self) -> Models | None:
        """What `/v1/models` lists (None when it cannot be read)."""

    async def greedy(self, prompt: str, max_tokens: int) -> GreedyText | None:
        """The greedy answer to one prompt with its tokens' log-probabilities (None: this backend generates no
        real text, as the simulator)."""


class LiveBackend:
    """A running OpenAI-compatible server, reached through the load generator and the control-plane client."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        client: ClientSpec | None = None,
        sampling: dict[str, Any] | None = None,
        engine: str = "vllm",
        max_model_len: int | None = None,
        time_scale: float = 1.0,
        gpu_count: int = 0,
        control: ControlTimeouts | None = None,
    ) -> None:
        self.client = client or ClientSpec()
        self._control = ControlClient(base_url, api_key=self.client.api_key, timeouts=control or self.client.control())
        self.base_url = self._control.base_url
        self.sampling = dict(sampling or {})
        self._model = model
        self._engine = engine
        self._max_model_len = max_model_len
        self._time_scale = time_scale
        self._gpu_count = gpu_count

    @property
    def label(self) -> str:
        return self.base_url

    @property
    def model(self) -> str:
        return self._model

    @property
    def engine(self) -> str:
        return self._engine

    @property
    def max_model_len(self) -> int | None:
        return self._max_model_len

    @property
    def time_scale(self) -> float:
        return self._time_scale

    @property
    def gpu_count(self) -> int:
        return self._gpu_count

    def body(self) -> dict[str, Any]:
        """Fields added to every request: the sampling preset, then the client's extra body."""
        return {**self.sampling, **self.client.extra_body}

    async def run(self, workload: Workload, shape: LoadShape, *, slos: Slos | None = None) -> LoadResult:
        return await run_load(
            self.base_url,
            self._model,
            workload,
            self.client.limit(shape),
            endpoint=self.client.endpoint,
            stream=self.client.stream,
            api_key=self.client.api_key,
            extra_body=self.body(),
            tokenizer=self.client.tokenizer,
            slos=slos,
            control=self._control.timeouts,
        )

    async def scrape(self) -> MetricsSnapshot | None:
        try:
            return await scrape(self._control)
        except ControlError:
            return None

    async def models(self) -> Models | None:
        try:
            return await self._control.models()
        except ControlError:
            return None

    async def greedy(self, prompt: str, max_tokens: int) -> GreedyText | None:
        """`/v1/completions` at temperature 0 with one log-probability per token (vLLM's `logprobs` object, or
        llama.cpp's `content` list); the client's extra body goes along, its sampling preset does not (it would
        not be greedy)."""
        body = {
            **self.client.extra_body,
            "model": self._model,
            "prompt": prompt,
            "max_tokens": max_tokens,
            "temperature": 0,
            "logprobs": 1,
            "stream": False,
        }
        try:
            status, answer = await self._control.post_json("/v1/completions", body)
        except ControlError as err:
            return GreedyText(prompt=prompt, error=str(err))
        if status != 200 or not isinstance(answer, dict) or not answer.get("choices"):
            return GreedyText(prompt=prompt, error=f"HTTP {status}: {str(answer)[:200]}")
        return greedy_text(prompt, answer)


def greedy_text(prompt: str, answer: dict[str, Any]) -> GreedyText:
    """A completions answer as tokens and log-probabilities: vLLM's `logprobs: {tokens, token_logprobs}`,
    llama.cpp's `logprobs: {content: [{token, logprob}]}`; without log-probabilities the text as one token."""
    choice = answer["choices"][0]
    logprobs = choice.get("logprobs") or {}
    usage = answer.get("usage") or {}
    if isinstance(logprobs.get("content"), list):
        items = logprobs["content"]
        tokens = [str(item.get("token", "")) for item in items]
        values = [item.get("logprob") for item in items]
    elif isinstance(logprobs.get("tokens"), list):
        tokens = [str(t) for t in logprobs["tokens"]]
        values = list(logprobs.get("token_logprobs") or [None] * len(tokens))
    else:
        tokens, values = [str(choice.get("text", ""))], [None]
    return GreedyText(
        prompt=prompt,
        tokens=tokens,
        logprobs=[float(v) if isinstance(v, int | float) else None for v in values],
        prompt_tokens=usage.get("prompt_tokens"),
    )
