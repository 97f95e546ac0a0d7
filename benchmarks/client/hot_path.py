#!/usr/bin/env python3
"""The client's hot path alone, in process (no sockets, no kernel): CPU per streamed token of the HTTP/1.1 +
SSE parser with 1, 2, 3 and 8 tokens per read, and per conversation of the prompt builder.

Feeds a real response of `servetune mock-server` (128 tokens of a completions stream, recorded in
`hot_path_response.bin`) through `_Conn.data_received` as a paced stream arrives: one read per token, or a
client that fell behind and reads several at once. Give it several source trees to compare them side by side in
one run (each measured in a fresh interpreter, best of `--repeat`): `python benchmarks/client/hot_path.py
before=OLD/src after=src` → a table, and `hot_path.json` with `--json`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESPONSE = HERE / "hot_path_response.bin"

PROBE = r"""
import asyncio, json, sys, timeit
from servetune.load.http1 import Pool, _Conn
from servetune.load.prompts import RequestFactory
from servetune.load.sse import StreamState
from servetune.load.tokens import WordCounter
from servetune.load.workload import Workload

raw = open(sys.argv[1], "rb").read()
i = raw.index(b"\r\n\r\n") + 4
pieces = [raw[:i]]
while i < len(raw):  # one piece per chunk, as the mock writes them
    nl = raw.index(b"\r\n", i)
    end = nl + 2 + int(raw[i:nl], 16) + 2
    pieces.append(raw[i:end])
    i = end
tokens = pieces[2:-3]


class Transport:
    def write(self, data): pass


async def main():
    out = {}
    for k in (1, 2, 3, 8):
        reads = [b"".join(tokens[j : j + k]) for j in range(0, len(tokens), k)]

        def response():
            conn = _Conn(Pool("http://127.0.0.1:1"))
            conn.connection_made(Transport())
            state = StreamState(True, False)
            conn.request(b"", state)
            conn.data_received(pieces[0])
            conn.data_received(pieces[1])
            for r in reads:
                conn.data_received(r)
            conn.data_received(b"".join(pieces[-3:]))
            assert len(state.chunk_ns) == 128, len(state.chunk_ns)

        best = min(timeit.repeat(response, number=200, repeat=5)) / 200
        out[f"{k} per read"] = 1e9 * best / 128
    factory = RequestFactory(Workload.synthetic(64, 128), WordCounter(), "completions")

    async def build(n):
        for index in range(n):
            await factory.conversation(index)

    loop = asyncio.get_running_loop()
    import time
    times = []
    for _ in range(5):
        t = time.perf_counter()
        await build(2000)
        times.append((time.perf_counter() - t) / 2000)
    out["prompt µs"] = 1e6 * min(times)
    print(json.dumps(out))


asyncio.run(main())
"""


def measure(src: Path) -> dict:
    env = {"PYTHONPATH": str(src.resolve()), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", PROBE, str(RESPONSE)], capture_output=True, text=True, env=env)
    if out.returncode:
        raise SystemExit(f"{src}: {out.stderr[-800:]}")
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("src", nargs="+", help="source trees (the folder holding servetune/), as NAME=PATH or PATH")
    parser.add_argument("--repeat", type=int, default=3, help="fresh interpreters per tree; the best is kept")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    rows = {}
    trees = [(a.partition("=")[0], Path(a.partition("=")[2])) if "=" in a else (a, Path(a)) for a in args.src]
    for _ in range(args.repeat):  # interleaved, so that a slow moment of the machine hits every tree
        for name, src in trees:
            got = measure(src)
            best = rows.setdefault(name, got)
            for key, value in got.items():
                best[key] = min(best[key], value)
    keys = list(next(iter(rows.values())))
    print("| source | " + " | ".join(f"ns per token, {k}" if "read" in k else k for k in keys) + " |")
    print("|---|" + "---:|" * len(keys))
    for src, row in rows.items():
        print(f"| {src} | " + " | ".join(f"{row[k]:.0f}" for k in keys) + " |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
