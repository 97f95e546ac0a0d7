"""Service-level objectives per request, with vLLM's `--goodput` semantics.

A completed request is good when it meets every SLO that is set: ttft ≤ ttft_ms, tpot ≤ tpot_ms,
e2el ≤ e2el_ms (and, beyond vLLM, the largest inter-chunk gap ≤ max_itl_ms). A request with one output token
has no TPOT and passes the TPOT SLO, as in vLLM.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from servetune.errors import ServetuneError
from servetune.load.record import RequestRecord


class Slos(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    ttft_ms: float | None = Field(None, gt=0)
    tpot_ms: float | None = Field(None, gt=0)
    e2el_ms: float | None = Field(None, gt=0)
    max_itl_ms: float | None = Field(None, gt=0)

    def met_by(self, r: RequestRecord) -> bool:
        if not r.ok:
            return False
        if self.e2el_ms is not None and (r.done_ns - r.sent_ns) / 1e6 > self.e2el_ms:
            return False
        if not r.chunk_ns:
            return self.ttft_ms is None and self.tpot_ms is None and self.max_itl_ms is None
        if self.ttft_ms is not None and (r.chunk_ns[0] - r.sent_ns) / 1e6 > self.ttft_ms:
            return False
        if self.tpot_ms is not None and r.output_tokens > 1:
            if (r.done_ns - r.chunk_ns[0]) / 1e6 / (r.output_tokens - 1) > self.tpot_ms:
                return False
        if self.max_itl_ms is not None and len(r.chunk_ns) > 1:
            if max(b - a for a, b in zip(r.chunk_ns, r.chunk_ns[1:])) / 1e6 > self.max_itl_ms:
                return False
        return True

    @classmethod
    def parse(cls, text: str) -> Slos:
        """vLLM's `--goodput` syntax: `ttft:500 tpot:50 e2el:10000` (milliseconds; spaces or commas)."""
        values: dict[str, float] = {}
        for item in text.replace(",", " ").split():
            name, _, value = item.partition(":")
            key = {"ttft": "ttft_ms", "tpot": "tpot_ms", "e2el": "e2el_ms", "itl": "max_itl_ms"}.get(name)
            try:
                if key is None:
                    raise ValueError(name)
                values[key] = float(value)
            except ValueError:
                raise ServetuneError(
                    f"bad SLO {item!r}",
                    "write SLOs as name:milliseconds with names ttft, tpot, e2el, itl (e.g. ttft:500 tpot:50)",
                ) from None
        return cls(**values)
