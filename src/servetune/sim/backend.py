"""`SimBackend`: the simulator in process, behind the load room's `Backend` protocol.

A probe, `servetune estimate` and the tuner's estimates send their load here exactly as they would to a live
server (`servetune.load.backend.LiveBackend`): the same `Workload` and `LoadShape`, answered with the same
`LoadResult` — `RequestRecord`s (in simulated nanoseconds) and their `Summary` by `metrics.summary.summarize`,
the function `servetune bench` uses. Synthetic workloads take their lengths from `load.prompts.plan_conversation`
(the live client's sampling rule: a seed means the same requests here and on a server); text workloads (prompt
texts, JSONL or ShareGPT files, read by the load room's own reader) are counted with the simulator's tokenizer,
through the chat template for the chat endpoint, as `sim-serve` counts them. The engine (KV pool, prefix cache,
counters) and its clock persist from one `run` to the next, like a real server's; `scrape()` renders the same
`/metrics` text `sim-serve` serves.
"""

from __future__ import annotations

import datetime as dt

from servetune.control.client import Models, parse_models
from servetune.load.backend import ClientSpec, GreedyText
from servetune.load.prompts import endpoint_fields, load_items, plan_conversation
from servetune.load.runner import LoadResult
from servetune.load.shape import LoadShape
from servetune.load.workload import Workload
from servetune.metrics.prometheus import MetricsSnapshot
from servetune.metrics.slo import Slos
from servetune.metrics.steady import settle
from servetune.metrics.summary import summarize
from servetune.sim.deployment import SimDeployment
from servetune.sim.text import SimCounter, SimTokenizer
from servetune.sim.virtual import (
    ConversationSource,
    RunTrace,
    Segment,
    VirtualConversation,
    VirtualServer,
    VirtualTurn,
)

REQUESTS_PER_S = 1_000
"""Simulated requests per second of CPU, the slow end (measured with `estimate` on the 2-core CI machine: 1,150 at
concurrency 1, up to 2,100 at 64-512): what a run's size is priced with before it starts."""
RUN_LIMIT_S = 600.0
"""The longest an `estimate` may compute: a run priced above it is refused before it starts."""


class SimBackend:
    """A simulated vLLM deployment, run in process on a virtual clock (see the module docstring).

    `client` says how requests are sent (the endpoint decides whether the chat template's tokens count,
    `stream` whether chunk times are seen, `request_timeout_s` caps the shape's timeouts as for a live server);
    sampling and extra body fields change nothing the simulator computes."""

    def __init__(
        self, deployment: SimDeployment, *, model: str | None = None, client: ClientSpec | None = None
    ) -> None:
        self.deployment = deployment
        self.client = client or ClientSpec()
        self.tokenizer = SimTokenizer(deployment.args.model)
        self._model = model or deployment.served_name
        self._server = VirtualServer(deployment)
        self.trace: RunTrace | None = None
        """Set it to record where each request's time goes in the next runs (`sim/explain.py`)."""

    @property
    def label(self) -> str:
        return self.deployment.label

    @property
    def model(self) -> str:
        return self._model

    @property
    def engine(self) -> str:
        return "sim"

    @property
    def max_model_len(self) -> int | None:
        return self.deployment.limits.max_model_len

    @property
    def time_scale(self) -> float:
        return 1.0

    @property
    def gpu_count(self) -> int:
        return self.deployment.args.tensor_parallel_size

    @property
    def steps(self) -> int:
        """Engine steps simulated so far (how much work the estimates did)."""
        return self._server.engine.num_steps

    async def run(self, workload: Workload, shape: LoadShape, *, slos: Slos | None = None) -> LoadResult:
        """Runs `workload` in `shape` on the simulated server; `wall_s` of the result is simulated seconds."""
        source = await self._text_source(workload) if workload.source is not None else self._synthetic(workload)
        shape = self.client.limit(shape)
        started_at = dt.datetime.now(dt.UTC).isoformat()
        t0 = self._server.clock
        before = self._server.snapshot(self._model)
        records = self._server.run(source, shape, stream=self.client.stream, trace=self.trace)
        settle(records)  # as a live run does: a start-up transient is warm-up (metrics/steady.py)
        return LoadResult(
            base_url=self.label,
            model=self._model,
            endpoint=self.client.endpoint,
            stream=self.client.stream,
            tokenizer=self.tokenizer.name,
            shape=shape,
            workload=workload,
            started_at=started_at,
            wall_s=self._server.clock - t0,
            records=records,
            summary=summarize(records, slos=slos),
            engine_time=self._server.engine_time(before, records),
        )

    async def scrape(self) -> MetricsSnapshot | None:
        return self._server.snapshot(self._model)

    async def models(self) -> Models | None:
        return parse_models(self.deployment.models_payload(self._model))

    async def greedy(self, prompt: str, max_tokens: int) -> GreedyText | None:
        """The simulator times tokens; it generates no text a correctness check could compare."""
        return None

    # ------------------------------------------------------------------ workloads as engine requests
    def _synthetic(self, workload: Workload) -> ConversationSource:
        """Conversations by the shared sampling rule, their content as segments: the same system prompt in a
        group, each turn's history (earlier inputs and answers) as the prefix of its prompt."""
        seed = workload.words_seed

        def build(index: int) -> VirtualConversation:
            plan = plan_conversation(workload, index)
            history: list[Segment] = []
            if plan.prefix_tokens:
                history += self._message(("prefix", seed, plan.class_index, plan.prefix_group), plan.prefix_tokens)
            turns = []
            for k, turn in enumerate(plan.turns):
                history += self._message(("input", seed, index, k), turn.input_tokens, "user")
                prompt = history + self._generation_prompt()
                tokens = sum(n for _, n in prompt)
                turns.append(VirtualTurn(tokens, turn.output_tokens, plan.prompt_tokens(k), tuple(prompt)))
                history += self._message(("answer", seed, index, k), turn.output_tokens, "assistant")
            return VirtualConversation(index, plan.cls, tuple(turns))

        return build

    def _message(self, key: tuple, tokens: int, role: str = "system") -> list[Segment]:
        """A message of `tokens` content tokens, inside the chat template's markers for the chat endpoint."""
        if self.client.endpoint != "chat":
            return [(key, tokens)]
        before, after = self.tokenizer.template_tokens(role)
        return [(("open", role), before), (key, tokens), (("close",), after)]

    def _generation_prompt(self) -> list[Segment]:
        if self.client.endpoint != "chat":
            return []
        return [(("open", "assistant"), self.tokenizer.template_tokens("assistant")[0])]

    async def _text_source(self, workload: Workload) -> ConversationSource:
        """Text requests read by the load room's reader, tokenized as sim-serve tokenizes them (each distinct
        request once)."""
        tok = self.tokenizer
        items = await load_items(workload, SimCounter(tok))
        chat = self.client.endpoint == "chat"
        built: dict[int, VirtualTurn] = {}

        def build(index: int) -> VirtualConversation:
            i = index % len(items)
            if i not in built:
                fields, max_tokens = items[i]
                parts = [m["content"] for m in fields["messages"]] if "messages" in fields else [fields["prompt"]]
                expected = sum(len(tok.encode(p)) for p in parts) if chat else len(tok.encode(" ".join(parts)))
                sent = endpoint_fields(fields, self.client.endpoint)
                ids = tok.encode_chat(sent["messages"]) if chat else tok.encode(sent["prompt"])
                built[i] = VirtualTurn(len(ids), max_tokens, expected, ids=tuple(ids))
            return VirtualConversation(index, "file", (built[i],))

        return build
