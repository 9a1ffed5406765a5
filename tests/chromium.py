"""Drive Debian's headless Chromium from the tests, with nothing but the standard library.

``dump_dom`` and ``screenshot`` run the browser once on a file URL (``--dump-dom``,
``--screenshot``). ``Browser`` keeps one browser open and speaks the DevTools protocol over
``--remote-debugging-pipe`` (JSON messages separated by NUL bytes on file descriptors 3 and
4), which is what clicking, typing and counting network requests need. No browser is ever
downloaded: ``scripts/setup_browser.sh`` installs the distribution's package.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import struct
import subprocess
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
WIDTH, HEIGHT = 1400, 1000


def _run(*args: str, timeout: float = 120) -> bytes:
    profile = tempfile.mkdtemp(prefix="coreml-lint-chromium-")
    try:
        return subprocess.run(
            [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args],
            check=True,
            capture_output=True,
            timeout=timeout,
        ).stdout
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def dump_dom(page: Path) -> str:
    """The DOM after the page's scripts ran, as Chromium serialises it."""
    return _run("--dump-dom", page.resolve().as_uri()).decode("utf-8")


def screenshot(page: Path, png: Path) -> bytes:
    _run(f"--screenshot={png}", f"--window-size={WIDTH},{HEIGHT}", page.resolve().as_uri())
    return png.read_bytes()


class Browser:
    """One headless Chromium, one page, driven over the DevTools pipe."""

    def __init__(self) -> None:
        self.profile = tempfile.mkdtemp(prefix="coreml-lint-chromium-")
        cmd_read, self._cmd = os.pipe()
        self._out, out_write = os.pipe()
        args = [
            *FLAGS,
            f"--user-data-dir={self.profile}",
            f"--window-size={WIDTH},{HEIGHT}",
            "--remote-debugging-pipe",
            "about:blank",
        ]
        # Chromium reads commands from fd 3 and writes replies to fd 4. bash, not sh: dash
        # cannot redirect from a descriptor above 9, and pytest's capture holds the low ones.
        self.proc = subprocess.Popen(
            ["bash", "-c", f'exec "$0" "$@" 3<&{cmd_read} 4>&{out_write}', str(CHROMIUM), *args],
            pass_fds=(cmd_read, out_write),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(cmd_read)
        os.close(out_write)
        self._buffer, self._next = b"", 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        self.page("Page.enable")
        self.page("Network.enable")
        self.page(
            "Emulation.setDeviceMetricsOverride",
            width=WIDTH,
            height=HEIGHT,
            deviceScaleFactor=1,
            mobile=False,
        )

    def _message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._out], [], [], left)[0]:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._out, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(
        self, method: str, session: str | None = None, timeout: float = 60, **params: Any
    ) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._cmd, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._message(deadline)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def page(self, method: str, **params: Any) -> dict[str, Any]:
        return self.call(method, session=self.session, **params)

    def wait_event(self, method: str, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            for i, event in enumerate(self.events):
                if event.get("method") == method:
                    return self.events.pop(i)
            self.events.append(self._message(deadline))

    def open(self, page: Path, timeout: float = 60) -> None:
        """Load a file and wait for its load event (the report renders before it)."""
        self.events.clear()
        self.page("Page.navigate", url=page.resolve().as_uri())
        self.wait_event("Page.loadEventFired", timeout)

    def js(self, expression: str) -> Any:
        result = self.page(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        """A real mouse click (pressed + released) at the centre of the first match."""
        box = self.js(
            f"(function () {{ var e = document.querySelector({json.dumps(selector)});"
            " e.scrollIntoView({block: 'center'}); var r = e.getBoundingClientRect();"
            " return [r.left + r.width / 2, r.top + r.height / 2]; })()"
        )
        for kind in ("mousePressed", "mouseReleased"):
            self.page(
                "Input.dispatchMouseEvent",
                type=kind,
                x=box[0],
                y=box[1],
                button="left",
                clickCount=1,
            )

    def type_text(self, selector: str, text: str) -> None:
        self.js(f"document.querySelector({json.dumps(selector)}).focus()")
        self.page("Input.insertText", text=text)

    def requests(self) -> list[str]:
        """URLs of every request the page made since it was opened."""
        return [
            e["params"]["request"]["url"]
            for e in self.events
            if e.get("method") == "Network.requestWillBeSent"
        ]

    def screenshot(self) -> bytes:
        return base64.b64decode(self.page("Page.captureScreenshot", format="png")["data"])

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self.call("Browser.close", timeout=10)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._cmd)
        os.close(self._out)
        shutil.rmtree(self.profile, ignore_errors=True)


def png_pixels(data: bytes) -> np.ndarray:
    """Decode an 8-bit RGB/RGBA PNG (what Chromium writes) to an (h, w, 3) array."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, [], None
    while pos < len(data):
        (size,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + size]
        pos += 12 + size
        if kind == b"IHDR":
            header = struct.unpack(">IIBB", body[:10])
        elif kind == b"IDAT":
            idat.append(body)
    assert header is not None, "PNG without IHDR"
    width, height, depth, color = header
    assert depth == 8 and color in (2, 6), f"unexpected PNG depth {depth} / colour type {color}"
    bpp = 3 if color == 2 else 4
    stride = width * bpp
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), dtype=np.uint8)
    raw = raw.reshape(height, stride + 1)
    out = np.zeros((height, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.uint8)
    for r in range(height):
        kind, line = int(raw[r, 0]), raw[r, 1:]
        if kind == 0:
            out[r] = line
        elif kind == 1:
            out[r] = np.cumsum(line.reshape(width, bpp), axis=0, dtype=np.uint8).reshape(stride)
        elif kind == 2:
            out[r] = line + prev
        else:
            out[r] = _unfilter_sequential(kind, line.tolist(), prev.tolist(), bpp)
        prev = out[r]
    return out.reshape(height, width, bpp)[:, :, :3]


def _unfilter_sequential(kind: int, line: list[int], up: list[int], bpp: int) -> list[int]:
    """PNG filters 3 (average) and 4 (Paeth) depend on the pixel to the left."""
    row = [0] * len(line)
    for i, x in enumerate(line):
        a = row[i - bpp] if i >= bpp else 0
        b = up[i]
        if kind == 3:
            row[i] = (x + (a + b) // 2) & 255
            continue
        c = up[i - bpp] if i >= bpp else 0
        p = a + b - c
        pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
        row[i] = (x + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    return row


def colour_stats(data: bytes) -> tuple[int, float]:
    """Distinct colours in a screenshot, and the share of its most common colour."""
    px = png_pixels(data).astype(np.uint32)
    packed = (px[:, :, 0] << 16) | (px[:, :, 1] << 8) | px[:, :, 2]
    _, counts = np.unique(packed, return_counts=True)
    return len(counts), float(counts.max()) / packed.size
