"""The browser a worker process shares across its tasks: one headless Chromium (the system's, through
Playwright's `executable_path`: nothing is downloaded), launched on first use on its own event loop and
launched again if it died; and the URL policy every page request of every task is checked against."""

from __future__ import annotations

import asyncio
import fnmatch
import ipaddress
import logging
import socket
from typing import Any
from urllib.parse import urlsplit

from hermes_exp.errors import ConfigError, ToolError
from hermes_exp.tools.aloop import LoopThread
from hermes_exp.tools.fetch import same_origin
from hermes_exp.optional import require

log = logging.getLogger(__name__)
INSTALL_HINT = "pip install 'hermes-exp[browser]' (Playwright; it drives the system Chromium, apt-get install chromium)"


def _playwright() -> Any:
    missing = ConfigError("the browser toolset needs the `playwright` package", INSTALL_HINT)
    return require("playwright.async_api", missing).async_playwright


class UrlPolicy:
    """Glob patterns on the whole URL (`*` matches anything, `/` included). A URL must match one
    allowed pattern (when any are given) and no denied one; only http(s) pages are ever opened. With
    `block_private`, hosts on loopback, private or link-local addresses are refused (the browser runs on
    the runner's host, so it could reach the runner's own networks), except URLs on a `trusted` server (same scheme, host and port)."""

    def __init__(self, allowed: list[str] | None = None, denied: list[str] | None = None,
                 block_private: bool = False, trusted: list[str] | None = None) -> None:
        self.allowed = [str(p) for p in allowed or []]
        self.denied = [str(p) for p in denied or []]
        self.block_private = bool(block_private)
        self.trusted = [str(t) for t in trusted or [] if t]

    def refusal(self, url: str) -> str | None:
        """Why `url` may not be loaded (by its text alone), or None."""
        scheme = urlsplit(url).scheme.lower()
        if scheme in ("data", "blob", "about"):
            return None  # in-page resources, not network requests
        if scheme not in ("http", "https"):
            return f"only http and https URLs can be opened, not {scheme or 'a relative URL'}: {url}"
        for pattern in self.denied:
            if fnmatch.fnmatchcase(url, pattern):
                return f"{url} is denied by the browser's URL policy (pattern {pattern!r})"
        if self.allowed and not any(fnmatch.fnmatchcase(url, p) for p in self.allowed):
            return f"{url} is not among the URLs the browser may open ({', '.join(self.allowed)})"
        return None

    async def refusal_resolved(self, url: str) -> str | None:
        """refusal(), then (with block_private) the addresses the host resolves to."""
        reason = self.refusal(url)
        if reason or not self.block_private or any(same_origin(url, t) for t in self.trusted):
            return reason
        host = urlsplit(url).hostname or ""
        if urlsplit(url).scheme.lower() not in ("http", "https"):
            return None
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except OSError:
            return None  # the browser reports the name error itself
        for info in infos:
            address = ipaddress.ip_address(info[4][0])
            if address.is_private or address.is_loopback or address.is_link_local or address.is_reserved:
                return (f"{url} resolves to {address}, a private/local address the browser may not open "
                        "(toolsets.browser.block_private)")
        return None

    async def check(self, url: str) -> None:
        reason = await self.refusal_resolved(url)
        if reason:
            raise ToolError(reason)


class Chromium:
    """One Chromium for this process, driven on `self.loop`: every call on it or on the contexts it
    opens runs there (`self.loop.run(...)` from a worker thread)."""

    def __init__(self, executable_path: str = "/usr/bin/chromium", headless: bool = True,
                 args: list[str] | None = None, launch_timeout: float = 60.0) -> None:
        self.executable_path = executable_path
        self.headless = bool(headless)
        self.args = [str(a) for a in (args if args is not None else ["--no-sandbox"])]
        self.launch_timeout = float(launch_timeout)
        self.loop = LoopThread("hx-browser")
        self.launches = 0
        self._pw: Any = None
        self._browser: Any = None
        self._launching: asyncio.Lock | None = None

    async def open_context(self, **options: Any) -> Any:
        """A new browser context (on the loop), launching the browser first if it is not running."""
        if self._launching is None:
            self._launching = asyncio.Lock()
        async with self._launching:  # tasks starting together share one launch
            browser = await self._ensure()
        return await browser.new_context(**options)

    async def _ensure(self) -> Any:
        if self._browser is not None and self._browser.is_connected():
            return self._browser
        if self._browser is not None:
            log.warning("the browser process died; launching a new one")
        if self._pw is None:
            self._pw = await _playwright()().start()
        try:
            self._browser = await self._pw.chromium.launch(
                executable_path=self.executable_path, headless=self.headless, args=self.args,
                timeout=self.launch_timeout * 1000)
        except Exception as exc:
            raise ToolError(f"cannot start Chromium at {self.executable_path}: {exc}") from exc
        self.launches += 1
        return self._browser

    def contexts(self) -> int:
        """How many browser contexts are open (each task's closes with it)."""
        browser = self._browser
        return len(browser.contexts) if browser is not None and browser.is_connected() else 0

    def stop(self) -> None:
        """Close the browser and the Playwright driver, then the loop. Safe to call twice."""
        async def close() -> None:
            browser, pw, self._browser, self._pw = self._browser, self._pw, None, None
            if browser is not None:
                try:
                    await browser.close()
                except Exception as exc:  # noqa: BLE001 - already dead is fine
                    log.debug("browser close: %s", exc)
            if pw is not None:
                await pw.stop()

        try:
            self.loop.run(close(), 30)
        except Exception as exc:  # noqa: BLE001 - stopping must not mask the run's own outcome
            log.warning("could not stop the browser cleanly: %s", exc)
        self.loop.stop()
