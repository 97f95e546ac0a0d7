"""Headless Chromium driven over the DevTools protocol (aiohttp's websocket client, no extra package): open a page at
a given viewport width, ask the layout what is visible (bounding boxes, scroll widths), and take a full-page
screenshot into the test output folder (`test-output/screenshots/`, or $SERVETUNE_TEST_OUTPUT).

The flags are the ones this machine's Chromium needs (no sandbox as root, no background networking: the network is
closed, and a fresh profile per run)."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

ROOT = Path(__file__).resolve().parents[2]
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--remote-debugging-port=0",
)


def output_dir() -> Path:
    path = Path(os.environ.get("SERVETUNE_TEST_OUTPUT", ROOT / "test-output")) / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path


def chromium() -> str:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed (scripts/setup.sh installs it)")
    return browser


class Page:
    """One page of a headless Chromium, at `width` CSS pixels wide."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.ids = itertools.count(1)

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        call_id = next(self.ids)
        await self.ws.send_str(json.dumps({"id": call_id, "method": method, "params": params}))
        while True:
            msg = json.loads((await self.ws.receive(timeout=60)).data)
            if msg.get("id") == call_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    async def eval(self, expression: str) -> Any:
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def screenshot(self, path: Path) -> Path:
        size = (await self.call("Page.getLayoutMetrics"))["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        shot = await self.call("Page.captureScreenshot", format="png", clip=clip, captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path


@contextmanager
def browser_page(url: str, width: int = 1280, height: int = 900) -> Iterator[tuple[asyncio.AbstractEventLoop, Page]]:
    """A loaded page; run coroutines with `loop.run_until_complete(page.eval(...))`."""
    profile = tempfile.mkdtemp(prefix="servetune-chromium-")
    proc = subprocess.Popen(
        [chromium(), *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    loop = asyncio.new_event_loop()
    try:
        assert proc.stderr is not None
        port = None
        for line in proc.stderr:
            if m := re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line):
                port = int(m.group(1))
                break
        assert port is not None, "chromium did not start its DevTools server"

        async def open_page() -> tuple[aiohttp.ClientSession, Page]:
            session = aiohttp.ClientSession()
            async with session.get(f"http://127.0.0.1:{port}/json/list") as resp:
                targets = await resp.json()
            target = next(t for t in targets if t.get("type") == "page")
            ws = await session.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0)
            page = Page(ws)
            await page.call("Page.enable")
            await page.call(
                "Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False
            )
            await page.call("Page.navigate", url=url)
            for _ in range(200):
                if await page.eval("document.readyState") == "complete":
                    break
                await asyncio.sleep(0.05)
            return session, page

        session, page = loop.run_until_complete(open_page())
        try:
            yield loop, page
        finally:
            loop.run_until_complete(page.ws.close())
            loop.run_until_complete(session.close())
    finally:
        loop.close()
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        shutil.rmtree(profile, ignore_errors=True)


VISIBLE_JS = """
(selector) => Array.from(document.querySelectorAll(selector)).map(el => {
  const r = el.getBoundingClientRect();
  return {text: el.textContent.trim().slice(0, 4000), label: el.getAttribute('aria-label'), left: r.left, right: r.right, top: r.top + window.scrollY,
          bottom: r.bottom + window.scrollY, width: r.width, height: r.height};
})
"""
"""Boxes of the elements a selector matches (page coordinates), for the tests' assertions."""


def boxes(loop: asyncio.AbstractEventLoop, page: Page, selector: str) -> list[dict[str, Any]]:
    return loop.run_until_complete(page.eval(f"({VISIBLE_JS})({json.dumps(selector)})"))
