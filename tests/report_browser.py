"""Headless Chromium for the report test, driven by Playwright (Debian's `chromium` through
`executable_path`; nothing is downloaded): opens a page, evaluates JavaScript, records console errors,
uncaught exceptions and every request, and takes screenshots."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        if path := shutil.which(name):
            return path
    return None


class Browser:
    """One headless Chromium with one page at a time; use as a context manager."""

    def __init__(self, binary: str, timeout: float = 30.0) -> None:
        self.binary, self.timeout = binary, timeout
        self._errors: list[str] = []
        self._requests: list[str] = []
        self._page: Any = None

    def __enter__(self) -> "Browser":
        from playwright.sync_api import sync_playwright

        self._pw = sync_playwright().start()
        self._browser = self._pw.chromium.launch(executable_path=self.binary, headless=True,
                                                 args=["--no-sandbox", "--disable-gpu"])
        return self

    def __exit__(self, *exc: object) -> None:
        self._browser.close()
        self._pw.stop()

    def open(self, url: str, width: int = 1280, height: int = 900) -> None:
        if self._page is not None:
            self._page.context.close()
        self._errors, self._requests = [], []
        context = self._browser.new_context(viewport={"width": width, "height": height})
        context.set_default_timeout(self.timeout * 1000)
        page = context.new_page()
        page.on("console", lambda m: m.type in ("error", "assert") and self._errors.append(f"console: {m.text}"))
        page.on("pageerror", lambda e: self._errors.append(f"exception: {e}"))
        page.on("request", lambda r: self._requests.append(r.url))
        page.goto(url, wait_until="load")
        self._page = page

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression (statements allowed: the last one's value)."""
        return self._page.evaluate("(source) => (0, eval)(source)", expression)

    def screenshot(self, path: Path, full_page: bool = False) -> Path:
        self._page.screenshot(path=str(path), full_page=full_page)
        return path

    def problems(self) -> list[str]:
        return list(self._errors)

    def requested_urls(self) -> list[str]:
        return list(self._requests)
