#!/usr/bin/env python3
"""Where a client's CPU goes when it reads every token as it arrives: the kernel's share, measured on the floor.

Three measurements, side by side in one run (server `servetune mock-server` on CPU 0, the floor client
`floor_uvloop.py` on CPU 1, c256, one token per 5 ms, 1,000 requests; results in `kernel.json`):
- segments the host sent per streamed token (`nstat` TcpOutSegs; one data segment per token plus the ACKs) and the
  floor's CPU per token, with and without asking for delayed ACKs (TCP_QUICKACK 0 before each request),
  alternated `--repeat` times;
- the floor's CPU by where it is spent (`perf record -g`, when perf is installed): the kernel's share, the read
  syscall's, and the part of the read spent sending its ACK and delivering it to the server's socket (the
  softirq on the reader's CPU, as loopback does it);
- whether a TCP socket gives the kernel's receive time of a request (SO_TIMESTAMPNS through `recvmsg`) when the
  read comes 100 ms after the bytes: the stamp a server could take to see its own queueing;
- the floor and servetune side by side (`perf record`, 4,000 requests each, c256): CPU per streamed token in the
  kernel, in uvloop, in the interpreter and elsewhere — where servetune's cost above the floor is spent.
  The start-up (imports) is in it, once per process: ~1 s of servetune's interpreter time, about 2 µs a token.
Usage: `python -m benchmarks.client.kernel [--repeat 2]`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import struct
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks.client.run import FLOOR, HERE, Mock, servetune_argv, tool_argv

SO_TIMESTAMPNS = 35  # SO_TIMESTAMPNS_OLD on Linux (the socket module does not name it)
REQUESTS = 1000
SPLIT_REQUESTS = 4000


def nstat() -> dict[str, int]:
    out = subprocess.run(["nstat", "-az"], capture_output=True, text=True, check=True).stdout
    return {f[0]: int(f[1]) for f in (line.split() for line in out.splitlines()[1:]) if len(f) > 1 and f[1].isdigit()}


def floor_run(mock: Mock, work: Path, quickack0: bool) -> dict:
    argv = tool_argv(FLOOR, mock.url, REQUESTS, work, 1)
    assert argv is not None
    argv += ["quickack0"] if quickack0 else []
    before, tok0, cpu0 = nstat(), mock.tokens(), resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(["taskset", "-c", "1", *argv], check=True)
    after, tokens, cpu1 = nstat(), mock.tokens() - tok0, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return {
        "quickack0": quickack0,
        "segments_per_token": (after["TcpOutSegs"] - before["TcpOutSegs"]) / tokens,
        "us_per_token": 1e6 * cpu / tokens,
    }


def perf_shares(mock: Mock, work: Path) -> dict:
    perf = shutil.which("perf")
    if perf is None:
        return {"error": "perf not found"}
    data = work / "perf.data"
    argv = tool_argv(FLOOR, mock.url, REQUESTS, work, 1)
    assert argv is not None
    subprocess.run([perf, "record", "-q", "-g", "-F", "4999", "-o", str(data), "--", "taskset", "-c", "1", *argv],
                   check=True, capture_output=True)  # fmt: skip
    text = subprocess.run(
        [perf, "report", "-i", str(data), "--children", "--sort", "sym", "-g", "none", "--stdio"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    children = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 4 and f[0].endswith("%") and f[2] in ("[k]", "[.]"):
            children.setdefault(f[3], float(f[0].rstrip("%")))
    samples = dso_samples(perf, data)
    return {
        "kernel_pct": round(100 * samples.get("[kernel.kallsyms]", 0) / sum(samples.values()), 2),
        "read_syscall_pct": children.get("ksys_read"),
        "softirq_in_read_pct": children.get("net_rx_action"),
        "ack_transmit_pct": children.get("__tcp_transmit_skb"),
        "epoll_wait_pct": children.get("do_epoll_wait"),
    }


def dso_samples(perf: str, data: Path) -> dict[str, int]:
    """perf's samples of a recording by the binary or library they fell in (`[kernel.kallsyms]` for the kernel)."""
    text = subprocess.run(
        [perf, "report", "-i", str(data), "--no-children", "--sort", "dso", "-F", "overhead,sample,dso", "-g",
         "none", "--stdio", "-q"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    out: dict[str, int] = {}
    for f in (line.split() for line in text.splitlines()):
        if len(f) >= 3 and f[1].isdigit():
            out[f[2]] = out.get(f[2], 0) + int(f[1])
    return out


def split_by_place(mock: Mock, work: Path) -> dict:
    """µs of CPU per streamed token by the code that ran (perf's DSO): the floor against servetune, one run each."""
    perf = shutil.which("perf")
    if perf is None:
        return {"error": "perf not found"}
    out = {}
    for name in (FLOOR, "servetune"):
        data = work / "split.data"
        if name == FLOOR:
            argv = tool_argv(FLOOR, mock.url, SPLIT_REQUESTS, work, 1)
        else:
            argv = servetune_argv(mock.url, 256, work, "split", "--requests", str(SPLIT_REQUESTS), jsonl=False)
        assert argv is not None
        tok0 = mock.tokens()
        subprocess.run([perf, "record", "-q", "-F", "4999", "-o", str(data), "--", "taskset", "-c", "1", *argv],
                       check=True, capture_output=True)  # fmt: skip
        tokens = mock.tokens() - tok0
        places = {"kernel": 0, "uvloop": 0, "interpreter": 0, "other": 0}
        for dso, n in dso_samples(perf, data).items():
            where = (
                "kernel" if dso == "[kernel.kallsyms]" else "uvloop" if dso.startswith("loop.cpython")
                else "interpreter" if dso.startswith("libpython") else "other"
            )  # fmt: skip
            places[where] += n
        out[name] = {k: round(1e6 * n / 4999 / tokens, 2) for k, n in places.items()}  # samples at 4999 Hz
        out[name]["tokens"] = tokens
    return out


def receive_stamp() -> dict:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    with srv, socket.create_connection(srv.getsockname()) as client:
        conn, _ = srv.accept()
        with conn:
            conn.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            time.sleep(0.05)  # the kernel switches receive stamping on asynchronously (a static key, first use)
            sent = time.time()
            client.send(b"GET / HTTP/1.1\r\n\r\n")
            time.sleep(0.1)
            _, ancillary, _, _ = conn.recvmsg(100, 1024)
            read = time.time()
    stamps = [struct.unpack("qq", data[:16]) for _, kind, data in ancillary if kind == SO_TIMESTAMPNS]
    if not stamps:
        return {"error": "no receive time stamp came with the data"}
    kernel = stamps[0][0] + stamps[0][1] / 1e9
    return {"stamp_after_send_ms": 1e3 * (kernel - sent), "read_after_send_ms": 1e3 * (read - sent)}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    out: dict = {"started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load_average": os.getloadavg()}
    with tempfile.TemporaryDirectory() as tmp, Mock(18971, 50, 5, cheap=True) as mock:
        work = Path(tmp)
        out["acks"] = [floor_run(mock, work, q) for _ in range(args.repeat) for q in (False, True)]
        out["perf"] = perf_shares(mock, work)
        out["split_by_place_us_per_token"] = split_by_place(mock, work)
    out["receive_stamp"] = receive_stamp()
    (HERE / "kernel.json").write_text(json.dumps(out, indent=1))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
