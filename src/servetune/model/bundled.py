"""Configs of public models shipped with servetune (shapes only, no weights), usable by name: `--model qwen3.6-27b`.

They let the demo and the tests plan real architectures without any download; each is the model's published
config.json (Qwen3.5-4B's width and MLP size, which no test depends on, are assumed).
"""

from __future__ import annotations

from pathlib import Path

BUNDLED_DIR = Path(__file__).parent / "configs"


def bundled_names() -> list[str]:
    """Names of the bundled model configs."""
    return sorted(p.name for p in BUNDLED_DIR.iterdir() if (p / "config.json").exists())


def bundled_model(name: str) -> Path | None:
    """The directory of a bundled config, or None."""
    path = BUNDLED_DIR / name.lower()
    return path if (path / "config.json").exists() else None
