"""A byte-level BPE tokenizer trained on the shipped corpus, plus the chat template the tiny model uses.

Byte-level BPE (GPT-2 style) is what llama.cpp's `gpt2` tokenizer type and HF's fast tokenizer both read, so
one trained tokenizer serves vLLM and llama-server alike.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

END_OF_TEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = (END_OF_TEXT, IM_START, IM_END)
"""Trained first, so their ids are 0, 1, 2."""

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
"""ChatML: llama.cpp recognises it by its `<|im_start|>` marker even without a Jinja engine."""


def corpus_text() -> str:
    """The local training text shipped with the package (no downloads)."""
    return resources.files("servetune.tiny").joinpath("corpus.txt").read_text(encoding="utf-8")


def train_tokenizer(text: str, vocab_size: int) -> Tokenizer:
    """Trains a byte-level BPE with the special tokens first; deterministic for a given text and size."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(text.splitlines(), trainer=trainer)
    return tok


@cache
def byte_decoder() -> dict[str, int]:
    """GPT-2's map from the printable stand-in characters back to raw bytes."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars = list(printable)
    n = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


def token_bytes(token: str) -> bytes | None:
    """The raw bytes a byte-level token stands for (None for a special token)."""
    table = byte_decoder()
    if token in SPECIAL_TOKENS or any(ch not in table for ch in token):
        return None
    return bytes(table[ch] for ch in token)


def unspeakable_ids(tok: Tokenizer) -> list[int]:
    """Token ids the tiny model must never sample.

    Lone bytes >= 0x80 are invalid UTF-8 on their own and make some llama-server builds fail the whole
    request; control bytes garble logs; special tokens would end or restructure a reply early, which would
    make output lengths unpredictable for benchmarks.
    """
    banned = []
    for token, idx in tok.get_vocab(with_added_tokens=True).items():
        raw = token_bytes(token)
        if raw is None:
            banned.append(idx)
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            banned.append(idx)
            continue
        if any(ord(ch) < 0x20 and ch not in "\n\t" for ch in text) or "\x7f" in text:
            banned.append(idx)
    return sorted(banned)


def merges(tok: Tokenizer) -> list[str]:
    """The BPE merges as `"a b"` strings (the form GGUF stores), whatever form tokenizers serialises."""
    import json

    raw = json.loads(tok.to_str())["model"]["merges"]
    return [m if isinstance(m, str) else f"{m[0]} {m[1]}" for m in raw]
