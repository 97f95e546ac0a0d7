"""Files what a device session brought back into the data folder: each measured variant's folder becomes
`data/<variant>/` (records, /metrics and the vLLM log gzipped; summaries and variant.json as they are), and the
session's own files (plan, manifest, driver log, environment) go to `data/sessions/<UTC start>/`.

    python benchmarks/tuning_table/collect.py dc.tgz [dc.tgz.part_00 ...]   # the tar poll.sh wrote ($OUT)

A variant folder that is brought back again (it was incomplete and a later session measured it anew) replaces the
old one: what is on disk is the last measurement of every variant, and git keeps the earlier ones.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import shutil
import tarfile
import time
from pathlib import Path

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


def file_variant(src: Path, dst: Path) -> None:
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    for f in sorted(src.iterdir()):
        if f.suffix in GZIP:
            with open(f, "rb") as fi, gzip.open(dst / (f.name + ".gz"), "wb", compresslevel=9) as fo:
                shutil.copyfileobj(fi, fo)
        else:
            shutil.copy2(f, dst / f.name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tar", nargs="+", type=Path, help="dc.tgz, or its pieces dc.tgz.part_*")
    ap.add_argument("--data", type=Path, default=HERE / "data")
    ap.add_argument("--tmp", type=Path, default=Path("/tmp/tuning_table_collect"))
    a = ap.parse_args()
    shutil.rmtree(a.tmp, ignore_errors=True)
    dc = unpack(a.tar, a.tmp)
    manifest = json.loads((dc / "manifest.json").read_text())
    stamp = time.strftime("%Y-%m-%dT%H%MZ", time.gmtime(manifest["started"]))
    session = a.data / "sessions" / stamp
    session.mkdir(parents=True, exist_ok=True)
    for name in SESSION_FILES:
        if (dc / name).exists():
            shutil.copy2(dc / name, session / name)
    for vdir in sorted(p for p in dc.iterdir() if p.is_dir()):
        if (vdir / "variant.json").exists():
            file_variant(vdir, a.data / vdir.name)
            v = json.loads((vdir / "variant.json").read_text())
            print(f"{vdir.name}: {v['outcome']}, ready {v['ready_s']} s, done {v['done']}")
        else:
            print(f"{vdir.name}: no variant.json (its server had not stopped): left out")
    print(f"session files in {session}")


if __name__ == "__main__":
    main()
