"""Token counting for workloads: a local `tokenizer.json`, the server's `/tokenize`, or words (approximate).

Counting decides two things: prompts are built to an exact input token count, and output text is counted
when the server sends no `usage`. The `tokenizers` package is imported only when a local tokenizer is used,
so the load path runs with aiohttp + pydantic + numpy alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from servetune.control.client import ControlClient, ControlError, ControlTimeoutError, ControlTimeouts
from servetune.errors import ServetuneError
from servetune.model.hub import tokenizer_file

# Common English words; each is one token with a leading space in the usual BPE vocabularies.
_COMMON = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "for",
    "that",
    "with",
    "as",
    "on",
    "by",
    "at",
    "from",
    "his",
    "her",
    "they",
    "this",
    "are",
    "have",
    "had",
    "which",
    "one",
    "not",
    "but",
    "all",
    "were",
    "when",
    "there",
    "can",
    "more",
    "her",
    "out",
    "also",
    "time",
    "about",
    "into",
    "only",
    "other",
    "new",
    "some",
    "could",
    "these",
    "two",
    "may",
    "first",
    "then",
    "any",
    "like",
    "now",
    "over",
    "such",
    "our",
    "man",
    "most",
    "even",
    "made",
    "after",
    "many",
    "where",
    "well",
    "back",
    "through",
    "year",
    "much",
    "before",
    "good",
    "great",
    "same",
    "own",
    "still",
    "long",
    "very",
    "world",
    "state",
    "part",
    "place",
    "case",
    "work",
    "point",
    "group",
    "number",
    "water",
    "light",
    "house",
    "power",
    "money",
    "story",
    "night",
    "light",
    "order",
    "world",
    "music",
    "city",
    "river",
    "table",
    "paper",
    "garden",
    "market",
    "window",
    "friend",
    "letter",
    "animal",
    "summer",
    "winter",
    "forest",
    "mountain",
    "island",
    "village",
    "station",
]


class TokenCounter(Protocol):
    """Counts tokens of texts; `exact` says whether the counts are the server's own."""

    exact: bool
    name: str

    async def count(self, texts: Sequence[str]) -> list[int]: ...

    def words(self) -> list[str]: ...

    async def aclose(self) -> None: ...


class WordCounter:
    """No tokenizer available: one token per word. Approximate; the validity report says so."""

    exact = False
    name = "words (approximate)"

    async def count(self, texts: Sequence[str]) -> list[int]:
        return [len(t.split()) for t in texts]

    def words(self) -> list[str]:
        return list(dict.fromkeys(_COMMON))

    async def aclose(self) -> None:
        return None


class LocalTokenizer:
    """A Hugging Face `tokenizer.json` through the `tokenizers` package (no transformers, no torch)."""

    exact = True

    def __init__(self, path: str) -> None:
        file = tokenizer_file(path)  # a file, a model folder, a bundled name or a Hugging Face id in the cache
        try:
            from tokenizers import Tokenizer
        except ImportError as err:
            raise ServetuneError(
                "a local tokenizer needs the `tokenizers` package", "pip install tokenizers, or use tokenizer='server'"
            ) from err
        self.name = str(file)
        try:
            self._tok = Tokenizer.from_file(str(file))
        except Exception as err:  # noqa: BLE001 - the tokenizers package raises a bare Exception for a bad file
            raise ServetuneError(
                f"{file} is not a tokenizer.json the tokenizers package reads ({err})",
                "give a Hugging Face tokenizer.json, a model folder holding one, or --tokenizer server",
            ) from None

    async def count(self, texts: Sequence[str]) -> list[int]:
        return [len(e.ids) for e in self._tok.encode_batch(list(texts), add_special_tokens=False)]

    def count_one(self, text: str) -> int:
        """Synchronous count of one text (output text at the end of a request: no I/O, no await)."""
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def words(self) -> list[str]:
        """Vocabulary words that are one token with a leading space, in vocabulary order (deterministic)."""
        found: list[str] = []
        vocab: dict[str, int] = self._tok.get_vocab()
        for word in sorted(vocab, key=vocab.__getitem__):
            if len(found) >= 2000:
                break
            text = word.replace("Ġ", " ").replace("▁", " ")
            plain = text[1:]
            if (
                text.startswith(" ")
                and plain.isascii()
                and plain.isalpha()
                and plain.islower()
                and 3 <= len(text) <= 9
                and len(self._tok.encode(text, add_special_tokens=False).ids) == 1
            ):
                found.append(plain)
        if len(found) < 50:
            return WordCounter().words()
        return found

    async def aclose(self) -> None:
        return None


class ServerTokenizer:
    """The server's own `/tokenize` (vLLM, SGLang, llama.cpp, sim-serve, the mock): exact for that server.

    Counting goes through the control-plane client, which speaks vLLM's and llama.cpp's dialects and bounds each
    call by the command's timeouts.
    """

    exact = True

    def __init__(
        self, base_url: str, model: str, timeouts: ControlTimeouts | None = None, api_key: str | None = None
    ) -> None:
        self._client = ControlClient(base_url, api_key=api_key, timeouts=timeouts)
        self.model = model
        self.name = f"{self._client.base_url}/tokenize"
        self._pool = frozenset(WordCounter().words())
        self._additive = False  # verified: the server counts one token per pool word (see calibrate)

    async def calibrate(self) -> None:
        """Asks the server once whether every pool word is one token in any order; if so, prompts made of
        pool words are counted locally (exact for this server) instead of one /tokenize call each."""
        words = sorted(self._pool)
        sample = " ".join(words + words[::-1])
        self._additive = (await self._client.tokenize(sample, self.model)) == 2 * len(words)

    async def count(self, texts: Sequence[str]) -> list[int]:
        out = []
        for text in texts:
            words = text.split()
            if self._additive and self._pool.issuperset(words):
                out.append(len(words))
            else:
                out.append(await self._client.tokenize(text, self.model))
        return out

    async def aclose(self) -> None:
        await self._client.aclose()

    def words(self) -> list[str]:
        return WordCounter().words()


async def make_counter(
    tokenizer: str | None,
    base_url: str,
    model: str,
    timeouts: ControlTimeouts | None = None,
    api_key: str | None = None,
) -> TokenCounter:
    """`tokenizer`: a tokenizer.json path, a model folder or a Hugging Face id in the local cache (`model.hub`),
    "server", "words", or None (the server's if it has one). `api_key`: the key the server demands, which its
    `/tokenize` asks for too (llama.cpp's does: without it every count fell back to words, off by 2x)."""
    if tokenizer == "words":
        return WordCounter()
    if tokenizer not in (None, "server"):
        return LocalTokenizer(tokenizer)
    server = ServerTokenizer(base_url, model, timeouts, api_key)
    try:
        await server.calibrate()
    except ControlError as err:
        await server.aclose()
        if tokenizer == "server" or isinstance(err, ControlTimeoutError):
            raise type(err)(f"the server's /tokenize does not work: {err.problem}", err.fix) from None
        return WordCounter()
    return server
