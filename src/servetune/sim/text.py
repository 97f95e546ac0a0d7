"""Token counts for the simulated server: the model directory's tokenizer when it has one.

The simulator needs token ids only to count them and to hash prompt blocks for prefix caching, so a
prompt given as ids is used as is; text goes through `tokenizer.json` (the `tokenizers` library) when
the model directory has one, else through a deterministic word-and-punctuation split (about one id per
word) so that equal text still gives equal ids. Output text is one short word per generated token.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from servetune.load.tokens import WordCounter

_WORDS = ("the", "a", "of", "to", "and", "in", "model", "token", "server", "cache", "block", "step", "batch")
_SPLIT = re.compile(r"\w+|[^\w\s]")
_OPEN = "<|im_start|>{role}\n"
_CLOSE = "<|im_end|>\n"


class SimTokenizer:
    """Text → ids for counting and hashing; ids → filler text for streaming."""

    def __init__(self, model_dir: str | Path | None) -> None:
        self.model_dir = Path(model_dir) if model_dir else None
        self._templates: dict[str, tuple[int, int]] = {}

    @cached_property
    def _hf(self) -> Any:
        """The `tokenizers.Tokenizer` of the model directory, or None."""
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

    @property
    def name(self) -> str:
        """What counts the tokens, for a run's `tokenizer` field."""
        if self._hf is not None and self.model_dir is not None:
            return f"simulator: {self.model_dir}/tokenizer.json"
        return "simulator: words and punctuation"

    def encode_chat(self, messages: list[dict]) -> list[int]:
        """A ChatML-like rendering (role markers cost tokens, as a real chat template's do)."""
        parts = []
        for msg in messages:
            content = msg.get("content") or ""
            if isinstance(content, list):
                content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
            parts.append(f"{_OPEN.format(role=msg.get('role', 'user'))}{content}{_CLOSE}")
        parts.append(_OPEN.format(role="assistant"))
        return self.encode("".join(parts))

    def template_tokens(self, role: str) -> tuple[int, int]:
        """Tokens `encode_chat` puts before and after a message of `role` (the generation prompt is the part
        before an `assistant` message), so a conversation described by lengths costs what its text would."""
        if role not in self._templates:
            self._templates[role] = (len(self.encode(_OPEN.format(role=role))), len(self.encode(_CLOSE)))
        return self._templates[role]

    @staticmethod
    def piece(position: int) -> str:
        """Text of the generated token at `position` (filler words; the simulator has no weights)."""
        return " " + _WORDS[position % len(_WORDS)]


class SimCounter:
    """The simulator's tokenizer as the load room's `TokenCounter`: what reads a text workload (a ShareGPT
    answer's length) counts exactly as `sim-serve`'s `/tokenize` would."""

    exact = True

    def __init__(self, tokenizer: SimTokenizer) -> None:
        self.tokenizer = tokenizer
        self.name = tokenizer.name

    async def count(self, texts: Sequence[str]) -> list[int]:
        return [len(self.tokenizer.encode(t)) for t in texts]

    def words(self) -> list[str]:
        return WordCounter().words()

    async def aclose(self) -> None:
        return None
