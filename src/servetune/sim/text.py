"""Token counts for the simulated server: the model directory's tokenizer when it has one.

The simulator needs token ids only to count them and to hash prompt blocks for prefix caching, so a
prompt given as ids is used as is; text goes through `tokenizer.json` (the `tokenizers` library) when
the model directory has one, else through a deterministic word-and-punctuation split (about one id per
word) so that equal text still gives equal ids. Output text is one short word per generated token.
"""

from __future__ import annotations

import re
import zlib
from functools import cached_property
from pathlib import Path

_WORDS = ("the", "a", "of", "to", "and", "in", "model", "token", "server", "cache", "block", "step", "batch")
_SPLIT = re.compile(r"\w+|[^\w\s]")


class SimTokenizer:
    """Text → ids for counting and hashing; ids → filler text for streaming."""

    def __init__(self, model_dir: str | Path | None) -> None:
        self.model_dir = Path(model_dir) if model_dir else None

    @cached_property
    def _hf(self):
        if not self.model_dir:
            return None
        path = (self.model_dir if self.model_dir.is_dir() else self.model_dir.parent) / "tokenizer.json"
        if not path.exists():
            return None
        try:
            from tokenizers import Tokenizer
        except ImportError:
            return None
        return Tokenizer.from_file(str(path))

    def encode(self, text: str) -> list[int]:
        if self._hf is not None:
            return self._hf.encode(text, add_special_tokens=False).ids
        return [zlib.crc32(w.encode()) & 0xFFFFF for w in _SPLIT.findall(text)]

    def encode_chat(self, messages: list[dict]) -> list[int]:
        """A ChatML-like rendering (role markers cost tokens, as a real chat template's do)."""
        parts = []
        for msg in messages:
            content = msg.get("content") or ""
            if isinstance(content, list):
                content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
            parts.append(f"<|im_start|>{msg.get('role', 'user')}\n{content}<|im_end|>\n")
        parts.append("<|im_start|>assistant\n")
        return self.encode("".join(parts))

    @staticmethod
    def piece(position: int) -> str:
        """Text of the generated token at `position` (filler words; the simulator has no weights)."""
        return " " + _WORDS[position % len(_WORDS)]
