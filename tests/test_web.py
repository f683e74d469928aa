"""The web toolset against real servers on 127.0.0.1: pages (a redirect loop, a huge page, a PDF), a
fake SearXNG, fake Brave and Tavily APIs; and the web tools' reach (private addresses refused)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from webfixtures import web_server

from hermes_exp.sandbox.local import LocalSandboxFactory
from hermes_exp.tools.base import Resources
from hermes_exp.tools.registry import Registry, Toolset
from hermes_exp.tools.search import Brave, SearXNG, Tavily
from hermes_exp.tools.toolbox import Toolbox
from hermes_exp.tools.web import WebExtract, WebSearch


@pytest.fixture(scope="module")
def server():
    with web_server() as s:
        yield s


@pytest.fixture
def box(tmp_path: Path):
    """A toolbox factory over a real local sandbox; shared resources closed at the end."""
    sandbox = LocalSandboxFactory(root=str(tmp_path)).open("v1:web", {})
    resources = Resources()

    def make(*tools, services: str | None = None) -> Toolbox:
        registry = Registry([Toolset("web", tools={t.schema["name"]: t for t in tools})])
        return Toolbox(registry, sandbox, {"max_output_chars": 20000}, resources, services)

    yield make
    resources.close()
    sandbox.close()


def call(toolbox: Toolbox, name: str, **args) -> dict:
    content, valid = toolbox.call(name, json.dumps(args), list(toolbox.registry.known_tools))
    assert valid
    return json.loads(content)


def extract(**settings) -> WebExtract:
    return WebExtract(**{"block_private": False, "timeout": 2, **settings})


def test_extract_turns_html_into_markdown_and_follows_a_redirect(server, box) -> None:
    out = call(box(extract()), "web_extract", urls=[server.root + "/hop"])
    page = out["results"][0]
    assert out["error"] is None and page["error"] is None
    assert page["url"] == server.root + "/article.html" and page["title"] == "River otters"
    assert page["content"].startswith("# River otters")
    assert "hold their breath for eight minutes" in page["content"]
    assert f"[sea otters]({server.root}/other.html)" in page["content"]  # links kept, made absolute
    assert "Copyright nobody" not in page["content"] and "Login" not in page["content"]  # boilerplate gone


def test_extract_refuses_loops_huge_pages_pdfs_and_slow_servers(server, box) -> None:
    toolbox = box(extract(max_redirects=3, max_bytes=1_000_000, timeout=1))
    urls = {"/loop": "more than 3 redirects", "/huge.html": "over the limit of 1,000,000",
            "/huge-streamed.html": "larger than the limit of 1,000,000", "/doc.pdf": "application/pdf, not an HTML page",
            "/slow.html": "did not answer within 1s", "/missing": "HTTP 404", "/empty.html": "no readable text"}
    out = call(toolbox, "web_extract", urls=[server.root + u for u in urls][:5])
    out2 = call(toolbox, "web_extract", urls=[server.root + u for u in urls][5:])
    results = out["results"] + out2["results"]
    for (path, needle), result in zip(urls.items(), results):
        assert result["content"] is None and needle in result["error"], (path, result)
    assert out["error"] and "application/pdf" in out["error"]  # every URL failed: the call failed
    loops = [r for r in server.requests if r["path"] == "/loop"]
    assert len(loops) == 4  # the first request and 3 redirects, then it gave up


def test_extract_keeps_good_pages_when_others_fail_and_reads_plain_text(server, box) -> None:
    out = call(box(extract()), "web_extract", urls=[server.root + "/doc.pdf", server.root + "/notes.txt"])
    assert out["error"] is None  # one page read: not a failed call
    assert out["results"][0]["error"] and out["results"][1]["content"] == "plain notes"


def test_extract_refuses_private_addresses_unless_allowed(server, box) -> None:
    out = call(box(WebExtract(timeout=2)), "web_extract", urls=[server.root + "/article.html"])
    assert "private or local address" in out["error"] and "block_private: false" in out["error"]
    assert "not an http(s) URL" in call(box(WebExtract()), "web_extract", urls=["file:///etc/passwd"])["error"]
    # The mock server of the offline demo is reachable (its origin is the run's services URL).
    allowed = call(box(WebExtract(timeout=2), services=server.root), "web_extract", urls=[server.root + "/article.html"])
    assert allowed["error"] is None


def test_the_allowed_origin_is_compared_whole(server, box) -> None:
    """`http://ALLOWED@other/` names `other` (ALLOWED is its user name); so trust is by origin, never by prefix."""
    toolbox = box(WebExtract(timeout=2), services=server.root)
    with web_server() as other:
        smuggled = server.root + "@" + other.root.removeprefix("http://") + "/article.html"
        assert "private or local address" in call(toolbox, "web_extract", urls=[smuggled])["error"]
        assert "private or local address" in call(toolbox, "web_extract", urls=[other.root + "/article.html"])["error"]
    bad_port = call(toolbox, "web_extract", urls=["http://127.0.0.1:99999/"])["error"]
    assert "port from 1 to 65535" in bad_port


def test_bad_arguments_are_tool_errors(box) -> None:
    toolbox = box(extract(max_urls=2), WebSearch("searxng", {"searxng": SearXNG(url="http://127.0.0.1:9/s")}))
    assert "non-empty list" in call(toolbox, "web_extract", urls=[])["error"]
    assert "at most 2 URLs" in call(toolbox, "web_extract", urls=["http://a", "http://b", "http://c"])["error"]
    assert "'query' must be a non-empty string" in call(toolbox, "web_search", query="")["error"]
    assert "cannot be reached" in call(toolbox, "web_search", query="x")["error"]


def test_searxng_backend(server, box) -> None:
    search = WebSearch("searxng", {"searxng": SearXNG(url=server.root + "/searxng/search")}, max_results=2)
    out = call(box(search), "web_search", query="river otters")
    assert out["error"] is None and [r["url"] for r in out["results"]] == ["https://example.org/otter/0",
                                                                            "https://example.org/otter/1"]
    assert out["results"][0] == {"title": "Otters 0", "url": "https://example.org/otter/0", "snippet": "snippet 0"}
    sent = server.requests[-1]
    assert sent["query"] == {"q": ["river otters"], "format": ["json"], "pageno": ["1"]}
    assert "authorization" not in sent["headers"]


def test_brave_backend_sends_its_key_from_the_named_variable(server, box, monkeypatch) -> None:
    backend = Brave(url=server.root + "/brave/search", api_key_env="HX_TEST_BRAVE")
    search = WebSearch("brave", {"brave": backend})
    assert "export HX_TEST_BRAVE=" in search.missing(mock=False)
    assert "HX_TEST_BRAVE" in search.missing(mock=True)  # the mock does not stand in for a commercial API
    monkeypatch.setenv("HX_TEST_BRAVE", "brave-test-key")
    assert search.missing(mock=False) is None
    out = call(box(search), "web_search", query="otters", limit=1)
    assert out["results"] == [{"title": "Brave result for otters", "url": "https://example.org/brave",
                               "snippet": "from brave"}]
    assert server.requests[-1]["query"] == {"q": ["otters"], "count": ["1"]}
    monkeypatch.setenv("HX_TEST_BRAVE", "wrong")
    assert "HTTP 401" in call(box(search), "web_search", query="otters")["error"]


def test_tavily_backend(server, box, monkeypatch) -> None:
    monkeypatch.setenv("HX_TEST_TAVILY", "tavily-test-key")
    search = WebSearch("tavily", {"tavily": Tavily(url=server.root + "/tavily/search", api_key_env="HX_TEST_TAVILY")})
    out = call(box(search), "web_search", query="otters", limit=3)
    assert out["results"][0]["url"] == "https://example.org/tavily"
    assert json.loads(server.requests[-1]["body"]) == {"query": "otters", "max_results": 3}


def test_searxng_missing_url_is_reported_with_the_key_to_set() -> None:
    search = WebSearch("searxng", {"searxng": SearXNG()})
    assert "toolsets.web.tools.web_search.backends.searxng.url=" in search.missing(mock=False)
    assert search.missing(mock=True) is None  # the mock server answers in SearXNG's shape
