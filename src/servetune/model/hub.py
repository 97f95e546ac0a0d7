"""Model names → local files: the one owner of "which config.json and tokenizer.json does `--model X` mean".

A model is named the way vLLM and Hugging Face name it, and servetune finds it the way they do, without ever
downloading anything:

1. a path that exists: a model folder (config.json, tokenizer.json inside) or a file;
2. a config bundled with servetune (`qwen3.6-27b`, shapes only);
3. a Hugging Face model id (`Qwen/Qwen3-32B`) in the local Hugging Face cache, laid out as `huggingface_hub`
   writes it: `$HF_HUB_CACHE` (default `$HF_HOME/hub`, `$HF_HOME` defaulting to `$XDG_CACHE_HOME/huggingface`
   or `~/.cache/huggingface`; the legacy `HUGGINGFACE_HUB_CACHE` too), `models--Qwen--Qwen3-32B/refs/<revision>`
   naming the commit whose `snapshots/<commit>/` holds the files. The revision is `main` unless one is given
   (a branch, a tag or a commit hash), as with vLLM's `--revision`.

A name found nowhere is an error that says where servetune looked and how to fetch the files (`hf download`),
so planning `Qwen/Qwen3-32B` on a machine without network works as soon as its config is in the cache.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from servetune.errors import ServetuneError
from servetune.model.bundled import bundled_model, bundled_names

_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
"""`org/name` as the Hub spells repository ids (one slash, no path components such as `.` or `..`)."""

Source = Literal["path", "bundled", "hf-cache"]


@dataclass(frozen=True)
class LocalModel:
    """Where a model name points on this machine."""

    name: str
    """The name as a person reads it: the repo id, the bundled name, or the folder's name."""
    path: Path
    """A folder (a model directory or a cache snapshot) or, for a path given as a file, that file."""
    source: Source
    revision: str | None = None
    """The commit of a cache snapshot."""

    @property
    def folder(self) -> Path:
        return self.path if self.path.is_dir() else self.path.parent

    @property
    def config_file(self) -> Path:
        """The config.json (for a file path: the file itself)."""
        return self.path / "config.json" if self.path.is_dir() else self.path

    def file(self, name: str) -> Path | None:
        """A file of the model folder, or None when it is not there."""
        path = self.folder / name
        return path if path.is_file() else None

    @property
    def where(self) -> str:
        """Where it was found, for messages."""
        if self.source == "hf-cache":
            return f"{self.name} (Hugging Face cache, revision {self.revision}: {self.path})"
        return f"{self.name} ({self.path})" if self.source == "bundled" else str(self.path)


def hub_cache() -> Path:
    """The Hugging Face hub cache folder, by huggingface_hub's rules (environment read at each call)."""
    if cache := os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE"):
        return Path(os.path.expandvars(cache)).expanduser()
    return hf_home() / "hub"


def hf_home() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(os.path.expandvars(os.environ.get("HF_HOME") or os.path.join(xdg, "huggingface"))).expanduser()


def is_repo_id(name: str) -> bool:
    """Whether a name has the shape of a Hugging Face model id (`org/name`)."""
    return bool(_REPO_ID.match(name)) and not name.startswith((".", "~"))


def locate_model(name: str | Path, *, revision: str | None = None, need: str = "config.json") -> LocalModel:
    """The local files of a model name (see the module docstring); `need` is the file the caller reads, named in
    the error when the model is found but lacks it."""
    text = str(name)
    path = Path(text).expanduser()
    if path.exists():
        return LocalModel(name=path.name if path.is_dir() else path.parent.name, path=path, source="path")
    if (bundled := bundled_model(text)) is not None:
        return LocalModel(name=text.lower(), path=bundled, source="bundled")
    if is_repo_id(text):
        return _from_cache(text, revision or "main", need)
    raise ServetuneError(
        f"no {need} at {text}: it is not a folder or file, not a bundled config and not a Hugging Face id",
        "give a model folder, a config.json, a Hugging Face id such as Qwen/Qwen3-32B (read from the local cache), "
        "or a bundled name: " + ", ".join(bundled_names()),
    )


def _from_cache(repo_id: str, revision: str, need: str) -> LocalModel:
    cache = hub_cache()
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    fetch = _fetch_hint(repo_id, revision, need)
    if not repo.is_dir():
        raise ServetuneError(
            f"{repo_id} is not in the local Hugging Face cache ({cache}); servetune never downloads",
            fetch + "; or point HF_HOME / HF_HUB_CACHE at the cache that holds it, or give a model folder",
        )
    commit = revision
    ref = repo / "refs" / revision
    if ref.is_file():
        commit = ref.read_text().strip()
    snapshot = repo / "snapshots" / commit
    if not snapshot.is_dir():
        have = sorted(p.name for p in (repo / "refs").glob("*") if p.is_file()) if (repo / "refs").is_dir() else []
        snaps = sorted(p.name[:12] for p in (repo / "snapshots").glob("*")) if (repo / "snapshots").is_dir() else []
        known = ", ".join(have + snaps) or "none"
        raise ServetuneError(
            f"{repo_id} revision {revision!r} is not in the local Hugging Face cache ({repo}; cached: {known})",
            fetch + (" or give --revision with a cached one" if have or snaps else ""),
        )
    found = LocalModel(name=repo_id, path=snapshot, source="hf-cache", revision=commit)
    if need and found.file(need) is None:
        raise ServetuneError(f"the cached {repo_id} (revision {commit[:12]}) has no {need}", fetch)
    return found


def _fetch_hint(repo_id: str, revision: str, need: str) -> str:
    rev = "" if revision == "main" else f" --revision {revision}"
    files = "config.json" if need == "config.json" else f"config.json {need}"
    return f"fetch it on a machine with network: `hf download {repo_id} {files}{rev}` (huggingface_hub's CLI)"


def tokenizer_file(name: str | Path, *, revision: str | None = None) -> Path:
    """The tokenizer.json a tokenizer name means: a tokenizer.json file, a model folder, a bundled name or a
    Hugging Face id in the local cache."""
    path = Path(str(name)).expanduser()
    if path.is_file():
        return path
    model = locate_model(name, revision=revision, need="tokenizer.json")
    found = model.file("tokenizer.json")
    if found is None:
        raise ServetuneError(
            f"{model.where} has no tokenizer.json",
            "give a tokenizer.json path or a model folder that has one, or --tokenizer server (the server's /tokenize)",
        )
    return found
