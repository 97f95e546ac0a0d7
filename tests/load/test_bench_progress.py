"""`servetune bench` with its output captured (a file, a pipe, CI's log): the progress is plain lines that end
with a newline, not a line redrawn in place that the summary's header runs into."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_progress_lines_end_before_the_summary_when_output_is_not_a_terminal(tmp_path: Path) -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "servetune", "mock-server", "--port", "0", "--ttft-ms", "5", "--itl-ms", "1"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = server.stderr.readline().split()[4]  # "mock server ready on http://127.0.0.1:PORT ..."
        out = tmp_path / "out.txt"
        with out.open("w") as fh:
            proc = subprocess.run(
                [sys.executable, "-m", "servetune", "bench", "--url", url, "--model", "mock", "--concurrency", "2",
                 "--requests", "6", "--output-tokens", "5", "--accept-warnings"],
                stdout=fh, stderr=subprocess.PIPE, text=True, timeout=120,
            )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        lines = out.read_text().splitlines()
        progress = [line for line in lines if line.startswith("concurrency 2 (6 requests)")]
        assert progress and all(line.rstrip().endswith("ms") for line in progress), lines[:4]
        header = next(i for i, line in enumerate(lines) if line.startswith("== mock @"))
        assert header == lines.index(progress[-1]) + 1, lines[:4]
        assert "done 6" in progress[-1] and "[bold]" not in progress[-1]
    finally:
        server.terminate()
        server.wait(10)
