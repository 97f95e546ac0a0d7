"""What every engine adapter provides: its programs and image, argv, environment, version, log facts, failure
patterns, progress.

An engine's command line has one owner: the adapter says which program starts the engine (here, in a pasted
command, inside its official image), how it is given the model and the served name, and which image is pinned
for a version; `argv` (a local launch) and `servetune.engines.commands` (pasted commands, deployment files)
assemble every command line from those. Adapters are small stateless objects; `registry.adapter_for(name)`
returns the one for an engine name.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from servetune.engines.config import EngineConfig
from servetune.engines.facts import EngineFacts
from servetune.engines.failures import Pattern
from servetune.engines.flagtable import versions
from servetune.engines.vocab import canonical_argv
from servetune.errors import ServetuneError


@dataclass(frozen=True)
class Image:
    """A container image pinned to one engine release, and why that release (`source`)."""

    ref: str
    source: str
    guessed: bool = False
    """The config names no release this image can be pinned to: `ref` is the newest release servetune knows."""


class EngineAdapter(ABC):
    """One engine's conventions."""

    name: str
    progress_patterns: Sequence[re.Pattern[str]] = ()
    """Log lines worth showing a user while the engine starts (loading, profiling, capturing...)."""
    shell_program: tuple[str, ...] = ()
    """The program a pasted command starts (`vllm serve`, `llama-server`)."""
    image_program: tuple[str, ...] = ()
    """The server program inside the engine's official image; empty when servetune knows no image to run."""
    model_flag: str | None = None
    """The option that names the model (`-m`, `--model-path`); None: the model is the first argument."""
    name_flag: str = "--served-model-name"
    """The option that names the model for clients."""

    @abstractmethod
    def program(self) -> list[str]:
        """The program that starts this engine on this machine (the arguments follow it)."""

    def model_args(self, model: str, program: Sequence[str]) -> list[str]:
        """How `program` is told which model to serve."""
        return [model] if self.model_flag is None else [self.model_flag, model]

    def argv(self, cfg: EngineConfig, host: str, port: int) -> list[str]:
        """The command line that starts this engine serving `cfg` on host:port."""
        program = self.program()
        return [
            *program,
            *self.model_args(cfg.model, program),
            self.name_flag,
            cfg.name,
            "--host",
            host,
            "--port",
            str(port),
            *canonical_argv(cfg.engine, cfg.flags, version=cfg.version),
        ]

    def image(self, version: str | None, gpus: int) -> Image:
        """The official image pinned to the engine release `version` (for `gpus` GPUs; 0 = CPU); a ServetuneError
        names the way out when servetune knows no image for this engine."""
        raise ServetuneError(
            f"servetune knows no container image for {self.name}",
            "deploy a vllm, llamacpp or sglang config (a simulated config: the vLLM config it imitates)",
        )

    def pinned(self, repo: str, tag: str, version: str | None) -> Image:
        """`repo:tag` with `{release}` in `tag` filled from `version` (its X.Y.Z, or a llama.cpp build `b1234`),
        else from the newest release servetune has a flag table for (the flags were checked against it)."""
        given = release(version)
        if given:
            return Image(
                ref=f"{repo}:{tag.format(release=given)}", source=f"the config's {self.name} version {version}"
            )
        newest = versions(self.name)[-1]
        return Image(
            ref=f"{repo}:{tag.format(release=newest)}",
            source=f"the config names no {self.name} release, so the newest servetune knows ({newest}): pin the "
            "release you measured (the config's `version:`)",
            guessed=True,
        )

    def env(self, cfg: EngineConfig, host: str) -> dict[str, str]:
        """Environment added to servetune's own (cfg.env wins over adapter defaults)."""
        return dict(cfg.env)

    def compile_identity(self, cfg: EngineConfig) -> str | None:
        """What the engine's compile cache is keyed by, as far as the config shows it: two configs with the same
        identity load each other's compiled graphs (a warm start). None: the engine keeps no compile cache."""
        return None

    @abstractmethod
    def version(self) -> str | None:
        """The installed engine's version, without starting it (None when unknown)."""

    @abstractmethod
    def parse_log(self, text: str) -> EngineFacts:
        """Startup facts from the engine's log."""

    @abstractmethod
    def failure_patterns(self) -> Sequence[Pattern]:
        """Failure classes this engine's log can show, most specific first."""

    def progress(self, line: str) -> str | None:
        """A short progress message for a log line (one screen line at most), or None when the line is not
        worth showing: some milestone lines (vLLM's engine config) run to thousands of characters."""
        for pat in self.progress_patterns:
            if pat.search(line):
                msg = strip_log_prefix(line)
                return msg if len(msg) <= PROGRESS_WIDTH else msg[: PROGRESS_WIDTH - 1] + "…"
        return None


def release(version: str | None) -> str | None:
    """The release an image tag carries: `0.24.0+cpu` → `0.24.0`, llama.cpp's `b11549` → `b11549`; None for
    anything else (`xllamacpp-0.2.5` names a Python wrapper, not a llama.cpp build)."""
    m = re.match(r"v?(\d+\.\d+\.\d+)|(b\d+)$", version or "")
    return (m.group(1) or m.group(2)) if m else None


PROGRESS_WIDTH = 160
"""The longest progress message a launch reports."""

_PREFIX = re.compile(
    r"^\d+\.\d+\.\d+\.\d+ [IWE] "
    r"|^(?:\(\w+ pid=\d+\)\s*)?(?:(?:INFO|WARNING|ERROR|DEBUG)\s+\d\d-\d\d \d\d:\d\d:\d\d \[[^\]]*\]\s*)?"
)


def strip_log_prefix(line: str) -> str:
    """Drops vLLM's `(EngineCore pid=..) INFO 11-30 12:00:00 [file.py:1]` and llama.cpp's time prefix."""
    return _PREFIX.sub("", line, count=1).strip()


def last_float(pattern: re.Pattern[str], text: str, group: int = 1) -> float | None:
    """The last match's group as a float (later lines win: engines repeat facts when they restart parts)."""
    matches = pattern.findall(text)
    if not matches:
        return None
    m = matches[-1]
    value = m[group - 1] if isinstance(m, tuple) else m
    return float(value.replace(",", ""))


def last_int(pattern: re.Pattern[str], text: str, group: int = 1) -> int | None:
    """Like `last_float`, as an int."""
    value = last_float(pattern, text, group)
    return None if value is None else int(value)


def first_int(pattern: re.Pattern[str], text: str, group: int = 1) -> int | None:
    """The first match's group as an int, for facts whose later repeats describe something else."""
    m = pattern.search(text)
    return None if m is None else int(m.group(group).replace(",", ""))


def installed_version(*dists: str) -> str | None:
    """The version of the first installed distribution among `dists` (no import of the engine itself)."""
    from importlib import metadata

    for dist in dists:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None
