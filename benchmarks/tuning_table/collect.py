"""Files what a device session brought back into the data folder: each launch's folder of each measured variant
becomes one launch of `data/<variant>/` (`layout.py`: the first launch in `data/<variant>/`, a later one in
`data/<variant>/launch_<n>/`; records, /metrics and the vLLM log gzipped; summaries and variant.json as they
are), and each launch's own files (plan, manifest, driver log) go to `data/sessions/<UTC start of the launch>/`,
with the device session's env.txt and driver.out (appended to by every launch).

    python benchmarks/tuning_table/collect.py dc.tgz [dc.tgz.part_00 ...]   # the tar poll.sh wrote ($OUT)

The tar holds `dc/launch_<k>/` per launch (`run_table.py`), or, from a driver before launch folders, one `dc/`
whose variant folders may come from different launches (a relaunch overwrote some): each variant's launch is read
from its variant.json, so both file the same way. Nothing on disk is replaced but the same launch brought back
again (a later poll's tar of it: the later copy is the more complete one); a variant measured again in another
launch (a relaunch, or a later session after a launch cut short) is added beside the earlier launches, in launch
order, and build_table.py reads them all.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import shutil
import tarfile
import tempfile
import time
from pathlib import Path

from layout import LAUNCH, launch_key, numbered, read_variant, variant_launches

HERE = Path(__file__).resolve().parent
GZIP = (".jsonl", ".prom", ".log")
SESSION_FILES = (
    "plan.json",
    "manifest.json",
    "driver.log",
    "driver.out",
    "env.txt",
    "cache_sizes.txt",
    "vllm_logging.json",
)


def unpack(parts: list[Path], into: Path) -> Path:
    blob = b"".join(p.read_bytes() for p in sorted(parts))
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        tar.extractall(into, filter="data")
    return into / "dc"


def launch_files(folder: Path) -> list[Path]:
    """One launch's own files in a variant's data folder (not the later launches' folders beside them)."""
    return [f for f in folder.iterdir() if not (f.is_dir() and f.name.startswith(LAUNCH))]


def copy_launch(src: Path, dst: Path, gzip_raw: bool) -> None:
    """A launch's files into `dst` (emptied of another launch's files first; later launches' folders stay)."""
    dst.mkdir(parents=True, exist_ok=True)
    for f in launch_files(dst):
        if f.is_dir():
            shutil.rmtree(f)
        else:
            f.unlink()
    for f in sorted(launch_files(src)):
        if f.is_dir():
            shutil.copytree(f, dst / f.name)
        elif gzip_raw and f.suffix in GZIP:
            with open(f, "rb") as fi, gzip.open(dst / (f.name + ".gz"), "wb", compresslevel=9) as fo:
                shutil.copyfileobj(fi, fo)
        else:
            shutil.copy2(f, dst / f.name)


def file_variant(src: Path, data: Path) -> str:
    """Files one launch of a variant (a driver's `<variant>/` folder) into `data`: replaces the same launch if it
    is there, else adds it and lays the variant's launches out in launch order. Says which it did."""
    vid = src.name
    new = read_variant(src)
    held = variant_launches(data, vid)
    same = next((f for f in held if launch_key(read_variant(f)) == launch_key(new)), None)
    if same is not None:
        copy_launch(src, same, gzip_raw=True)
        return f"launch {held.index(same) + 1} of {len(held)} (brought back again: replaced)"
    with tempfile.TemporaryDirectory(prefix="collect-") as tmp:
        staged = []
        for k, f in enumerate(held):
            copy_launch(f, Path(tmp) / f"old{k}", gzip_raw=False)
            staged.append((launch_key(read_variant(f)), Path(tmp) / f"old{k}"))
        copy_launch(src, Path(tmp) / "new", gzip_raw=True)
        staged.append((launch_key(new), Path(tmp) / "new"))
        staged.sort(key=lambda item: item[0])
        top = data / vid
        for n, (_, folder) in enumerate(staged, start=1):
            copy_launch(folder, top if n == 1 else top / f"{LAUNCH}{n}", gzip_raw=False)
        n = 1 + [f for _, f in staged].index(Path(tmp) / "new")
    return f"launch {n} of {len(staged)} (added)"


def session_folder(data: Path, manifest: dict) -> Path:
    """`data/sessions/<UTC start>/` of a launch; a second launch started in the same minute gets `_2`, ... ."""
    stamp = time.strftime("%Y-%m-%dT%H%MZ", time.gmtime(manifest["started"]))
    k = 1
    while True:
        folder = data / "sessions" / (stamp if k == 1 else f"{stamp}_{k}")
        held = folder / "manifest.json"
        if not held.exists() or json.loads(held.read_text()).get("started") == manifest["started"]:
            return folder
        k += 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tar", nargs="+", type=Path, help="dc.tgz, or its pieces dc.tgz.part_*")
    ap.add_argument("--data", type=Path, default=HERE / "data")
    ap.add_argument("--tmp", type=Path, default=Path("/tmp/tuning_table_collect"))
    a = ap.parse_args()
    shutil.rmtree(a.tmp, ignore_errors=True)
    dc = unpack(a.tar, a.tmp)
    launches = [f for f in (dc, *numbered(dc)) if (f / "manifest.json").exists()]
    for launch in launches:
        session = session_folder(a.data, json.loads((launch / "manifest.json").read_text()))
        session.mkdir(parents=True, exist_ok=True)
        for name in SESSION_FILES:
            for where in (launch, dc):  # a launch's own, else the device session's (appended to by each launch)
                if (where / name).exists():
                    shutil.copy2(where / name, session / name)
                    break
        for vdir in sorted(p for p in launch.iterdir() if p.is_dir() and not p.name.startswith(LAUNCH)):
            if (vdir / "variant.json").exists():
                v = read_variant(vdir)
                filed = file_variant(vdir, a.data)
                print(f"{vdir.name}: {v['outcome']}, ready {v['ready_s']} s, done {v['done']}: {filed}")
            else:
                print(f"{vdir.name}: no variant.json (its server had not stopped): left out")
        print(f"{launch.name}: session files in {session}")


if __name__ == "__main__":
    main()
