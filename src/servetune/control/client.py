"""The one control-plane client: `/health`, `/v1/models`, `/tokenize`, `/metrics`, `/version`.

The streaming hot path (`load.http1`) is hand-written for a measured reason; everything else a command asks of a
server goes through here, on aiohttp, with one timeout policy (`ControlTimeouts`, taken from the command's
options) so that a frozen server costs a user the seconds they allowed, never aiohttp's default five minutes.

`/tokenize` speaks both dialects: vLLM and SGLang take `{"model", "prompt", "add_special_tokens"}` and answer
`{"count", "tokens"}`; llama.cpp takes `{"content", "add_special"}` and answers `{"tokens"}` — and to vLLM's body
it answers HTTP 200 with `{"tokens": []}`, so an empty answer for a non-empty text is taken as "wrong dialect",
not as zero tokens (taken as zero, it makes prompts four times too long against llama.cpp).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

import aiohttp
from pydantic import BaseModel, ConfigDict, Field

from servetune.errors import ServetuneError

Dialect = Literal["vllm", "llamacpp"]


class ControlTimeouts(BaseModel):
    """How long a control-plane call may take: to connect, and in all (a frozen server fails within these)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    connect_s: float = Field(default=5.0, gt=0, allow_inf_nan=False)
    total_s: float = Field(default=30.0, gt=0, allow_inf_nan=False)

    def aiohttp(self) -> aiohttp.ClientTimeout:
        return aiohttp.ClientTimeout(total=self.total_s, connect=self.connect_s, sock_connect=self.connect_s)


class ControlError(ServetuneError):
    """A control-plane call failed: the server is unreachable, too slow, or answered something unusable (the
    run failed on its environment: exit code 1)."""

    exit_code = 1


class ControlTimeoutError(ControlError):
    """A control-plane call got no answer in time: the server is frozen or overloaded (not merely lacking the
    route), so a caller must not fall back to something else and carry on."""


@dataclass(frozen=True)
class ModelEntry:
    """One entry of `/v1/models`: the id clients send, its aliases, and the context it serves."""

    id: str
    aliases: tuple[str, ...] = ()
    max_model_len: int | None = None
    owned_by: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return (self.id, *self.aliases)


@dataclass(frozen=True)
class Models:
    """A `/v1/models` answer."""

    entries: tuple[ModelEntry, ...]
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(n for e in self.entries for n in e.names))

    def find(self, model: str) -> ModelEntry | None:
        return next((e for e in self.entries if model in e.names), None)


def normalize_base_url(url: str) -> str:
    """`http://host:port` from what a user pastes (`…/v1`, a trailing slash); an error for what is not a URL."""
    text = str(url).strip().rstrip("/")
    text = text.removesuffix("/v1").rstrip("/")
    try:
        parts = urlsplit(text)
    except ValueError as err:  # e.g. an unclosed IPv6 bracket: "http://[::1"
        raise ServetuneError(
            f"{url!r} is not a URL ({err})", "give http://HOST:PORT, e.g. http://127.0.0.1:8000"
        ) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ServetuneError(
            f"{url!r} is not an http(s) URL of a server", "give the server's base URL, e.g. http://127.0.0.1:8000"
        )
    try:
        port = parts.port
    except ValueError:
        raise ServetuneError(f"{url!r} has an invalid port", "ports run from 1 to 65535, e.g. :8000") from None
    if port is not None and not 0 < port < 65536:
        raise ServetuneError(f"{url!r} has an invalid port", "ports run from 1 to 65535, e.g. :8000")
    return text


def _max_model_len(entry: dict[str, Any]) -> int | None:
    """vLLM says `max_model_len`; llama.cpp says `meta.n_ctx` (context per slot)."""
    meta = entry.get("meta")
    for value in (entry.get("max_model_len"), meta.get("n_ctx") if isinstance(meta, dict) else None):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def parse_models(payload: Any) -> Models:
    """The entries of a `/v1/models` answer (OpenAI's `data`; llama.cpp also sends `models`)."""
    data = payload.get("data") if isinstance(payload, dict) else None
    entries = []
    for e in data if isinstance(data, list) else []:
        if not isinstance(e, dict) or e.get("id") is None:
            continue
        listed = e.get("aliases")
        aliases = listed if isinstance(listed, list) else []
        owner = e.get("owned_by")
        entries.append(
            ModelEntry(
                id=str(e["id"]),
                aliases=tuple(str(a) for a in aliases),
                max_model_len=_max_model_len(e),
                owned_by=str(owner) if owner is not None else None,
            )
        )
    return Models(tuple(entries), payload if isinstance(payload, dict) else {})


class ControlClient:
    """Control-plane calls against one server. Use as `async with ControlClient(url) as c:` (one keep-alive
    session for many calls), or call a method without entering (a session per call)."""

    def __init__(self, base_url: str, *, api_key: str | None = None, timeouts: ControlTimeouts | None = None) -> None:
        self.base_url = normalize_base_url(base_url)
        self.timeouts = timeouts or ControlTimeouts()
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._session: aiohttp.ClientSession | None = None
        self._dialect: Dialect | None = None

    async def __aenter__(self) -> ControlClient:
        self._session = aiohttp.ClientSession(timeout=self.timeouts.aiohttp())
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, bytes]:
        url = self.base_url + path
        own = self._session is None
        session = self._session or aiohttp.ClientSession(timeout=self.timeouts.aiohttp())
        try:
            async with session.request(method, url, json=body, headers=self._headers) as resp:
                return resp.status, await resp.read()
        except TimeoutError:
            raise ControlTimeoutError(
                f"{url} did not answer within {self.timeouts.total_s:g} s",
                "check that the server is not frozen or overloaded (servetune waits as long as a request may wait "
                "for its first token: --first-token-timeout, or a probe's request_timeout_s)",
            ) from None
        except (aiohttp.ClientError, OSError) as err:
            raise ControlError(f"cannot reach {url}: {err}", "check the URL and that the server is running") from None
        finally:
            if own:
                await session.close()

    async def _json(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        status, data = await self._call(method, path, body)
        if status != 200:
            text = data[:300].decode("utf-8", "replace")
            raise ControlError(f"{self.base_url}{path} answered HTTP {status}: {text}", "see the server's log")
        try:
            return json.loads(data)
        except ValueError:
            raise ControlError(
                f"{self.base_url}{path} did not answer JSON", "is this an OpenAI-compatible server?"
            ) from None

    async def post_json(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        """A JSON POST and its status with the decoded answer (None when it is not JSON): for servetune's own
        control endpoints (`servetune serve --switch`)."""
        status, data = await self._call("POST", path, body)
        try:
            return status, json.loads(data)
        except ValueError:
            return status, None

    async def health(self) -> int:
        """The HTTP status of `/health` (200 = healthy); raises ControlError when nothing answers."""
        status, _ = await self._call("GET", "/health")
        return status

    async def models(self) -> Models:
        return parse_models(await self._json("GET", "/v1/models"))

    async def metrics_text(self) -> str:
        """The Prometheus text of `/metrics`."""
        status, data = await self._call("GET", "/metrics")
        if status != 200:
            raise ControlError(f"{self.base_url}/metrics answered HTTP {status}", "start the engine with metrics on")
        return data.decode("utf-8", "replace")

    async def version(self) -> str | None:
        """`/version` (vLLM, sim-serve); None when the server has none."""
        try:
            answer = await self._json("GET", "/version")
        except ControlError:
            return None
        value = answer.get("version") if isinstance(answer, dict) else None
        return str(value) if value is not None else None

    async def generate_one(self, model: str) -> None:
        """A one-token completion (`/v1/completions`, no stream): the liveness probe. Only generating a token
        proves an engine works — a frozen one may still accept connections and answer `/health`. Raises
        ControlError when no answer with a choice comes within the timeouts."""
        body = {"model": model, "prompt": "ping", "max_tokens": 1, "temperature": 0, "stream": False}
        answer = await self._json("POST", "/v1/completions", body)
        if not isinstance(answer, dict) or not answer.get("choices"):
            raise ControlError(f"{self.base_url}/v1/completions answered without choices", "see the engine's log")

    async def tokenize(self, text: str, model: str) -> int:
        """The server's own token count of `text` (no special tokens), in whichever dialect it speaks."""
        dialects: tuple[Dialect, ...] = (self._dialect,) if self._dialect else ("vllm", "llamacpp")
        problems = []
        for dialect in dialects:
            body: dict[str, Any] = (
                {"model": model, "prompt": text, "add_special_tokens": False}
                if dialect == "vllm"
                else {"content": text, "add_special": False}
            )
            try:
                answer = await self._json("POST", "/tokenize", body)
            except ControlTimeoutError:
                raise  # a frozen server: the other dialect would wait as long again
            except ControlError as err:
                problems.append(err.problem)
                continue
            count = _count(answer)
            if count is None or (count == 0 and text.strip()):
                problems.append(f"{dialect} dialect: answer without tokens ({str(answer)[:80]})")
                continue
            self._dialect = dialect
            return count
        raise ControlError(
            f"{self.base_url}/tokenize gives no token counts: " + "; ".join(problems),
            "pass a local tokenizer (--tokenizer PATH/tokenizer.json)",
        )


def _count(answer: Any) -> int | None:
    if not isinstance(answer, dict):
        return None
    count = answer.get("count")
    if isinstance(count, int) and not isinstance(count, bool):
        return count
    tokens = answer.get("tokens")
    return len(tokens) if isinstance(tokens, list) else None
