"""A small Chrome DevTools Protocol client over `--remote-debugging-pipe` (no websocket library):
launches headless Chromium, opens a page, evaluates JavaScript, records console errors, uncaught
exceptions and network requests, and takes screenshots."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--remote-debugging-pipe"]


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        if path := shutil.which(name):
            return path
    return None


class Browser:
    """One headless Chromium with one page; use as a context manager."""

    def __init__(self, binary: str, profile: Path, timeout: float = 30.0) -> None:
        self.timeout = timeout
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        # Chromium reads commands on fd 3 and writes replies on fd 4: move our ends out of the way first.
        high_r, high_w = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_child_r, from_child_w))
        os.close(to_child_r), os.close(from_child_w)

        def wire() -> None:
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.proc = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, preexec_fn=wire, pass_fds=(3, 4))
        os.close(high_r), os.close(high_w)
        self._replies: dict[int, queue.Queue] = {}
        self.events: list[dict[str, Any]] = []
        self._next_id = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        self.session = self._attach()

    # -- protocol ------------------------------------------------------------------------------
    def _read(self) -> None:
        buffer = b""
        while chunk := os.read(self._from_child, 1 << 16):
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            for raw in messages:
                message = json.loads(raw)
                if "id" in message:
                    self._replies.setdefault(message["id"], queue.Queue()).put(message)
                else:
                    with self._lock:
                        self.events.append(message)

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = "page") -> dict[str, Any]:
        self._next_id += 1
        msg_id = self._next_id
        message: dict[str, Any] = {"id": msg_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session if session == "page" else session
        reply_box = self._replies.setdefault(msg_id, queue.Queue())
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        reply = reply_box.get(timeout=self.timeout)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def _attach(self) -> str:
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=None)["targetId"]
        return self.send("Target.attachToTarget", {"targetId": target, "flatten": True}, session=None)["sessionId"]

    def wait_event(self, method: str, since: int = 0) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            with self._lock:
                found = [e for e in self.events[since:] if e.get("method") == method]
            if found:
                return found[0]
            time.sleep(0.02)
        raise TimeoutError(f"no {method} event within {self.timeout}s")

    # -- page ----------------------------------------------------------------------------------
    def open(self, url: str, width: int = 1280, height: int = 900) -> None:
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        mark = len(self.events)
        self.send("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired", since=mark)

    def evaluate(self, expression: str) -> Any:
        reply = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                               "awaitPromise": True})
        if "exceptionDetails" in reply:
            raise RuntimeError(f"{expression}: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def screenshot(self, path: Path, full_page: bool = False) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", params)["data"]))
        return path

    def problems(self) -> list[str]:
        """Uncaught exceptions, console.error/assert calls and error log entries, as text."""
        out = []
        with self._lock:
            events = list(self.events)
        for e in events:
            p = e.get("params", {})
            if e.get("method") == "Runtime.exceptionThrown":
                out.append(json.dumps(p.get("exceptionDetails"))[:500])
            elif e.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(json.dumps(p.get("args"))[:500])
            elif e.get("method") == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(json.dumps(p["entry"])[:500])
        return out

    def requested_urls(self) -> list[str]:
        with self._lock:
            return [e["params"]["request"]["url"] for e in self.events
                    if e.get("method") == "Network.requestWillBeSent"]

    # -- lifetime ------------------------------------------------------------------------------
    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.send("Browser.close", session=None)
        except (RuntimeError, queue.Empty, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_child)
