"""Is a server ready? `/health` answers 200 *and* `/v1/models` lists the served name.

Plain `http.client` with short timeouts: a probe costs about a millisecond on localhost, so launch can poll
every few tens of milliseconds and learn of readiness well under 100 ms after the engine gets there.
"""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Probe:
    """One readiness probe's result."""

    health_status: int | None
    models: tuple[str, ...] = ()
    max_model_len: int | None = None
    error: str | None = None
    raw_models: dict = field(default_factory=dict, compare=False, repr=False)

    def ready_for(self, model: str) -> bool:
        return self.health_status == 200 and model in self.models


def _get(base_url: str, path: str, timeout_s: float, api_key: str | None = None) -> tuple[int, bytes]:
    parts = urlsplit(base_url)
    conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = conn_cls(parts.hostname or "127.0.0.1", parts.port, timeout=timeout_s)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        conn.request("GET", parts.path.rstrip("/") + path, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def model_entries(payload: dict) -> list[dict]:
    """The model entries of a `/v1/models` answer (OpenAI `data`; llama.cpp also sends `models`)."""
    data = payload.get("data")
    return [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []


def entry_max_model_len(entry: dict) -> int | None:
    """vLLM says `max_model_len`; llama.cpp says `meta.n_ctx` (context per slot)."""
    for value in (entry.get("max_model_len"), (entry.get("meta") or {}).get("n_ctx")):
        if isinstance(value, int) and value > 0:
            return value
    return None


def probe(base_url: str, model: str | None = None, *, timeout_s: float = 2.0, api_key: str | None = None) -> Probe:
    """Probes `/health` then (if healthy) `/v1/models`; never raises for network errors."""
    try:
        status, _ = _get(base_url, "/health", timeout_s, api_key)
    except (OSError, http.client.HTTPException) as err:
        return Probe(health_status=None, error=f"{type(err).__name__}: {err}")
    if status != 200:
        return Probe(health_status=status)
    try:
        mstatus, body = _get(base_url, "/v1/models", timeout_s, api_key)
        payload = json.loads(body) if mstatus == 200 else {}
    except (OSError, http.client.HTTPException, ValueError) as err:
        return Probe(health_status=status, error=f"/v1/models: {type(err).__name__}: {err}")
    entries = model_entries(payload)
    names: list[str] = []
    for e in entries:
        names += [str(e.get("id"))] + [str(a) for a in e.get("aliases") or []]
    chosen = next((e for e in entries if e.get("id") == model), entries[0] if entries else {})
    return Probe(
        health_status=status,
        models=tuple(dict.fromkeys(names)),
        max_model_len=entry_max_model_len(chosen) if chosen else None,
        raw_models=payload,
    )
