"""The browser toolset against a real headless Chromium (Debian's, through Playwright) and a local web app:
a form filled in and submitted, navigation, scrolling, images, console, the URL policy, one context per
task closed with it (checked in the process list), and a relaunch after the browser dies."""

from __future__ import annotations

import os
import re
import shutil
import signal
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hermes_exp.errors import ToolError
from hermes_exp.tools.browser import BrowserSession
from hermes_exp.tools.browser_runtime import Chromium, UrlPolicy
from tests.webapp import WebApp

pytest.importorskip("playwright", reason="pip install 'hermes-exp[browser]'")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not shutil.which("chromium"), reason="apt-get install chromium")]


def processes() -> dict[int, tuple[int, list[str]]]:
    """pid -> (parent pid, argv) of every process on the host."""
    table = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().decode("utf-8", "replace").split("\0")
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            table[int(entry.name)] = (ppid, argv)
    return table


def browser_pids(marker: str) -> list[int]:
    return [pid for pid, (_, argv) in processes().items() if marker in argv]


def renderers(marker: str) -> int:
    """Renderer processes under the browser started with `marker` (one or more per open page)."""
    table = processes()
    tree = set(browser_pids(marker))
    grew = True
    while grew:
        below = {pid for pid, (ppid, _) in table.items() if ppid in tree} - tree
        grew, tree = bool(below), tree | below
    return sum(1 for pid in tree if "--type=renderer" in " ".join(table[pid][1]))  # children rewrite argv


def eventually(check, within: float = 15.0) -> bool:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.fixture(scope="module")
def marker() -> str:
    return f"--hx-test-browser={uuid.uuid4().hex[:12]}"  # Chromium ignores switches it does not know


@pytest.fixture(scope="module")
def chromium(marker: str) -> Iterator[Chromium]:
    browser = Chromium(args=["--no-sandbox", "--disable-dev-shm-usage", marker])
    yield browser
    browser.stop()
    assert eventually(lambda: not browser_pids(marker)), "the browser outlived stop()"


@pytest.fixture(scope="module")
def app() -> Iterator[WebApp]:
    with WebApp() as web:
        yield web


@pytest.fixture
def session(chromium: Chromium) -> Iterator[BrowserSession]:
    s = BrowserSession(chromium, UrlPolicy(denied=["http://127.0.0.2:*"]), action_timeout=5, navigation_timeout=15)
    yield s
    s.close()


def ref(snapshot: str, role: str, name: str) -> str:
    match = re.search(rf'{role} "{re.escape(name)}"[^\n]*\[ref=((?:f\d+)?e\d+)\]', snapshot)
    assert match, snapshot
    return "@" + match.group(1)


def test_fill_in_and_submit_a_form(session: BrowserSession, app: WebApp) -> None:
    page = session.call("browser_navigate", {"url": app.url + "/"})
    assert page["title"] == "Sign up" and page["status"] == 200 and page["error"] is None
    name = ref(page["snapshot"], "textbox", "Name")
    session.call("browser_type", {"ref": name, "text": "Alice"})
    snap = session.call("browser_snapshot", {})["snapshot"]
    session.call("browser_type", {"ref": ref(snap, "textbox", "City")[1:], "text": "Paris"})  # 'e5' works too
    done = session.call("browser_click", {"ref": ref(snap, "button", "Send")})
    assert done["url"] == app.url + "/submit" and done["title"] == "Thanks"
    assert app.submissions[-1] == {"name": ["Alice"], "city": ["Paris"]}
    assert "Thanks, Alice from Paris" in session.call("browser_snapshot", {"full": True})["snapshot"]


def test_enter_submits_and_back_returns(session: BrowserSession, app: WebApp) -> None:
    snap = session.call("browser_navigate", {"url": app.url + "/"})["snapshot"]
    session.call("browser_type", {"ref": ref(snap, "textbox", "Name"), "text": "Bob"})
    assert session.call("browser_press", {"key": "Enter"})["title"] == "Thanks"
    assert app.submissions[-1]["name"] == ["Bob"]
    back = session.call("browser_back", {})
    assert back["title"] == "Sign up" and 'textbox "Name"' in back["snapshot"]
    about = session.call("browser_click", {"ref": ref(back["snapshot"], "link", "About us")})
    assert about["url"].endswith("/about")


def test_scroll_images_and_console(session: BrowserSession, app: WebApp) -> None:
    session.call("browser_navigate", {"url": app.url + "/"})
    down = session.call("browser_scroll", {"direction": "down"})
    assert down["scroll_y"] > 0
    assert session.call("browser_scroll", {"direction": "up"})["scroll_y"] < down["scroll_y"]
    images = session.call("browser_get_images", {})["images"]
    assert [(i["alt"], i["src"]) for i in images] == [("a cat", app.url + "/cat.png")]
    assert eventually(lambda: any(m["type"] == "exception" for m in session.console))
    console = session.call("browser_console", {"expression": "document.title + ' ' + (1 + 2)", "clear": True})
    assert {"type": "log", "text": "hello from the form page"} in console["messages"]
    assert {"type": "warning", "text": "careful"} in console["messages"]
    assert any("boom later" in m["text"] for m in console["messages"] if m["type"] == "exception")
    assert console["result"] == '"Sign up 3"'
    assert session.call("browser_console", {})["messages"] == []


def test_vision_screenshot_with_and_without_labels(session: BrowserSession, app: WebApp) -> None:
    session.call("browser_navigate", {"url": app.url + "/"})
    plain = session.call("browser_vision", {"question": "what is here?"})
    labelled = session.call("browser_vision", {"question": "what is here?", "annotate": True})
    assert plain["title"] == "Sign up" and plain["annotated"] is False and labelled["annotated"] is True
    for shot in (plain["png"], labelled["png"]):
        assert shot.startswith(b"\x89PNG") and struct.unpack(">II", shot[16:24]) == (1280, 720)
    assert plain["png"] != labelled["png"]  # the [N] labels are drawn on the page ...
    again = session.call("browser_vision", {"question": "what is here?"})
    assert again["png"] == plain["png"]  # ... and taken off again after the screenshot
    assert session.call("browser_console", {"expression": "document.getElementById('__hx_labels')"})["result"] == "null"


def test_url_policy(chromium: Chromium, app: WebApp) -> None:
    allowed_only = BrowserSession(chromium, UrlPolicy(allowed=[app.url + "/*"], denied=[app.url + "/about*"]))
    try:
        assert allowed_only.call("browser_navigate", {"url": app.url + "/"})["title"] == "Sign up"
        for url in ("http://127.0.0.1:1/", app.url + "/about", "file:///etc/passwd", "chrome://version"):
            with pytest.raises(ToolError, match="policy|not among|only http"):
                allowed_only.call("browser_navigate", {"url": url})
        with pytest.raises(ToolError, match="ERR_BLOCKED_BY_CLIENT"):  # a redirect is checked too
            allowed_only.call("browser_navigate", {"url": app.url + "/to-denied"})
        snap = allowed_only.call("browser_navigate", {"url": app.url + "/"})["snapshot"]
        clicked = allowed_only.call("browser_click", {"ref": ref(snap, "link", "About us")})  # so is a link
        assert clicked["title"] != "About" and not clicked["url"].endswith("/about")
    finally:
        allowed_only.close()


def test_private_addresses_blocked_unless_trusted(chromium: Chromium, app: WebApp) -> None:
    blocked = BrowserSession(chromium, UrlPolicy(block_private=True))
    trusting = BrowserSession(chromium, UrlPolicy(block_private=True, trusted=[app.url]))
    try:
        with pytest.raises(ToolError, match="private/local address"):
            blocked.call("browser_navigate", {"url": app.url.replace("127.0.0.1", "localhost") + "/"})
        assert trusting.call("browser_navigate", {"url": app.url + "/"})["title"] == "Sign up"
        with pytest.raises(ToolError, match="private/local address"):  # trusted means that server only
            trusting.call("browser_navigate", {"url": "http://127.0.0.3:8081/"})
    finally:
        blocked.close()
        trusting.close()


def test_trust_is_by_origin_not_by_prefix(chromium: Chromium, app: WebApp) -> None:
    """`http://TRUSTED@other/` names `other` (TRUSTED is its user name): it must not pass for the trusted server."""
    trusting = BrowserSession(chromium, UrlPolicy(block_private=True, trusted=[app.url]))
    try:
        with WebApp() as other:
            smuggled = app.url + "@" + other.url.removeprefix("http://") + "/"
            with pytest.raises(ToolError, match="private/local address"):
                trusting.call("browser_navigate", {"url": smuggled})
            with pytest.raises(ToolError, match="private/local address"):  # another port of the trusted host
                trusting.call("browser_navigate", {"url": other.url + "/"})
        assert trusting.call("browser_navigate", {"url": app.url + "/"})["title"] == "Sign up"
    finally:
        trusting.close()


def test_bad_calls_are_tool_errors(session: BrowserSession, app: WebApp) -> None:
    with pytest.raises(ToolError, match="browser_navigate first"):
        session.call("browser_click", {"ref": "@e1"})
    session.call("browser_navigate", {"url": app.url + "/"})
    with pytest.raises(ToolError, match="element reference"):
        session.call("browser_click", {"ref": "the send button"})
    with pytest.raises(ToolError, match="browser_click failed"):
        session.call("browser_click", {"ref": "@e999"})
    with pytest.raises(ToolError, match="direction"):
        session.call("browser_scroll", {"direction": "sideways"})


def test_one_context_per_task_closed_with_it(chromium: Chromium, app: WebApp, marker: str) -> None:
    warm = BrowserSession(chromium, UrlPolicy())  # the browser is up before the baseline is taken
    warm.call("browser_navigate", {"url": app.url + "/about"})
    warm.close()
    assert eventually(lambda: chromium.contexts() == 0)
    baseline = renderers(marker)
    tasks = [BrowserSession(chromium, UrlPolicy()) for _ in range(3)]
    for task in tasks:
        task.call("browser_navigate", {"url": app.url + "/"})
    assert chromium.contexts() >= 3 and renderers(marker) >= baseline + 3
    for task in tasks:
        task.close()
        task.close()  # twice is harmless
    assert chromium.contexts() == 0
    assert eventually(lambda: renderers(marker) <= baseline), "a closed task's pages kept running"


def test_relaunched_after_the_browser_dies(chromium: Chromium, app: WebApp, marker: str) -> None:
    first = BrowserSession(chromium, UrlPolicy())
    first.call("browser_navigate", {"url": app.url + "/"})
    launches = chromium.launches
    for pid in browser_pids(marker):
        os.kill(pid, signal.SIGKILL)
    assert eventually(lambda: not browser_pids(marker))
    with pytest.raises(ToolError):
        first.call("browser_snapshot", {})
    again = first.call("browser_navigate", {"url": app.url + "/about"})  # the same task carries on
    assert again["title"] == "About" and chromium.launches == launches + 1
    second = BrowserSession(chromium, UrlPolicy())
    assert second.call("browser_navigate", {"url": app.url + "/"})["title"] == "Sign up"
    first.close()
    second.close()
    assert len(browser_pids(marker)) == 1
