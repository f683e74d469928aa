"""Toolset `web`: `web_search` (a pluggable backend, tools/search.py) and `web_extract` (pages fetched
with httpx and turned into markdown by trafilatura). Both run on the runner's side of the sandbox: see
tools/fetch.py for what they can reach."""

from __future__ import annotations

from typing import Any

from hermes_exp.errors import ToolError
from hermes_exp.sandbox.base import truncate
from hermes_exp.tools import fetch
from hermes_exp.tools.base import ToolContext, function_schema, int_arg, text_arg
from hermes_exp.tools.search import SearchBackend

WEB_SEARCH = function_schema(
    "web_search", "Search the web. Returns titles, URLs and snippets of the top results.",
    {"query": {"type": "string", "description": "What to search for."},
     "limit": {"type": "integer", "description": "How many results (1-10, default 5)."}}, ["query"])
WEB_EXTRACT = function_schema(
    "web_extract", "Read web pages: fetch each URL and return its main text as markdown (HTML pages only).",
    {"urls": {"type": "array", "items": {"type": "string"}, "description": "Up to 5 http(s) URLs."}}, ["urls"])
HTML_TYPES = ("text/html", "application/xhtml+xml")
TEXT_TYPES = ("text/plain", "text/markdown")


class WebSearch:
    """`backend` names one of `backends` (each a SearchBackend built from its `_target_`)."""

    schema = WEB_SEARCH

    def __init__(self, backend: str, backends: dict[str, SearchBackend], max_results: int = 5,
                 timeout: float = 15.0) -> None:
        if backend not in backends:
            raise ValueError(f"web_search backend {backend!r} is not one of {', '.join(backends)}")
        self.name, self.backend = backend, backends[backend]
        for name, each in backends.items():
            each.config_key = f"toolsets.web.tools.web_search.backends.{name}"  # type: ignore[attr-defined]
        self.max_results, self.timeout = max_results, float(timeout)

    def missing(self, mock: bool) -> str | None:
        why = self.backend.missing(mock)
        return None if why is None else (f"{why}; or choose another backend with "
                                         "toolsets.web.tools.web_search.backend=searxng|brave|tavily")

    def __call__(self, ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        query = text_arg(args, "query")
        limit = int_arg(args, "limit", self.max_results, 1, 10)
        results = self.backend.search(fetch.client(ctx), query, limit, self.timeout, ctx.services)
        return {"query": query, "results": results, "error": None}


class WebExtract:
    """Limits per page: `timeout` seconds, `max_redirects`, `max_bytes` read, `max_chars` returned."""

    schema = WEB_EXTRACT

    def __init__(self, timeout: float = 20.0, max_redirects: int = 5, max_bytes: int = 2_000_000,
                 max_chars: int = 15_000, max_urls: int = 5, block_private: bool = True) -> None:
        self.timeout, self.max_redirects, self.max_bytes = float(timeout), int(max_redirects), int(max_bytes)
        self.max_chars, self.max_urls, self.block_private = int(max_chars), int(max_urls), bool(block_private)

    def missing(self, mock: bool) -> str | None:
        try:
            import trafilatura  # noqa: F401
        except ImportError:
            return "needs trafilatura: pip install trafilatura lxml_html_clean"
        return None

    def __call__(self, ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        urls = args.get("urls")
        if isinstance(urls, str):
            urls = [urls]
        if not isinstance(urls, list) or not urls or not all(isinstance(u, str) and u for u in urls):
            raise ToolError("'urls' must be a non-empty list of URL strings")
        if len(urls) > self.max_urls:
            raise ToolError(f"at most {self.max_urls} URLs per call, got {len(urls)}")
        results = [self._one(ctx, url) for url in urls]
        failed = [r for r in results if r["error"]]
        error = None if len(failed) < len(results) else "; ".join(r["error"] for r in failed)
        return {"results": results, "error": error}

    def _one(self, ctx: ToolContext, url: str) -> dict[str, Any]:
        try:
            page = fetch.get(ctx, url, timeout=self.timeout, max_bytes=self.max_bytes,
                             max_redirects=self.max_redirects, block_private=self.block_private,
                             headers={"Accept": "text/html,application/xhtml+xml;q=0.9,text/plain;q=0.5"})
            title, text = self._text(page)
        except ToolError as exc:
            return {"url": url, "title": None, "content": None, "error": str(exc)}
        content, cut = truncate(text, self.max_chars)
        return {"url": page.url, "title": title, "content": content, "truncated": cut, "error": None}

    def _text(self, page: fetch.Page) -> tuple[str | None, str]:
        if page.content_type not in HTML_TYPES + TEXT_TYPES:
            raise ToolError(f"{page.url} is {page.content_type or 'of no declared type'}, not an HTML page; "
                            "web_extract reads HTML and plain text only")
        html = page.body.decode(page.charset or "utf-8", "replace")
        if page.content_type in TEXT_TYPES:
            return None, html
        import trafilatura

        text = trafilatura.extract(html, url=page.url, output_format="markdown", include_links=True,
                                   include_tables=True, favor_recall=True, with_metadata=True)
        return _front_matter(text or "", page.url)


def _front_matter(text: str, url: str) -> tuple[str | None, str]:
    """trafilatura's markdown starts with a `---` block of metadata (one parse gives title and text)."""
    title = None
    if text.startswith("---\n") and "\n---\n" in text[4:]:
        head, text = text[4:].split("\n---\n", 1)
        for line in head.splitlines():
            if line.startswith("title: "):
                title = line[7:].strip()
    if not text.strip():
        raise ToolError(f"{url} has no readable text")
    return title, text
