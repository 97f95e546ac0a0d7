"""The reconciliation rules on each engine's own counter text (vLLM, llama.cpp, SGLang); the real engines'
counters are read in tests/suite/test_cold_prompts.py."""

from __future__ import annotations

from servetune.metrics.prometheus import parse
from servetune.metrics.reconcile import ClientAccount, engine_account, reconcile, timings_account
from servetune.metrics.record import EngineTimings, ErrorClass, RequestRecord


def _vllm(prompt: int, hits: int, generated: int, finished: int) -> str:
    labels = 'engine="0",model_name="m"'
    return (
        f"# TYPE vllm:prompt_tokens counter\nvllm:prompt_tokens_total{{{labels}}} {prompt}\n"
        f"# TYPE vllm:prefix_cache_hits counter\nvllm:prefix_cache_hits_total{{{labels}}} {hits}\n"
        f"# TYPE vllm:generation_tokens counter\nvllm:generation_tokens_total{{{labels}}} {generated}\n"
        "# TYPE vllm:request_success counter\n"
        f'vllm:request_success_total{{{labels},finished_reason="length"}} {finished}\n'
        f"# TYPE vllm:num_preemptions counter\nvllm:num_preemptions_total{{{labels}}} 0\n"
    )


def _llamacpp(evaluated: int, cached: int, predicted: int) -> str:
    return (
        f"# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total {evaluated}\n"
        f"# TYPE llamacpp:prompt_tokens_cached_total counter\nllamacpp:prompt_tokens_cached_total {cached}\n"
        f"# TYPE llamacpp:tokens_predicted_total counter\nllamacpp:tokens_predicted_total {predicted}\n"
    )


def _records(*prompts: int, output: int = 16, failed: int = 0) -> list[RequestRecord]:
    records = [
        RequestRecord(index=i, sent_ns=i, prompt_tokens=p, output_tokens=output, usage_output_tokens=output)
        for i, p in enumerate(prompts)
    ]
    records += [
        RequestRecord(index=len(prompts) + i, sent_ns=10**9 + i, error_class=ErrorClass.HTTP_5XX) for i in range(failed)
    ]
    return records


def test_a_cold_prefill_agrees_and_a_warm_one_is_flagged_with_both_numbers_on_llama_cpp() -> None:
    before = parse(_llamacpp(100, 0, 10))
    client = ClientAccount.of(_records(1551))
    cold = reconcile(client, engine_account(before, parse(_llamacpp(1651, 0, 26))), "cold")
    assert not cold.flagged and cold.evaluated_tokens == 1551
    checked = {c.name for c in cold.checks}
    assert checked == {"prompt_tokens", "output_tokens", "cached_tokens"}, "llama.cpp keeps no request counter"
    # the demo's long_prefill: 512 of 1,551 tokens evaluated, the rest found in the slot's cache
    warm = reconcile(client, engine_account(before, parse(_llamacpp(612, 1039, 26))), "cold")
    (flag,) = warm.flagged
    assert (flag.name, flag.engine, flag.servetune) == ("cached_tokens", 1039, 32)
    assert "1,039 of 1,551" in flag.message and "evaluated 512" in flag.message
    assert warm.evaluated_tokens == 512


def test_vllm_totals_requests_and_the_prefix_cache_are_each_checked() -> None:
    before = parse(_vllm(1000, 256, 100, 3))
    client = ClientAccount.of(_records(600, 600))
    fine = reconcile(client, engine_account(before, parse(_vllm(2200, 256, 132, 5))), "cold")
    assert not fine.flagged and len(fine.checks) == 4 and fine.evaluated_tokens == 1200
    # someone else's request ran on the server during the probe: more tokens and one more request
    busy = reconcile(client, engine_account(before, parse(_vllm(2900, 256, 164, 6))), "cold")
    assert sorted(c.name for c in busy.flagged) == ["output_tokens", "prompt_tokens", "requests"]
    assert any("servetune counted 1,200, the engine 1,900" in c.message for c in busy.flagged)
    assert not reconcile(client, engine_account(before, parse(_vllm(2201, 256, 133, 5))), "cold").flagged, (
        "one token per request of slack"
    )


def test_a_probe_that_shares_a_prefix_may_hit_its_later_prompts_only() -> None:
    before = parse(_vllm(0, 0, 0, 0))
    client = ClientAccount.of(_records(1056, 1056))  # a 1,024-token system prompt, two 32-token questions
    reused = reconcile(client, engine_account(before, parse(_vllm(2112, 1024, 32, 2))), "shared")
    assert not reused.flagged, "the second request reused the first's prefix: what the probe is for"
    assert reconcile(client, engine_account(before, parse(_vllm(2112, 1024, 32, 2))), "cold").flagged
    warm_first = reconcile(client, engine_account(before, parse(_vllm(2112, 2048, 32, 2))), "shared")
    assert [c.name for c in warm_first.flagged] == ["cached_tokens"] and "first request" in warm_first.flagged[
        0
    ].message
    given = reconcile(client, engine_account(before, parse(_vllm(2112, 2048, 32, 2))), "given")
    assert not given.flagged and "cached_tokens" not in {c.name for c in given.checks}


def test_failed_requests_skip_the_totals_but_not_the_cache() -> None:
    before = parse(_vllm(0, 0, 0, 0))
    client = ClientAccount.of(_records(600, failed=1))
    checked = reconcile(client, engine_account(before, parse(_vllm(1200, 512, 20, 1))), "cold")
    assert [c.name for c in checked.flagged] == ["cached_tokens"] and checked.flagged[0].servetune == 64
    assert any("1 of 2 requests failed" in n for n in checked.notes)


def test_sglang_counts_cached_tokens_from_its_first_hit_on() -> None:
    labels = 'model_name="m"'

    def text(prompt: int, cached: int | None) -> str:
        lines = (
            f"# TYPE sglang:prompt_tokens counter\nsglang:prompt_tokens_total{{{labels}}} {prompt}\n"
            f"# TYPE sglang:generation_tokens counter\nsglang:generation_tokens_total{{{labels}}} 16\n"
            f"# TYPE sglang:num_requests counter\nsglang:num_requests_total{{{labels}}} 1\n"
        )
        if cached is not None:
            lines += f"# TYPE sglang:cached_tokens counter\nsglang:cached_tokens_total{{{labels}}} {cached}\n"
        return lines

    account = engine_account(parse(text(0, None)), parse(text(600, None)))
    assert account is not None and account.dialect == "sglang"
    assert (account.cached_tokens, account.evaluated_tokens) == (0, 600)
    account = engine_account(parse(text(0, None)), parse(text(600, 512)))
    assert account is not None and account.evaluated_tokens == 88


def test_no_counters_or_a_restarted_engine_are_said_not_reconciled() -> None:
    client = ClientAccount.of(_records(600))
    plain = reconcile(client, None, "cold")
    assert not plain.checks and "not reconciled" in plain.notes[0]
    assert engine_account(parse(_vllm(5000, 0, 0, 9)), parse(_vllm(600, 0, 16, 1))) is None, "counters went back"
    assert engine_account(parse(_vllm(0, 0, 0, 0)), parse(_llamacpp(600, 0, 16))) is None, "another engine"


def _timed(*prompts: tuple[int, int], output: int = 16) -> list[RequestRecord]:
    """Records as llama.cpp answers them: usage, and its own timings (evaluated, cached) per request."""
    return [
        RequestRecord(
            index=i,
            sent_ns=i,
            prompt_tokens=evaluated + cached,
            output_tokens=output,
            usage_output_tokens=output,
            engine_timings=EngineTimings(prompt_n=evaluated, cache_n=cached, predicted_n=output, prompt_ms=9.0),
        )
        for i, (evaluated, cached) in enumerate(prompts)
    ]


def test_llama_cpp_timings_are_the_engines_account_without_metrics() -> None:
    records = _timed((600, 0), (590, 10))
    account = timings_account(records)
    assert account is not None and account.source == "timings"
    assert (account.prompt_tokens, account.evaluated_tokens, account.cached_tokens, account.output_tokens) == (
        1200, 1190, 10, 32,
    )  # fmt: skip
    checked = reconcile(ClientAccount.of(records), account, "cold")
    assert not checked.flagged and checked.source == "timings" and checked.evaluated_tokens == 1190
    assert [c.name for c in checked.checks] == ["prompt_tokens", "output_tokens", "cached_tokens"]
    assert any("per-response timings" in n for n in checked.notes)


def test_a_warm_prompt_in_llama_cpp_timings_is_flagged_with_both_numbers() -> None:
    records = _timed((88, 512))
    checked = reconcile(ClientAccount.of(records), timings_account(records), "cold")
    (flag,) = checked.flagged
    assert (flag.name, flag.engine, flag.servetune) == ("cached_tokens", 512, 32)
    assert "served 512 of 600" in flag.message and "evaluated 88" in flag.message


def test_timings_count_only_when_every_answer_carries_them() -> None:
    records = [*_timed((600, 0)), *_records(600)]
    assert timings_account(records) is None
    assert timings_account(_records(600)) is None
    assert "not reconciled" in reconcile(ClientAccount.of(records), None, "cold").notes[0]
