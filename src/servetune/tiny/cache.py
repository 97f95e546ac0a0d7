"""The one place the tiny model lives: `$SERVETUNE_CACHE/tiny-model` (default `~/.cache/servetune/tiny-model`),
built on first use and shared by `servetune launch --tiny`, `check --tiny`, experiments that name `model: tiny`,
the demo and the tests (never a second copy relative to the working directory)."""

from __future__ import annotations

import os
from pathlib import Path

from servetune.tiny.build import TinyModel, build_tiny_model


def cache_dir() -> Path:
    return Path(os.environ.get("SERVETUNE_CACHE") or Path.home() / ".cache" / "servetune")


def tiny_model() -> TinyModel:
    """The tiny model, built under the cache directory on first use (milliseconds afterwards)."""
    return build_tiny_model(cache_dir() / "tiny-model")
