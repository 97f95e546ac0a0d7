"""Speed estimates of a plan: the roofline at a few telling points, ideal and expected."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from servetune.hardware.catalog import GPUSpec
from servetune.plan import kvcache, roofline


class SpeedEstimate(BaseModel):
    """A roofline figure: the ideal ceiling and the expected value with the efficiency factors."""

    model_config = ConfigDict(frozen=True)

    name: str
    batch: int
    context: int
    ideal: float
    expected: float
    unit: str


def speed_estimates(
    costs: roofline.ModelCosts,
    gpu: GPUSpec,
    lay: kvcache.KVLayout,
    num_blocks: int,
    mns: int,
    mnbt: int,
    max_len: int,
    spec_tokens: int,
    eff: roofline.Efficiency,
    acceptance: float,
) -> list[SpeedEstimate]:
    """Decode at 1 stream (short and max context), a full batch at 2K context, and prefill (TTFT) times."""
    accepted = roofline.accepted_tokens(spec_tokens, acceptance) if spec_tokens else 0.0
    out = []
    short = min(1024, max_len)
    per_2k = lay.blocks_for(min(2048, max_len))
    batch = max(1, min(mns, num_blocks // per_2k if per_2k else 1))
    mtp = f", MTP {spec_tokens} at {acceptance:.0%} acceptance" if spec_tokens else ""
    for name, b, ctx in (
        (f"decode, 1 stream, {short:,} context{mtp}", 1, short),
        (f"decode, 1 stream, {max_len:,} context{mtp}", 1, max_len),
        (
            f"decode, {batch} stream{'s' if batch > 1 else ''} x {min(2048, max_len):,} context (aggregate){mtp}",
            batch,
            min(2048, max_len),
        ),
    ):
        vals = [
            b
            * (1 + accepted)
            / roofline.decode_step_time(
                costs, gpu, batch=b, context=ctx, spec_tokens=spec_tokens, eff=eff, ideal=ideal
            ).seconds
            for ideal in (True, False)
        ]
        out.append(SpeedEstimate(name=name, batch=b, context=ctx, ideal=vals[0], expected=vals[1], unit="tok/s"))
    for tokens in sorted({min(2048, max_len), max_len}):
        vals = [
            roofline.prefill_time(costs, gpu, tokens=tokens, chunk=mnbt, eff=eff, ideal=ideal)
            for ideal in (True, False)
        ]
        out.append(
            SpeedEstimate(
                name=f"prefill {tokens:,} tokens (TTFT, idle server)",
                batch=1,
                context=tokens,
                ideal=vals[0],
                expected=vals[1],
                unit="s",
            )
        )
    return out
