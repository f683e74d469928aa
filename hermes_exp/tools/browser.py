"""Toolset `browser`: Hermes's browser tools on a Playwright page. Each task gets its own browser context
(cookies, storage, pages), opened at its first browser call and closed with the task; element references
come from Playwright's AI snapshot (`[ref=e5]`) and are accepted as `@e5`, `e5` or `ref=e5`."""

from __future__ import annotations

import asyncio
import json
import os
import re
from typing import Any
from urllib.parse import urljoin

from hermes_exp.errors import ToolError
from hermes_exp.sandbox.base import truncate
from hermes_exp.tools import browser_settings, browser_vision
from hermes_exp.tools.base import text_arg
from hermes_exp.tools.browser_runtime import Chromium, UrlPolicy
from hermes_exp.tools.browser_schemas import SCHEMAS

INTERACTIVE = {"button", "link", "textbox", "searchbox", "checkbox", "radio", "combobox", "listbox", "option",
               "menuitem", "menuitemcheckbox", "menuitemradio", "tab", "switch", "slider", "spinbutton", "heading"}
MAX_CONSOLE = 500
ERROR_PAGE_GRACE = 2.0  # seconds to wait for Chromium's error page after a failed navigation
NAVIGATION_GRACE = 0.5  # seconds after a click or key press in which a navigation it starts is awaited
_REF = re.compile(r"^(?:@|ref=|\[ref=)?((?:f\d+)?e\d+)\]?$")
_IMAGES_JS = ("Array.from(document.images).map(i => ({src: i.currentSrc || i.src, alt: i.alt || '', "
              "width: i.naturalWidth, height: i.naturalHeight}))")


def compact(snapshot: str) -> str:
    """The interactive elements (and headings) of an AI snapshot, one per line."""
    keep = []
    for line in snapshot.splitlines():
        item = line.strip().removeprefix("- ")
        role = item.split(" ", 1)[0].rstrip(":")
        if "[ref=" in item and role in INTERACTIVE:
            keep.append("- " + item.rstrip(":"))
    return "\n".join(keep)


class BrowserSession:
    """One task's browser. Every public method runs on the Chromium's loop and returns a tool result;
    Playwright errors become ToolErrors the model can read. close() never raises."""

    def __init__(self, chromium: Chromium, policy: UrlPolicy, *, action_timeout: float = 10.0,
                 navigation_timeout: float = 30.0, max_snapshot_chars: int = 15000) -> None:
        self._chromium, self._policy = chromium, policy
        self._action_ms, self._nav_ms = action_timeout * 1000, navigation_timeout * 1000
        self._max_chars = int(max_snapshot_chars)
        self._context: Any = None
        self._page: Any = None
        self.console: list[dict[str, Any]] = []

    def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        action = getattr(self, "_" + name.removeprefix("browser_"), None)
        if name not in SCHEMAS or action is None:
            raise ToolError(f"unknown browser tool {name!r}")
        if name != "browser_navigate" and self._page is None:
            raise ToolError("no page is open: call browser_navigate first")
        try:
            return self._chromium.loop.run(action(args), self._nav_ms / 1000 + 15)
        except ToolError:
            raise
        except TimeoutError as exc:
            raise ToolError(f"{name} did not finish: {exc}") from exc
        except Exception as exc:  # Playwright's errors: the page's problem, reported to the model
            raise ToolError(f"{name} failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from exc

    async def _route(self, route: Any) -> None:
        """Every request of the task's pages: refused URLs are aborted; redirects are fetched here
        without following, so each hop is checked before the browser is sent there."""
        if await self._policy.refusal_resolved(route.request.url):
            await route.abort("blockedbyclient")
            return
        if not route.request.is_navigation_request():
            await route.continue_()
            return
        try:
            response = await route.fetch(max_redirects=0)
        except Exception:  # noqa: BLE001 - unreachable host: let the browser report its own error
            await route.continue_()
            return
        location = response.headers.get("location")
        if 300 <= response.status < 400 and location and \
                await self._policy.refusal_resolved(urljoin(route.request.url, location)):
            await route.abort("blockedbyclient")
        else:
            await route.fulfill(response=response)

    async def _new_page(self) -> Any:
        await self._context.route("**/*", self._route)  # redirects, forms and sub-resources obey it too
        page = await self._context.new_page()
        page.set_default_timeout(self._action_ms)
        page.set_default_navigation_timeout(self._nav_ms)
        page.on("console", lambda m: self._log({"type": m.type, "text": m.text}))
        page.on("pageerror", lambda e: self._log({"type": "exception", "text": str(e)}))
        return page

    def _log(self, entry: dict[str, Any]) -> None:
        self.console = (self.console + [entry])[-MAX_CONSOLE:]

    async def _state(self, snapshot: bool = True) -> dict[str, Any]:
        page = self._page
        result = {"url": page.url, "title": await page.title(), "error": None}
        if snapshot:
            text, truncated = truncate(compact(await page.aria_snapshot(mode="ai")), self._max_chars)
            result.update(snapshot=text, truncated=truncated)
        return result

    def _locator(self, args: dict[str, Any]) -> Any:
        raw = str(args.get("ref") or "").strip()
        match = _REF.match(raw)
        if not match:
            raise ToolError(f"'ref' must be an element reference from browser_snapshot such as '@e5', not {raw!r}")
        return self._page.locator(f"aria-ref={match.group(1)}")

    async def _navigate(self, args: dict[str, Any]) -> dict[str, Any]:
        url = args.get("url")
        if not isinstance(url, str) or not url.strip():
            raise ToolError("'url' must be a non-empty string")
        await self._policy.check(url.strip())
        if self._context is None or not self._context.browser.is_connected():  # first call, or a crash
            self._context, self._page = await self._chromium.open_context(), None
        if self._page is None or self._page.is_closed():
            self._page = await self._new_page()
        try:
            response = await self._page.goto(url.strip(), wait_until="load")
        except Exception:
            # Chromium commits its error page a moment later: wait for it, or it cuts the next goto short.
            await self._quietly(self._page.wait_for_event("framenavigated", timeout=ERROR_PAGE_GRACE * 1000))
            raise
        return {**await self._state(), "status": response.status if response else None}

    async def _snapshot(self, args: dict[str, Any]) -> dict[str, Any]:
        text = await self._page.aria_snapshot(mode="ai")
        body, truncated = truncate(text if args.get("full") else compact(text), self._max_chars)
        return {**await self._state(snapshot=False), "snapshot": body, "truncated": truncated}

    async def _click(self, args: dict[str, Any]) -> dict[str, Any]:
        await self._acting(self._locator(args).click())
        return {**await self._state(snapshot=False), "clicked": args["ref"]}

    async def _type(self, args: dict[str, Any]) -> dict[str, Any]:
        text = args.get("text")
        if not isinstance(text, str):
            raise ToolError("'text' must be a string")
        await self._locator(args).fill(text)
        return {**await self._state(snapshot=False), "typed": text, "ref": args["ref"]}

    async def _scroll(self, args: dict[str, Any]) -> dict[str, Any]:
        direction = args.get("direction")
        if direction not in ("up", "down"):
            raise ToolError("'direction' must be 'up' or 'down'")
        sign = -1 if direction == "up" else 1
        y = await self._page.evaluate(f"() => {{ window.scrollBy(0, {sign} * window.innerHeight * 0.8); "
                                      "return window.scrollY; }")
        return {**await self._state(snapshot=False), "direction": direction, "scroll_y": y}

    async def _back(self, args: dict[str, Any]) -> dict[str, Any]:
        response = await self._page.go_back(wait_until="load")
        if response is None and self._page.url in ("", "about:blank"):
            raise ToolError("there is no previous page in this tab's history")
        return await self._state()

    async def _press(self, args: dict[str, Any]) -> dict[str, Any]:
        key = args.get("key")
        if not isinstance(key, str) or not key:
            raise ToolError("'key' must be a key name such as 'Enter', 'Tab' or 'ArrowDown'")
        await self._acting(self._page.keyboard.press(key))
        return {**await self._state(snapshot=False), "pressed": key}

    async def _get_images(self, args: dict[str, Any]) -> dict[str, Any]:
        images = await self._page.evaluate(_IMAGES_JS)
        return {**await self._state(snapshot=False), "images": images[:200], "count": len(images)}

    async def _vision(self, args: dict[str, Any]) -> dict[str, Any]:
        annotate = bool(args.get("annotate"))
        snapshot = await self._page.aria_snapshot(mode="ai") if annotate else ""
        png = await browser_vision.screenshot(self._page, compact(snapshot), annotate, self._action_ms)
        return {**await self._state(snapshot=False), "png": png, "annotated": annotate}

    async def _console(self, args: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = {**await self._state(snapshot=False), "messages": list(self.console)}
        expression = args.get("expression")
        if isinstance(expression, str) and expression.strip():
            value = await self._page.evaluate(expression)
            result["result"] = truncate(json.dumps(value, ensure_ascii=False, default=str), self._max_chars)[0]
        if args.get("clear"):
            self.console = []
        return result

    async def _acting(self, action: Any) -> None:
        """Run a click or key press; if it starts a navigation of the page, wait until that page has
        loaded (or its request failed), so the state returned is the new page's."""
        page, loop = self._page, asyncio.get_running_loop()
        started, ended = asyncio.Event(), loop.create_future()

        def on_request(request: Any) -> None:
            if request.is_navigation_request() and request.frame == page.main_frame:
                started.set()

        def on_end(what: Any) -> None:
            frame = getattr(what, "frame", what)
            if frame == page.main_frame and not ended.done():
                ended.set_result(None)

        page.on("request", on_request)
        page.on("framenavigated", on_end)
        page.on("requestfailed", on_end)
        try:
            await action
            try:
                await asyncio.wait_for(started.wait(), NAVIGATION_GRACE)
            except asyncio.TimeoutError:
                return  # the action did not navigate
            await asyncio.wait_for(ended, self._nav_ms / 1000)
            await page.wait_for_load_state("load")
        finally:
            for event, handler in (("request", on_request), ("framenavigated", on_end), ("requestfailed", on_end)):
                page.remove_listener(event, handler)

    @staticmethod
    async def _quietly(step: Any) -> None:
        try:
            await step
        except Exception:  # noqa: BLE001 - best effort
            pass

    def close(self) -> None:
        context, self._context, self._page = self._context, None, None
        if context is None:
            return
        try:
            self._chromium.loop.run(context.close(), 30)
        except Exception:  # noqa: BLE001 - a crashed browser took the context with it
            pass


class BrowserTool:
    """One browser tool (the Tool protocol of tools/base.py); conf/toolset/browser.yaml names the ten,
    all with the toolset's one `settings` block. The Chromium is the worker process's (`ctx.resources`),
    the session the task's (`ctx.task`), so it closes with the task. With block_private the mock
    server's site (`ctx.services`) stays reachable."""

    def __init__(self, name: str, settings: dict[str, Any] | None = None) -> None:
        if name not in SCHEMAS:
            raise ValueError(f"unknown browser tool {name!r}; known: {', '.join(SCHEMAS)}")
        self.schema = SCHEMAS[name]
        parsed = browser_settings.parse(settings)
        self._launch, self._policy, self._session = parsed.launch, parsed.policy, parsed.session
        from hermes_exp.tools.vision import VisionAnalyze

        self._vision = VisionAnalyze(model=parsed.vision_model)  # browser_vision's model

    def missing(self, mock: bool) -> str | None:
        try:
            import playwright  # noqa: F401
        except ImportError:
            return "needs the `playwright` package: pip install 'hermes-exp[browser]'"
        if self.schema["name"] == "browser_vision" and (why := self._vision.missing(mock)):
            return why.replace("toolsets.vision.tools.vision_analyze.model", "toolsets.browser.settings.vision_model")
        path = self._launch["executable_path"]
        if not os.access(path, os.X_OK):
            return f"no Chromium at {path}: apt-get install chromium, or set toolsets.browser.settings.executable_path"
        return None

    def __call__(self, ctx: Any, args: dict[str, Any]) -> dict[str, Any]:
        chromium = ctx.resources.get("browser", lambda: Chromium(**self._launch), Chromium.stop)
        policy = UrlPolicy(**self._policy, trusted=[ctx.services] if getattr(ctx, "services", None) else [])
        session = ctx.task.get("browser", lambda: BrowserSession(chromium, policy, **self._session),
                               BrowserSession.close)
        name = self.schema["name"]
        if name != "browser_vision":
            return session.call(name, args)
        question = text_arg(args, "question")
        return browser_vision.see(self._vision, ctx, session.call(name, args), question)
