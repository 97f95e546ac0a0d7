"""Where a variant's measurements lie, on the device and in the data folder: the one place that says it, read by
the driver (what is done), collect.py (where a launch is filed) and build_table.py (what a variant measured).

On the device, each run of `run_table.py` (a launch) writes into a folder of its own under the driver's output
folder, `<out>/launch_<k>/` (k = 1, 2, ... in the order the launches started), its variants in
`<out>/launch_<k>/<variant>/`: a relaunch in the same device session never writes where an earlier launch did,
and what an earlier launch finished is done for it.

In the data folder a variant is `data/<variant>/` (its first launch) and, when it was measured in more than one
launch (a relaunch in the same session, or a later session that measured it again), `data/<variant>/launch_<n>/`
for its n-th launch in launch order: each launch's files as the driver wrote them, none replacing another's. A
launch is known by its `variant.json` (`session_started`, `t_launch`).

Stdlib only: the driver runs on the device from a copied tree, and this file is reached there by path.
"""

from __future__ import annotations

import json
from pathlib import Path

LAUNCH = "launch_"
"""The prefix of a launch's folder: `launch_<k>` under the driver's output folder, `launch_<n>` in a variant's."""


def numbered(folder: Path) -> list[Path]:
    """The `launch_<k>` folders directly under `folder`, by k."""
    found = [p for p in folder.glob(f"{LAUNCH}*") if p.is_dir() and p.name[len(LAUNCH) :].isdigit()]
    return sorted(found, key=lambda p: int(p.name[len(LAUNCH) :]))


def new_launch(out: Path) -> Path:
    """A new, empty folder for this launch under the driver's output folder: one past the last launch's number.
    Made with mkdir, never reused, so two launches can never write into the same one."""
    out.mkdir(parents=True, exist_ok=True)
    earlier = numbered(out)
    k = int(earlier[-1].name[len(LAUNCH) :]) + 1 if earlier else 1
    folder = out / f"{LAUNCH}{k}"
    folder.mkdir()
    return folder


def variant_launches(data: Path, variant: str) -> list[Path]:
    """The folders of every launch of `variant` under a data folder (or one launch's output folder), in launch
    order: `<data>/<variant>/` and then its `launch_<n>/`, each only where it holds a variant.json."""
    top = data / variant
    return [f for f in (top, *numbered(top)) if (f / "variant.json").is_file()]


def read_variant(folder: Path) -> dict:
    return json.loads((folder / "variant.json").read_text())


def launch_key(variant: dict) -> tuple[float, float]:
    """What tells one launch of a variant from another: its driver's start and its own launch time."""
    return (float(variant.get("session_started") or 0.0), float(variant.get("t_launch") or 0.0))


def is_done(data: Path, variant: str) -> bool:
    """Whether some launch of `variant` under `data` left nothing to measure (its variant.json says `done`)."""
    return any(read_variant(f).get("done") for f in variant_launches(data, variant))


def done_anywhere(variant: str, done_from: list[Path], out: Path) -> bool:
    """Done in a data folder of `done_from` (the committed measurements), or by an earlier launch of this device
    session: one of `out`'s launch folders, or `out` itself (a driver's output folder from before launch folders)."""
    return any(is_done(d, variant) for d in [*done_from, out, *numbered(out)])
