"""The rollup report in a real browser: Debian's headless Chromium opens a generated page.

Chromium is driven through its DevTools protocol over a WebSocket (aiohttp, already a dependency):
no browser download, no driver binary that must match the browser's version, no new package. The
test writes the representative report of test_rollup_report.py, opens it from ``file://``, and
checks what only a browser can tell: the page loads without console errors, every embedded image
decodes (``naturalWidth > 0``), the incident table's rows are laid out visibly, and a full-page
screenshot is a non-empty PNG (kept in ``tmp_path`` to look at).

Without /usr/bin/chromium the test is skipped with the reason, unless ``ACTORLOG_REQUIRE_BROWSER``
is set (``make test`` sets it), in which case it fails: scripts/ensure-os-packages.sh installs
Debian's ``chromium`` package.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import re
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.ops.test_rollup_report import representative_report

CHROMIUM = Path("/usr/bin/chromium")
STEP_TIMEOUT_S = 20.0
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--window-size=1280,900",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
)

pytestmark = pytest.mark.integration


def _require_chromium() -> None:
    if CHROMIUM.exists() and os.access(CHROMIUM, os.X_OK):
        return
    if os.environ.get("ACTORLOG_REQUIRE_BROWSER"):
        pytest.fail(f"ACTORLOG_REQUIRE_BROWSER is set but {CHROMIUM} is missing (apt-get install chromium)")
    pytest.skip(
        f"needs Debian's chromium at {CHROMIUM} (scripts/ensure-os-packages.sh installs it; "
        "set ACTORLOG_REQUIRE_BROWSER to make this an error)"
    )


class DevTools:
    """A minimal DevTools protocol client: commands to one page session, its events collected."""

    def __init__(self, socket: aiohttp.ClientWebSocketResponse) -> None:
        self._socket = socket
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._waiters: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.events: list[dict[str, Any]] = []
        self.session_id: str | None = None
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for message in self._socket:
            if message.type is not aiohttp.WSMsgType.TEXT:
                break
            data = json.loads(message.data)
            if "id" in data:
                future = self._pending.pop(data["id"], None)
                if future is not None and not future.done():
                    future.set_result(data)
                continue
            self.events.append(data)
            waiter = self._waiters.get(data.get("method", ""))
            if waiter is not None and not waiter.done():
                waiter.set_result(data)
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ConnectionError("the browser closed the DevTools connection"))

    def expect(self, method: str) -> asyncio.Future[dict[str, Any]]:
        """A future for the next event ``method``; ask before the command that causes it."""
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiters[method] = future
        return future

    async def send(self, method: str, params: dict[str, Any] | None = None, *, page: bool = True) -> Any:
        ident = next(self._ids)
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if page and self.session_id is not None:
            message["sessionId"] = self.session_id
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[ident] = future
        await self._socket.send_str(json.dumps(message))
        reply = await asyncio.wait_for(future, STEP_TIMEOUT_S)
        if "error" in reply:
            raise AssertionError(f"{method} failed: {reply['error']}")
        return reply["result"]

    async def evaluate(self, expression: str) -> Any:
        result = await self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise AssertionError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def close(self) -> None:
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


@contextlib.asynccontextmanager
async def chromium(profile: Path) -> AsyncIterator[DevTools]:
    """Start headless Chromium with a fresh profile; yields a DevTools client attached to a new page."""
    process = await asyncio.create_subprocess_exec(
        str(CHROMIUM),
        *FLAGS,
        f"--user-data-dir={profile}",
        "about:blank",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    stderr: list[str] = []
    try:
        # Chromium prints the browser's WebSocket URL on stderr once it listens.
        url = None
        while url is None:
            line = await asyncio.wait_for(process.stderr.readline(), STEP_TIMEOUT_S)
            if not line:
                raise AssertionError(f"chromium exited before DevTools listened: {''.join(stderr)[-2000:]}")
            stderr.append(line.decode(errors="replace"))
            found = re.search(r"DevTools listening on (ws://\S+)", stderr[-1])
            url = found.group(1) if found else None

        async def drain() -> None:  # a full stderr pipe would stall the browser
            assert process.stderr is not None
            while line := await process.stderr.readline():
                stderr.append(line.decode(errors="replace"))

        drainer = asyncio.create_task(drain())
        async with (
            aiohttp.ClientSession() as http,
            http.ws_connect(url, max_msg_size=0, autoping=True) as socket,
        ):
            devtools = DevTools(socket)
            try:
                target = await devtools.send("Target.createTarget", {"url": "about:blank"})
                attached = await devtools.send(
                    "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}
                )
                devtools.session_id = attached["sessionId"]
                for domain in ("Page", "Runtime", "Log"):
                    await devtools.send(f"{domain}.enable")
                yield devtools
                with contextlib.suppress(Exception):
                    await devtools.send("Browser.close", page=False)
            finally:
                await devtools.close()
        await asyncio.wait_for(process.wait(), STEP_TIMEOUT_S)
        await drainer
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def _problems(events: list[dict[str, Any]]) -> list[str]:
    """Console errors, uncaught exceptions and browser log errors (failed loads, blocked resources)."""
    found = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            found.append(f"console.{params['type']}: {[a.get('value') for a in params.get('args', [])]}")
        elif method == "Runtime.exceptionThrown":
            found.append(f"exception: {params.get('exceptionDetails', {}).get('text')}")
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            found.append(f"log ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}")
    return found


_INSPECT = """
(() => {
  const visible = (element) => {
    const box = element.getBoundingClientRect();
    const style = getComputedStyle(element);
    return box.width > 0 && box.height > 0 && style.visibility !== "hidden" && style.display !== "none";
  };
  const rows = [...document.querySelectorAll("#incidents tbody tr")];
  return {
    title: document.title,
    images: [...document.images].map((img) => ({
      alt: img.alt, complete: img.complete, naturalWidth: img.naturalWidth, shownWidth: img.width,
    })),
    figures: document.querySelectorAll("figure").length,
    captions: [...document.querySelectorAll("figcaption")].map((c) => c.textContent.length),
    incidentRows: rows.map((row) => ({
      visible: visible(row),
      cells: [...row.cells].map((cell) => cell.textContent),
    })),
    width: document.documentElement.scrollWidth,
    height: document.documentElement.scrollHeight,
  };
})()
"""


def _png_size(data: bytes) -> tuple[int, int]:
    assert data.startswith(b"\x89PNG\r\n\x1a\n"), "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


async def _open_report(page: Path, profile: Path) -> tuple[dict[str, Any], list[str], bytes]:
    """Open ``page``; returns what the page script saw, the problems logged and a full-page PNG."""
    async with chromium(profile) as devtools:
        loaded = devtools.expect("Page.loadEventFired")
        navigation = await devtools.send("Page.navigate", {"url": page.as_uri()})
        assert "errorText" not in navigation, navigation
        await asyncio.wait_for(loaded, STEP_TIMEOUT_S)
        # Data-URI images decode asynchronously: wait for every decode before looking at them.
        await devtools.send(
            "Runtime.evaluate",
            {
                "expression": "Promise.all([...document.images].map((i) => i.decode().catch(() => null)))",
                "awaitPromise": True,
            },
        )
        facts = await devtools.evaluate(_INSPECT)
        await devtools.send(
            "Emulation.setDeviceMetricsOverride",
            {
                "width": 1280,
                "height": min(int(facts["height"]), 16_000),
                "deviceScaleFactor": 1,
                "mobile": False,
            },
        )
        shot = await devtools.send("Page.captureScreenshot", {"format": "png"})
        return facts, _problems(devtools.events), base64.b64decode(shot["data"])


def test_report_page_renders_in_headless_chromium(tmp_path: Path) -> None:
    _require_chromium()
    page = representative_report(tmp_path / "report")
    screenshot = tmp_path / "screenshot.png"

    facts, problems, png = asyncio.run(_open_report(page, tmp_path / "profile"))
    screenshot.write_bytes(png)

    assert problems == []
    assert facts["title"] == "actorlog rollup"
    assert len(facts["images"]) == facts["figures"] == 6
    for image in facts["images"]:
        assert image["complete"], image["alt"]
        assert image["naturalWidth"] > 0, image["alt"]
        assert image["shownWidth"] > 0, image["alt"]
    assert all(length > 100 for length in facts["captions"])
    rows = facts["incidentRows"]
    assert [row["cells"][0] for row in rows] == ["1", "2"]
    assert all(row["visible"] for row in rows)
    assert rows[0]["cells"][3] == "2 min 15 s"
    width, height = _png_size(screenshot.read_bytes())
    assert screenshot.stat().st_size > 50_000
    assert (width, height) == (1280, min(facts["height"], 16_000))
    assert height > 2000  # the whole page, not one screen
