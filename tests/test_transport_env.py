"""What the model client's HTTP stack takes from the environment and from the provider, on real loopback
servers: a proxy named by HTTP_PROXY carries the calls (a proxy answers for hosts the runner cannot
resolve itself), NO_PROXY bypasses it, and a cookie the provider sets is sent back with the next calls."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest
from httpd import QuietHandler
from test_deadlines import ANSWER
from test_providers import TOOLS, settings_for

from hermes_exp.model.client import ModelClient

CONTENT = ANSWER["choices"][0]["message"]["content"]


class _Recording(QuietHandler):
    """Answers every POST with a completion and a cookie; records each request's target and headers."""

    protocol_version = "HTTP/1.1"  # keep-alive, as providers do
    seen: list[tuple[str, dict[str, str]]]

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
        self._send(200, "application/json", json.dumps(ANSWER).encode(),
                   {"Set-Cookie": "route=node-7; Path=/"})


@pytest.fixture
def recorder() -> Iterator[tuple[str, list]]:
    handler = type("Handler", (_Recording,), {"seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", handler.seen
    finally:
        server.shutdown()
        server.server_close()


def _ask(base_url: str, calls: int = 1) -> list[str]:
    settings = settings_for("model.retry.max_attempts=1")
    client = ModelClient(settings["model"], settings["provider"], base_url, "sk-test")
    return [client.complete([{"role": "user", "content": "hi"}], TOOLS).message["content"] for _ in range(calls)]


def _no_proxy_env(monkeypatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


def test_calls_go_through_the_proxy_the_environment_names(recorder, monkeypatch) -> None:
    proxy, seen = recorder
    _no_proxy_env(monkeypatch)
    monkeypatch.setenv("HTTP_PROXY", proxy)
    assert _ask("http://model.invalid:8000/v1") == [CONTENT]  # no such host: only the proxy can answer
    [(target, headers)] = seen
    assert target == "http://model.invalid:8000/v1/chat/completions"  # a proxy's request line: the whole URL
    assert headers["authorization"] == "Bearer sk-test"


def test_no_proxy_sends_the_calls_to_the_endpoint_itself(recorder, monkeypatch) -> None:
    endpoint, seen = recorder
    _no_proxy_env(monkeypatch)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    assert _ask(endpoint + "/v1") == [CONTENT]
    assert [target for target, _ in seen] == ["/v1/chat/completions"]


def test_a_cookie_the_provider_sets_is_sent_back_once_with_the_next_calls(recorder, monkeypatch) -> None:
    endpoint, seen = recorder
    _no_proxy_env(monkeypatch)
    assert _ask(endpoint + "/v1", calls=3) == [CONTENT] * 3
    assert [headers.get("cookie") for _, headers in seen] == [None, "route=node-7", "route=node-7"]
