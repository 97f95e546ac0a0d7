"""Secrets are never written in clear: the one rule of what a secret is, and the redaction every writer applies.

A secret is the value of an environment variable whose name says so (`*KEY*`, `*TOKEN*` — not `*TOKENIZER*` —,
`*SECRET*`, `*PASSWORD*`, `*CREDENTIAL*`, or a name the user lists), of a flag whose last word says so (`api-key`,
`hf-token`, `ssl-keyfile-password`, `admin-api-key`; not `max-num-batched-tokens`), or of a client's `api_key`.
A secret flag may hold several values (vLLM's `--api-key` takes a list): each is a secret. Whatever servetune
writes — engine logs, the store, results.json, CSV, markdown, HTML, event logs, deployment files, printed
commands — passes through here, so a canary key given to any option appears in no file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "<redacted>"
_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")
_MIN_SECRET = 4
"""Shorter values are not replaced inside text: a 1-3 character "secret" would shred ordinary words."""


def _norm(name: str) -> str:
    return name.upper().replace("-", "_").lstrip("_")


def is_secret_name(name: str, extra: Iterable[str] = ()) -> bool:
    """Whether an environment variable or setting name holds a secret by convention (or the user listed it)."""
    upper = _norm(name)
    if upper in {_norm(e) for e in extra}:
        return True
    plain = upper.replace("TOKENIZER", "").replace("TOKENS", "")
    return any(word in plain for word in _WORDS)


def is_secret_flag(name: str, extra: Iterable[str] = ()) -> bool:
    """A flag whose value is a secret: its last word is key, token, secret or password (`api-key`, `hf-token`;
    not `max-num-batched-tokens`, `speculative-token-map` or the path flags `ssl-keyfile`, `api-key-file`), or
    the user listed it. A command-line word `--api-key=VALUE` is judged by its name."""
    flag = _norm(name.partition("=")[0])
    return flag.rsplit("_", 1)[-1] in _WORDS or flag in {_norm(e) for e in extra}


def redact_argv(words: Iterable[str], extra: Iterable[str] = ()) -> list[str]:
    """A command line with the values of its secret flags replaced by `<redacted>`: `--api-key=K`, and every word
    after `--api-key` up to the next option (vLLM's takes a list), as a process's own command line is shown."""
    names = tuple(extra)
    out: list[str] = []
    secret = False
    for word in words:
        if word.startswith("-") and len(word) > 1:
            name, eq, _ = word.partition("=")
            secret = is_secret_flag(name.lstrip("-"), names)
            out.append(f"{name}={REDACTED}" if secret and eq else word)
            secret = secret and not eq
        else:
            out.append(REDACTED if secret and word else word)
    return out


def redact(data: Any, extra: Iterable[str] = ()) -> Any:
    """JSON-like data with every value under a secret-named key replaced by `<redacted>` (each text of a list of
    them too; nested dicts and lists walked); the shape is kept, so a reader still sees that a key was set."""
    names = tuple(extra)
    if isinstance(data, Mapping):
        return {k: (_redacted(v) if _secret_key(str(k), v, names) else redact(v, names)) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [redact(v, names) for v in data]
    return data


def _redacted(value: Any) -> Any:
    return [REDACTED if isinstance(v, str) and v else v for v in value] if isinstance(value, list | tuple) else REDACTED


def secret_texts(value: Any) -> list[str]:
    """The secret texts a value under a secret-named key holds: itself, or each text of a list (numbers such as
    `first_token_s: 600` or `--bucket-time-to-first-token 0.1 0.5` never are secrets)."""
    items = value if isinstance(value, list | tuple) else [value]
    return [v for v in items if isinstance(v, str) and v and v != REDACTED]


def _secret_key(key: str, value: Any, extra: tuple[str, ...]) -> bool:
    """A secret is a text (or a list of texts) under a secret-named key."""
    return bool(secret_texts(value)) and (is_secret_name(key, extra) or is_secret_flag(key, extra))


def secret_values(data: Any, extra: Iterable[str] = ()) -> set[str]:
    """Every secret value found under secret-named keys of JSON-like data (to strip them out of free text)."""
    names = tuple(extra)
    found: set[str] = set()
    if isinstance(data, Mapping):
        for k, v in data.items():
            if _secret_key(str(k), v, names):
                found |= set(secret_texts(v))
            else:
                found |= secret_values(v, names)
    elif isinstance(data, list | tuple):
        for v in data:
            found |= secret_values(v, names)
    return found


class Redactor:
    """Replaces known secret values wherever they appear in text or data (longest first, so no partial leak),
    and secret-named keys by `<redacted>`: for free text such as log excerpts, where a key carries no name."""

    def __init__(self, values: Iterable[str] = (), extra: Iterable[str] = ()) -> None:
        self.extra = tuple(extra)
        self._values = {v for v in values if len(v) >= _MIN_SECRET}

    @classmethod
    def of(cls, *sources: Any, extra: Iterable[str] = ()) -> Redactor:
        """A redactor for the secrets of some configs / experiments / JSON data (pydantic models are dumped)."""
        values: set[str] = set()
        for source in sources:
            dumped = source.model_dump(mode="json") if hasattr(source, "model_dump") else source
            values |= secret_values(dumped, extra)
        return cls(values, extra)

    def add(self, *sources: Any) -> None:
        """Learns the secrets of more sources (a switch or a fallback brings new ones)."""
        self._values |= Redactor.of(*sources, extra=self.extra)._values

    def text(self, value: str) -> str:
        for secret in sorted(self._values, key=len, reverse=True):
            value = value.replace(secret, REDACTED)
        return value

    def data(self, value: Any) -> Any:
        """Data with secret-named keys redacted and known secret values replaced inside every string."""
        value = redact(value, self.extra)
        return self._strings(value)

    def _strings(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {k: self._strings(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._strings(v) for v in value]
        return value
