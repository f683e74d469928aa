"""Search backends for `web_search`, each one request/response shape, chosen in conf/toolset/web.yaml.

Every backend returns a list of `{"title", "url", "snippet"}`. Shapes (what is sent, what is read):

- SearXNG (and any SearXNG-compatible JSON API):
  `GET {url}?q=QUERY&format=json&pageno=1` (header `Authorization: Bearer KEY` only if `api_key_env` is
  set) -> `{"results": [{"title": ..., "url": ..., "content": ...}, ...]}`. The instance must allow the
  `json` format (`search.formats: [html, json]` in its settings.yml).
- Brave Search API: `GET {url}?q=QUERY&count=N` with headers `X-Subscription-Token: KEY` and
  `Accept: application/json` -> `{"web": {"results": [{"title", "url", "description"}, ...]}}`.
- Tavily: `POST {url}` with JSON `{"query": QUERY, "max_results": N}` and header
  `Authorization: Bearer KEY` -> `{"results": [{"title", "url", "content", "score"}, ...]}`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Protocol

from hermes_exp.errors import ToolError
from hermes_exp.tools import fetch

if TYPE_CHECKING:  # only annotations here; fetch imports httpx when a request is made
    import httpx


class SearchBackend(Protocol):
    """`missing(mock)` as in the Tool protocol; `search` raises ToolError on any failure."""

    def missing(self, mock: bool) -> str | None: ...

    def search(self, http: httpx.Client, query: str, limit: int, timeout: float,
               services: str | None) -> list[dict[str, str]]: ...


class _Backend:
    label = "search backend"
    key_required = True
    mock_path: str | None = None  # where the mock server answers in this backend's shape
    config_key = "the backend's settings"  # set by WebSearch, for messages

    def __init__(self, url: str | None = None, api_key_env: str | None = None) -> None:
        self.url, self.api_key_env = url, api_key_env

    def missing(self, mock: bool) -> str | None:
        if not self.url and not (mock and self.mock_path):
            return f"the {self.label} has no url: set {self.config_key}.url=http://HOST:PORT/search"
        if self.key_required and not (self.api_key_env and os.environ.get(self.api_key_env)):
            return (f"the {self.label} needs an API key: export {self.api_key_env or 'KEY'}=... "
                    f"(the variable is named by {self.config_key}.api_key_env)")
        return None

    def endpoint(self, services: str | None) -> str:
        if self.url:
            return self.url
        if services and self.mock_path:
            return services + self.mock_path
        raise ToolError(f"{self.label} is not configured: {self.missing(False)}")

    def key(self) -> str | None:
        return os.environ.get(self.api_key_env) if self.api_key_env else None

    def send(self, http: httpx.Client, method: str, url: str, timeout: float, **kwargs: Any) -> Any:
        return fetch.json_call(http, method, url, self.label, timeout, **kwargs)


def _results(items: Any, snippet_key: str, limit: int, label: str) -> list[dict[str, str]]:
    if not isinstance(items, list):
        raise ToolError(f"the {label} answered JSON without a results list")
    out = [{"title": str(i.get("title") or ""), "url": str(i.get("url") or ""),
            "snippet": str(i.get(snippet_key) or "")} for i in items if isinstance(i, dict) and i.get("url")]
    return out[:limit]


class SearXNG(_Backend):
    label = "SearXNG search backend"
    key_required = False
    mock_path = "/search"

    def search(self, http: httpx.Client, query: str, limit: int, timeout: float,
               services: str | None) -> list[dict[str, str]]:
        key = self.key()
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        body = self.send(http, "GET", self.endpoint(services), timeout, headers=headers,
                         params={"q": query, "format": "json", "pageno": 1})
        return _results((body or {}).get("results"), "content", limit, self.label)


class Brave(_Backend):
    label = "Brave search backend"

    def search(self, http: httpx.Client, query: str, limit: int, timeout: float,
               services: str | None) -> list[dict[str, str]]:
        headers = {"X-Subscription-Token": self.key() or "", "Accept": "application/json"}
        body = self.send(http, "GET", self.endpoint(services), timeout, headers=headers,
                         params={"q": query, "count": limit}) or {}
        return _results((body.get("web") or {}).get("results"), "description", limit, self.label)


class Tavily(_Backend):
    label = "Tavily search backend"

    def search(self, http: httpx.Client, query: str, limit: int, timeout: float,
               services: str | None) -> list[dict[str, str]]:
        body = self.send(http, "POST", self.endpoint(services), timeout,
                         headers={"Authorization": f"Bearer {self.key()}"}, json={"query": query, "max_results": limit})
        return _results((body or {}).get("results"), "content", limit, self.label)
