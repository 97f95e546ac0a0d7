"""Per-request records of a fidelity run → vLLM-named figures (stdlib only: runs on the device too).

Definitions as vLLM's `bench serve`: TTFT = first chunk − send; TPOT = (E2E − TTFT)/(n − 1);
ITL = gaps between streamed chunks, pooled over requests; E2EL = end − send; output throughput =
output tokens / (last end − first send) over the measured requests.
"""

from __future__ import annotations

import itertools


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return float("nan")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def is_measured(rec: dict) -> bool:
    """Not a warm-up (built-in client: `warmup`; servetune's RequestRecord: `phase`)."""
    return not rec.get("warmup") and rec.get("phase", "measure") == "measure"


def request_figures(rec: dict) -> dict | None:
    """TTFT, TPOT, E2EL (s) and ITL gaps of one successful record, or None."""
    chunks = rec["chunk_ns"]
    if rec.get("error") or rec.get("error_class") or not chunks:
        return None
    sent = rec["sent_ns"]
    ttft = (chunks[0] - sent) / 1e9
    e2e = ((rec.get("end_ns") or rec["done_ns"]) - sent) / 1e9
    n = rec["output_tokens"]
    tpot = (e2e - ttft) / (n - 1) if n > 1 else None
    itl = [(b - a) / 1e9 for a, b in itertools.pairwise(chunks)]
    return {"ttft": ttft, "tpot": tpot, "e2e": e2e, "itl": itl, "n": n}


def summarize(records: list[dict]) -> dict:
    """Figures over the measured (non-warm-up) records, in ms and tokens/s."""
    measured = [r for r in records if is_measured(r)]
    figs = [f for f in (request_figures(r) for r in measured) if f]
    out: dict = {"completed": len(figs), "failed": len(measured) - len(figs)}
    out["short_outputs"] = sum(
        1 for r in measured if r["output_tokens"] < (r.get("max_tokens") or r.get("output_tokens_requested") or 0)
    )
    for name in ("ttft", "tpot", "e2e"):
        vals = [f[name] * 1000 for f in figs if f[name] is not None]
        key = "e2el" if name == "e2e" else name
        out[f"{key}_ms_mean"] = sum(vals) / len(vals) if vals else float("nan")
        for q in (50, 90, 99):
            out[f"{key}_ms_p{q}"] = percentile(vals, q)
    itl = [g * 1000 for f in figs for g in f["itl"]]
    for q in (50, 90, 99):
        out[f"itl_ms_p{q}"] = percentile(itl, q)
    if figs:
        start = min(r["sent_ns"] for r in measured)
        end = max(r.get("end_ns") or r["done_ns"] for r in measured)
        dur = (end - start) / 1e9
        out["duration_s"] = dur
        out["output_throughput"] = sum(f["n"] for f in figs) / dur
        out["request_throughput"] = len(figs) / dur
    return out
