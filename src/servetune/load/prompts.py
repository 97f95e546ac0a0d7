"""Materializes a `Workload` into concrete requests with exact input token counts.

Prompts are random words drawn (by seed) from words that are one token each for the chosen counter, then
counted and corrected word by word until the count is exact (usually one or two counts). With a local
tokenizer or the server's `/tokenize` the count is exact for that tokenizer; with the word fallback it is
approximate and the validity report says so. For chat, the count is the sum over message contents (the chat
template's own tokens come on top; the server's `usage.prompt_tokens` shows them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from servetune.errors import ServetuneError
from servetune.load.tokens import TokenCounter
from servetune.load.workload import PromptSource, RequestClass, Workload

Endpoint = Literal["completions", "chat"]


@dataclass(frozen=True)
class Turn:
    """One request: the endpoint-specific input fields, its exact prompt token count and its output length."""

    fields: dict
    prompt_tokens: int | None
    max_tokens: int | None


@dataclass(frozen=True)
class TurnPlan:
    """One turn's lengths: new input tokens (the history comes on top) and requested output tokens."""

    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class ConversationPlan:
    """The lengths of conversation `index` of a synthetic workload, before any text exists.

    The one sampling rule of a workload: the live request factory writes text to these lengths and the
    simulator schedules these lengths, so a seed means the same requests on a server and in the simulator.
    """

    index: int
    cls: str
    class_index: int
    prefix_tokens: int
    prefix_group: int
    turns: tuple[TurnPlan, ...]

    def prompt_tokens(self, turn: int) -> int:
        """Input tokens of a turn: the shared prefix, the whole history (inputs and answers), the new input."""
        history = sum(t.input_tokens + t.output_tokens for t in self.turns[:turn])
        return self.prefix_tokens + history + self.turns[turn].input_tokens


_NEVER_READ = np.random.default_rng(0)


def _draws(workload: Workload) -> bool:
    """Whether planning a conversation of `workload` draws random numbers (a class, or a length)."""
    classes = workload.classes
    return len(classes) > 1 or any(d.kind != "fixed" for c in classes for d in (c.input_dist, c.output_dist))


def plan_conversation(workload: Workload, index: int) -> ConversationPlan:
    """Draws conversation `index`'s class and lengths (deterministic by the workload's seed)."""
    if workload.source is not None:
        raise ServetuneError("a file workload has no synthetic lengths", "describe it with request classes")
    # A workload of one class with fixed lengths draws nothing: its generator is never read, so it is not built
    # (building one costs ~10 µs, a tenth of a conversation); the lengths are the same either way.
    rng = np.random.default_rng([workload.seed, index]) if _draws(workload) else _NEVER_READ
    weights = np.array([c.weight for c in workload.classes], dtype=float)
    ci = int(rng.choice(len(weights), p=weights / weights.sum())) if len(weights) > 1 else 0
    klass = workload.classes[ci]
    turns = []
    for k in range(klass.turns):
        n_in, n_out = klass.input_dist.sample(rng), klass.output_dist.sample(rng)
        if k == 0 and klass.shared_prefix_tokens:  # the first input counts the prefix and needs one token of its own
            n_in = max(n_in, klass.shared_prefix_tokens + 1) - klass.shared_prefix_tokens
        turns.append(TurnPlan(n_in, n_out))
    group = index % klass.prefix_groups if klass.shared_prefix_tokens else 0
    return ConversationPlan(index, klass.name, ci, klass.shared_prefix_tokens, group, tuple(turns))


@dataclass(frozen=True)
class Conversation:
    """A unit of work: its turns are sent one after another, each after the previous answer arrived."""

    index: int
    cls: str
    turns: tuple[Turn, ...]


class RequestFactory:
    """Builds conversation `i` of a workload; the same (workload, counter) always gives the same requests."""

    def __init__(self, workload: Workload, counter: TokenCounter, endpoint: Endpoint) -> None:
        self.workload = workload
        self.counter = counter
        self.endpoint = endpoint
        self.pool = counter.words()
        self._prefixes: dict[tuple[int, int], tuple[str, int]] = {}
        self._file: list[tuple[dict, int | None]] | None = None

    async def conversation(self, index: int) -> Conversation:
        if self.workload.source is not None:
            return await self._from_file(index)
        plan = plan_conversation(self.workload, index)
        rng = np.random.default_rng([self.workload.words_seed, index, 2])  # text only: lengths come from the plan
        klass = self.workload.classes[plan.class_index]
        prefix = ""
        if plan.prefix_tokens:
            prefix, _ = await self._prefix(plan.class_index, klass, plan.prefix_group)
        history: list[tuple[str, str]] = []  # (role, text)
        turns = []
        for k, turn in enumerate(plan.turns):
            head = [t for _, t in history] if history else ([prefix] if prefix else [])
            text, total = await self._fit(rng, plan.prompt_tokens(k), head)
            messages = ([("system", prefix)] if prefix and not history else []) + history + [("user", text)]
            turns.append(Turn(self._fields(messages), total if self.counter.exact else None, turn.output_tokens))
            if not history and prefix:
                history.append(("system", prefix))
            history.append(("user", text))
            if k + 1 < len(plan.turns):  # the answer the next turn's history holds (none after the last turn)
                history.append(("assistant", " ".join(self._words(rng, turn.output_tokens))))
        return Conversation(index, plan.cls, tuple(turns))

    def _fields(self, messages: list[tuple[str, str]]) -> dict:
        if self.endpoint == "chat":
            return {"messages": [{"role": r, "content": t} for r, t in messages]}
        return {"prompt": " ".join(t for _, t in messages)}

    async def _prefix(self, ci: int, klass: RequestClass, group: int) -> tuple[str, int]:
        key = (ci, group)
        if key not in self._prefixes:
            rng = np.random.default_rng([self.workload.words_seed, 1_000_003, ci, group])
            self._prefixes[key] = await self._fit(rng, klass.shared_prefix_tokens, [])
        return self._prefixes[key]

    async def _count(self, parts: list[str]) -> int:
        """Tokens of the input: the whole prompt for completions, the sum over messages for chat."""
        if self.endpoint == "chat":
            return sum(await self.counter.count(parts))
        return (await self.counter.count([" ".join(parts)]))[0]

    async def _fit(self, rng: np.random.Generator, target: int, head: list[str]) -> tuple[str, int]:
        """New words such that head + words has exactly `target` tokens, or the closest count above it.

        The pool's words are one token each for a local tokenizer, so the first count is usually exact;
        otherwise a binary search over the number of words finds the shortest prompt reaching the target.
        """
        base = await self._count(head) if head else 0
        want = max(1, target - base)
        words = self._words(rng, 2 * want + 8)

        async def tokens(k: int) -> int:
            return await self._count([*head, " ".join(words[:k])])

        total = await tokens(want)
        if total == target or not self.counter.exact:
            return " ".join(words[:want]), total
        lo, hi = 1, len(words)
        while lo < hi:
            mid = (lo + hi) // 2
            if await tokens(mid) >= target:
                hi = mid
            else:
                lo = mid + 1
        return " ".join(words[:lo]), await tokens(lo)

    def _words(self, rng: np.random.Generator, n: int) -> list[str]:
        """`n` words drawn from the pool: the words `rng.choice(pool, n)` draws (the same integers), picked from a
        Python list, which is faster than numpy strings and joins several times faster."""
        pool = self.pool
        return [pool[i] for i in rng.integers(0, len(pool), n).tolist()]

    async def _from_file(self, index: int) -> Conversation:
        if self._file is None:
            self._file = await load_items(self.workload, self.counter)
        fields, n_out = self._file[index % len(self._file)]
        parts = [m["content"] for m in fields["messages"]] if "messages" in fields else [fields["prompt"]]
        expected = await self._count(parts) if self.counter.exact else None
        return Conversation(index, "file", (Turn(endpoint_fields(fields, self.endpoint), expected, n_out),))


def endpoint_fields(fields: dict, endpoint: Endpoint) -> dict:
    """A text request's input as the endpoint takes it: a prompt becomes one user message for chat, messages
    become their joined contents for completions."""
    if endpoint == "chat" and "prompt" in fields:
        return {"messages": [{"role": "user", "content": fields["prompt"]}]}
    if endpoint == "completions" and "messages" in fields:
        return {"prompt": " ".join(m["content"] for m in fields["messages"])}
    return fields


async def load_items(workload: Workload, counter: TokenCounter) -> list[tuple[dict, int | None]]:
    """The distinct requests of a text workload, in order: (input fields, output tokens or None); conversation
    `i` is item `i` modulo their number. `counter` measures a ShareGPT answer when no output length is given."""
    src = workload.source
    if src is None:
        raise ServetuneError("a synthetic workload has no text requests", "give a file or prompt texts")
    if isinstance(src, PromptSource):
        return [({"prompt": text}, src.output_tokens) for text in src.prompts]
    path = Path(src.path)
    if not path.is_file():
        raise ServetuneError(f"workload file {path} not found", "pass an existing JSONL or ShareGPT JSON file")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise ServetuneError(
            f"workload file {path} cannot be read as text: {err}", "give a UTF-8 JSONL or JSON file"
        ) from None
    fmt = src.format
    if fmt == "auto":
        fmt = "sharegpt" if text.lstrip().startswith("[") else "jsonl"
    items: list[tuple[dict, int | None]] = []
    try:
        if fmt == "jsonl":
            for line in text.splitlines():
                if not line.strip():
                    continue
                row = json.loads(line)
                fields = {"messages": row["messages"]} if "messages" in row else {"prompt": row["prompt"]}
                n_out = row.get("max_tokens") or row.get("output_tokens")
                items.append((fields, src.output_tokens or n_out))
        else:
            for row in json.loads(text):
                conv = row.get("conversations") or row.get("conversation") or []
                human = [c["value"] for c in conv if c.get("from") in ("human", "user")]
                answer = [c["value"] for c in conv if c.get("from") in ("gpt", "assistant")]
                if not human:
                    continue
                n_out = src.output_tokens
                if n_out is None and answer:
                    n_out = max(1, (await counter.count([answer[0]]))[0])
                items.append(({"prompt": human[0]}, n_out))
    except (ValueError, KeyError, TypeError) as err:
        raise ServetuneError(
            f"workload file {path} is not valid {fmt}: {err}",
            'JSONL lines need "prompt" or "messages"; ShareGPT is a JSON list of {"conversations": [...]}',
        ) from err
    if not items:
        raise ServetuneError(f"workload file {path} holds no requests", "check the file's format")
    if src.shuffle:
        order = np.random.default_rng(workload.seed).permutation(len(items))
        items = [items[i] for i in order]
    return items
