"""`run_check`: the seeds' acceptance test of a server, each step timed, pass/fail with the reason.

1. `/v1/models` lists the model (and says its max_model_len);
2. a short chat gets an answer;
3. optionally, one request with a prompt of a given length (up to max_model_len) completes.
"""

from __future__ import annotations

import json
import random
import time
import urllib.error
import urllib.request
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, computed_field

from servetune.engines.readiness import entry_max_model_len, model_entries

_WORDS = [
    "the",
    "cache",
    "holds",
    "keys",
    "and",
    "values",
    "for",
    "every",
    "token",
    "of",
    "every",
    "running",
    "request",
    "while",
    "the",
    "scheduler",
    "decides",
    "how",
    "many",
    "prompt",
    "tokens",
    "fit",
    "into",
    "each",
    "step",
    "of",
    "the",
    "engine",
    "and",
    "a",
    "long",
    "document",
    "arrives",
    "with",
    "tables",
    "numbers",
    "names",
    "places",
    "dates",
    "questions",
    "answers",
    "notes",
    "and",
    "footnotes",
]
LONG_CONTEXT_MAX_TOKENS = 8
"""Output tokens asked of the long-context request: enough to prove decoding after a long prefill."""


class CheckStep(BaseModel):
    """One step of the check."""

    model_config = ConfigDict(frozen=True)

    name: str
    ok: bool
    seconds: float
    detail: str


class CheckReport(BaseModel):
    """All steps; `ok` only when every step passed."""

    model_config = ConfigDict(frozen=True)

    base_url: str
    model: str
    max_model_len: int | None
    steps: list[CheckStep]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.steps) and bool(self.steps)


class _HTTPFailure(Exception):
    pass


def _request(base_url: str, path: str, body: dict | None, timeout_s: float, api_key: str | None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    req = urllib.request.Request(
        base_url.rstrip("/") + path, data=data, headers=headers, method="POST" if body is not None else "GET"
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as err:
        raise _HTTPFailure(f"HTTP {err.code}: {err.read()[:300].decode('utf-8', 'replace')}") from err
    except (urllib.error.URLError, OSError) as err:
        raise _HTTPFailure(f"{type(err).__name__}: {err}") from err
    except ValueError as err:
        raise _HTTPFailure(f"answer is not JSON: {err}") from err


def _timed(name: str, fn: Callable[[], tuple[bool, str]]) -> CheckStep:
    t0 = time.perf_counter()
    try:
        ok, detail = fn()
    except _HTTPFailure as err:
        ok, detail = False, str(err)
    return CheckStep(name=name, ok=ok, seconds=round(time.perf_counter() - t0, 4), detail=detail)


def count_tokens(base_url: str, model: str, text: str, api_key: str | None = None) -> int | None:
    """The server's own token count for `text` (vLLM and SGLang `/tokenize`, llama.cpp `/tokenize`)."""
    attempts = (
        ({"model": model, "prompt": text, "add_special_tokens": False}, "count"),
        ({"content": text, "add_special": False}, "tokens"),
    )
    for body, key in attempts:
        try:
            answer = _request(base_url, "/tokenize", body, 60.0, api_key)
        except _HTTPFailure:
            continue
        value = answer.get(key)
        if isinstance(value, int):
            return value
        if isinstance(value, list):
            return len(value)
    return None


def long_prompt(base_url: str, model: str, tokens: int, api_key: str | None = None, seed: int = 0) -> str:
    """Text of about `tokens` tokens by the server's tokenizer, never more (a few corrections of a word
    count; when the server cannot count, one token per word is assumed and `usage` tells the truth)."""
    rng = random.Random(seed)
    words = [rng.choice(_WORDS) for _ in range(max(1, tokens) * 2)]
    n = tokens
    for attempt in range(7):
        counted = count_tokens(base_url, model, " ".join(words[:n]), api_key)
        if not counted or tokens * 0.98 <= counted <= tokens:
            break
        if counted > tokens:  # every word is at least one token: dropping the excess words is always enough
            n = max(1, min(n - (counted - tokens), int(n * tokens / counted)))
        elif attempt < 6:
            n = min(len(words), max(n + 1, int(n * tokens / counted)))
    return " ".join(words[:n])


def run_check(
    base_url: str, model: str, *, long_context_tokens: int | None, api_key: str | None = None, timeout_s: float = 600.0
) -> CheckReport:
    """Runs the steps in order against a running server; later steps still run when one fails."""
    base_url = base_url.rstrip("/").removesuffix("/v1")
    found: dict = {}

    def models() -> tuple[bool, str]:
        payload = _request(base_url, "/v1/models", None, 30.0, api_key)
        entries = {str(e.get("id")): e for e in model_entries(payload)}
        if model not in entries:
            return False, f"{model!r} not served; the server lists {sorted(entries)}"
        found["max_model_len"] = entry_max_model_len(entries[model])
        mml = found["max_model_len"]
        return True, f"serves {model!r}, max_model_len={mml}" if mml else f"serves {model!r} (no max_model_len)"

    def short_chat() -> tuple[bool, str]:
        answer = _request(
            base_url,
            "/v1/chat/completions",
            {
                "model": model,
                "messages": [{"role": "user", "content": "Say hello in five words."}],
                "max_tokens": 16,
                "temperature": 0,
            },
            timeout_s,
            api_key,
        )
        choice = (answer.get("choices") or [{}])[0]
        msg = choice.get("message") or {}
        text = (msg.get("content") or "") + (msg.get("reasoning_content") or msg.get("reasoning") or "")
        n = (answer.get("usage") or {}).get("completion_tokens")
        if not text.strip():
            return False, f"empty answer (finish_reason={choice.get('finish_reason')}, tokens={n})"
        return True, f"{n} tokens: {text.strip()[:60]!r}"

    def long_context() -> tuple[bool, str]:
        assert long_context_tokens is not None
        mml = found.get("max_model_len")
        if mml and long_context_tokens + 1 > mml:
            return False, (
                f"{long_context_tokens} prompt tokens + 1 output token exceed max_model_len={mml}; "
                f"ask for at most {mml - 1}"
            )
        max_out = (
            LONG_CONTEXT_MAX_TOKENS if not mml else max(1, min(LONG_CONTEXT_MAX_TOKENS, mml - long_context_tokens))
        )
        prompt = long_prompt(base_url, model, long_context_tokens, api_key)
        answer = _request(
            base_url,
            "/v1/completions",
            {"model": model, "prompt": prompt, "max_tokens": max_out, "temperature": 0},
            timeout_s,
            api_key,
        )
        usage = answer.get("usage") or {}
        got, out = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if not answer.get("choices"):
            return False, f"no choices in the answer: {str(answer)[:200]}"
        if isinstance(got, int) and got < 0.9 * long_context_tokens:
            return False, f"only {got} prompt tokens reached the model (asked {long_context_tokens})"
        return True, f"{got} prompt tokens, {out} output tokens"

    steps = [_timed("models", models), _timed("short chat", short_chat)]
    if long_context_tokens:
        steps.append(_timed(f"long context ({long_context_tokens} tokens)", long_context))
    return CheckReport(base_url=base_url, model=model, max_model_len=found.get("max_model_len"), steps=steps)
