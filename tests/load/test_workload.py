"""Workloads: exact input token counts, determinism by seed, traffic mixes, prefixes, turns, files."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from servetune.errors import ServetuneError
from servetune.load.prompts import RequestFactory
from servetune.load.tokens import LocalTokenizer, ServerTokenizer, WordCounter
from servetune.load.workload import Dist, RequestClass, Workload
from servetune.mock.config import MockConfig
from servetune.mock.server import running

QWEN = Path(__file__).resolve().parents[3] / "shared" / "models" / "qwen3-32b" / "tokenizer.json"
"""The locally trained tokenizer in the shared/ folder beside the repository (there in CI too)."""


def _tokenizers(tiny_model) -> list[str]:
    return [str(tiny_model.tokenizer_json)] + ([str(QWEN)] if QWEN.is_file() else [])


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
async def test_exact_input_tokens_with_a_local_tokenizer(tiny_model, endpoint: str) -> None:
    for path in _tokenizers(tiny_model):
        tok = LocalTokenizer(path)
        workload = Workload.mix(
            [
                RequestClass(name="a", input_tokens=Dist(kind="uniform", mean=300, std=100)),
                RequestClass(name="b", input_tokens=37),
            ]
        )
        factory = RequestFactory(workload, tok, endpoint)  # type: ignore[arg-type]
        for i in range(12):
            [turn] = (await factory.conversation(i)).turns
            text = turn.fields["prompt"] if endpoint == "completions" else turn.fields["messages"][-1]["content"]
            assert tok.count_one(text) == turn.prompt_tokens, (path, i)


async def test_exact_long_document(tiny_model) -> None:
    tok = LocalTokenizer(str(tiny_model.tokenizer_json))
    factory = RequestFactory(Workload.long_document(32_768), tok, "completions")
    [turn] = (await factory.conversation(0)).turns
    assert turn.prompt_tokens == 32_768 == tok.count_one(turn.fields["prompt"])


async def test_exact_input_tokens_with_the_server_tokenize() -> None:
    async with running(MockConfig()) as url:
        tok = ServerTokenizer(url, "mock")
        factory = RequestFactory(Workload.synthetic(Dist(kind="normal", mean=200, std=50)), tok, "completions")
        for i in range(5):
            [turn] = (await factory.conversation(i)).turns
            assert (await tok.count([turn.fields["prompt"]]))[0] == turn.prompt_tokens


async def test_same_seed_same_requests_other_seed_other_requests() -> None:
    async def first(seed: int) -> list:
        factory = RequestFactory(
            Workload.synthetic(64, Dist(kind="lognormal", mean=100, std=50), seed=seed), WordCounter(), "completions"
        )
        return [(await factory.conversation(i)).turns for i in range(5)]

    assert await first(1) == await first(1)
    assert await first(1) != await first(2)


async def test_traffic_mix_follows_weights() -> None:
    classes = [
        RequestClass(name="short", weight=0.65, input_tokens=8),
        RequestClass(name="medium", weight=0.25, input_tokens=16),
        RequestClass(name="long", weight=0.10, input_tokens=32),
    ]
    factory = RequestFactory(Workload.mix(classes), WordCounter(), "completions")
    seen = Counter([(await factory.conversation(i)).cls for i in range(2000)])
    assert abs(seen["short"] / 2000 - 0.65) < 0.04 and abs(seen["long"] / 2000 - 0.10) < 0.03


async def test_shared_prefix_groups() -> None:
    factory = RequestFactory(Workload.shared_prefix(100, 20, groups=2), WordCounter(), "chat")
    convs = [(await factory.conversation(i)).turns[0].fields["messages"] for i in range(4)]
    assert convs[0][0]["role"] == "system" and len(convs[0][0]["content"].split()) == 100
    assert convs[0][0] == convs[2][0] and convs[1][0] == convs[3][0] and convs[0][0] != convs[1][0]
    assert convs[0][1] != convs[2][1]


async def test_multi_turn_history_grows() -> None:
    factory = RequestFactory(
        Workload.mix([RequestClass(name="chat", input_tokens=10, output_tokens=5, turns=3)]), WordCounter(), "chat"
    )
    turns = (await factory.conversation(0)).turns
    assert [len(t.fields["messages"]) for t in turns] == [1, 3, 5]
    assert turns[2].fields["messages"][:3] == turns[1].fields["messages"]
    assert [t.prompt_tokens for t in turns] == [None, None, None]  # words are not exact counts


async def test_jsonl_and_sharegpt_files(tmp_path: Path) -> None:
    jsonl = tmp_path / "r.jsonl"
    jsonl.write_text(
        json.dumps({"prompt": "a b c", "max_tokens": 7})
        + "\n"
        + json.dumps({"messages": [{"role": "user", "content": "x y"}]})
        + "\n"
    )
    factory = RequestFactory(Workload.from_file(str(jsonl)), WordCounter(), "chat")
    first, second = [(await factory.conversation(i)).turns[0] for i in range(2)]
    assert first.fields == {"messages": [{"role": "user", "content": "a b c"}]} and first.max_tokens == 7
    assert second.fields["messages"][0]["content"] == "x y"
    share = tmp_path / "s.json"
    share.write_text(
        json.dumps(
            [
                {
                    "conversations": [
                        {"from": "human", "value": "hello there"},
                        {"from": "gpt", "value": "one two three four"},
                    ]
                }
            ]
        )
    )
    [turn] = (await RequestFactory(Workload.from_file(str(share)), WordCounter(), "completions").conversation(0)).turns
    assert turn.fields == {"prompt": "hello there"} and turn.max_tokens == 4


async def test_bad_inputs_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(ServetuneError):
        RequestClass(input_tokens=10, shared_prefix_tokens=20)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"nope": 1}\n')
    with pytest.raises(ServetuneError):
        await RequestFactory(Workload.from_file(str(bad)), WordCounter(), "completions").conversation(0)
    with pytest.raises(ServetuneError):
        LocalTokenizer(str(tmp_path / "missing.json"))


def test_prompt_words_are_the_words_rng_choice_draws() -> None:
    """The factory picks words by the integers `rng.choice(pool, n)` would draw: the prompts a seed gave before the
    Python-list speed-up are the prompts it gives now."""
    import numpy as np

    factory = RequestFactory(Workload.synthetic(64, 16), WordCounter(), "completions")
    pool = np.array(factory.pool)
    for seed in range(20):
        n = 1 + 13 * seed
        assert (
            factory._words(np.random.default_rng([seed, 2]), n)
            == np.random.default_rng([seed, 2]).choice(pool, size=n).tolist()
        )
