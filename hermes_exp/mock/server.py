"""Deterministic offline OpenAI-compatible chat-completions server that really calls the tools it is offered.

Run `python -m hermes_exp.mock --port 0`, or use `MockServer` as a context manager in tests.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from hermes_exp.mock import pages as mock_pages
from hermes_exp.errors import ConfigError
from hermes_exp.mock import services as mock_services
from hermes_exp.mock.cache import PromptCache
from hermes_exp.mock.faults import CHANGES, RESET, Faults, Reply, add_accounting, error_payload as _error
from hermes_exp.mock.model import canon as _canon, completion as _completion, digest as _digest, draw as _draw
from hermes_exp.mock.tokens import with_tokens

_SECRET_HEADERS = {"authorization", "api-key", "x-api-key", "proxy-authorization"}
_CHAT_PATH = "/v1/chat/completions"


class _Server(ThreadingHTTPServer):
    """Threaded HTTP server that tracks open connections so `stop` can also end idle keep-alive ones."""

    daemon_threads = True
    request_queue_size = 256  # the default backlog of 5 refuses bursts of concurrent clients

    def __init__(self, address: tuple[str, int], mock: MockServer) -> None:
        super().__init__(address, _Handler)
        self.mock = mock
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self._connections_lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):  # the client may have closed it already
                conn.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet when a client drops its connection; chat-handling bugs already answer 500."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the openai client pools connections
    disable_nagle_algorithm = True  # headers and body are separate writes; Nagle would add ~40 ms each
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: access lines would flood test and experiment output."""

    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        path = path.rstrip("/")
        served = mock_pages.page("GET", path)
        if served:
            return self._send_page(served)
        if path == "/v1/models":
            model = {"id": "mock", "object": "model", "created": 0, "owned_by": "hermes_exp"}
            self._send((200, {"object": "list", "data": [model]}, {}))
        elif path == "/health":
            self._send((200, {"status": "ok"}, {}))
        elif not self._service(path, query, b""):
            self._send(_not_found(self.command, path))

    def do_POST(self) -> None:
        try:
            raw = self.rfile.read(max(0, int(self.headers.get("Content-Length") or 0)))
        except ValueError:
            self.close_connection = True  # unknown body length: the stream can no longer be trusted
            return self._send(_bad_request("invalid Content-Length header", "bad_length"))
        path, _, query = self.path.partition("?")
        path = path.rstrip("/")
        served = mock_pages.page("POST", path, raw)
        if served:
            return self._send_page(served)
        if path != _CHAT_PATH:
            return None if self._service(path, query, raw) else self._send(_not_found(self.command, path))
        try:
            reply = self.server.mock._handle_chat(raw, {k.lower(): v for k, v in self.headers.items()})
        except Exception as exc:  # a mock bug must answer 500, not kill the connection
            reply = 500, _error(f"mock server bug: {exc!r}", "server_error", "mock_bug"), {}
        if reply[0] == RESET:  # an injected connection reset: no answer at all
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        self._send(reply)

    def _service(self, path: str, query: str, raw: bytes) -> bool:
        """Search, images and the small web site (mock_services.py); False when no such route."""
        root = self.server.mock.base_url.removesuffix("/v1")
        found = mock_services.answer(self.command, path, query, raw, root)
        if found is None:
            return False
        self._send_page(found)
        return True

    def _send_page(self, served: tuple[int, str, bytes]) -> None:
        self._write(*served)

    def _send(self, reply: Reply) -> None:
        status, payload, headers = reply
        data = payload if isinstance(payload, bytes) else json.dumps(payload, ensure_ascii=False).encode()
        self._write(status, "application/json", data, headers)

    def _write(self, status: int, content_type: str, data: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)


def _bad_request(message: str, code: str) -> Reply:
    return 400, _error(message, "invalid_request_error", code), {}


def _not_found(method: str, path: str) -> Reply:
    message = (f"no route for {method} {path}; use POST {_CHAT_PATH}, GET /v1/models, GET /health, GET /search, "
               "POST /v1/images/generations or GET /site/")
    return 404, _error(message, "invalid_request_error", "not_found"), {}


class MockServer:
    """Serves deterministic chat completions on a background thread; usable as a context manager."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, latency_ms: float = 0.0, fail_rate: float = 0.0,
                 bad_tool_rate: float = 0.0, no_reasoning_rate: float = 0.0, seed: int = 0,
                 record_path: str | None = None, faults: dict[str, Any] | None = None,
                 usage_cost: dict[str, float] | None = None, provider_name: str | None = None,
                 summary_chars: int = 60) -> None:
        """`faults`: see mock_faults.Faults. `usage_cost`: USD per 1M prompt/completion tokens, reported as
        `usage.cost`; `provider_name`: reported as the upstream `provider` (both as OpenRouter does)."""
        for name, rate in (("fail_rate", fail_rate), ("bad_tool_rate", bad_tool_rate),
                           ("no_reasoning_rate", no_reasoning_rate)):
            if not 0.0 <= rate <= 1.0:
                raise ConfigError(f"{name}={rate} is not a probability", "use a value between 0 and 1")
        self.host, self.port, self.latency_ms, self.seed = host, port, latency_ms, seed
        self.fail_rate, self.bad_tool_rate, self.no_reasoning_rate = fail_rate, bad_tool_rate, no_reasoning_rate
        self.record_path = record_path
        self.base_url = ""
        self.request_count = 0
        self.faults = Faults(**(faults or {}))
        self.usage_cost, self.provider_name = usage_cost, provider_name
        self.cache = PromptCache()  # cache_control breakpoints seen: later requests read their prefixes
        self.summary_chars = summary_chars  # characters of each turn a summary keeps (mock_model._summary)
        self.in_flight = self.max_in_flight_seen = 0
        self._attempts: dict[str, int] = {}  # body hash -> times seen, so failures clear on retry
        self._lock = threading.Lock()
        self._record_lock = threading.Lock()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> str:
        if self._httpd is None:
            self._httpd = _Server((self.host, self.port), self)
            port = self._httpd.server_address[1]
            url_host = "127.0.0.1" if self.host in ("", "0.0.0.0") else self.host
            self.base_url = f"http://{url_host}:{port}/v1"
            self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                            name="mock-server", daemon=True)
            self._thread.start()
        return self.base_url

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.close_connections()
        httpd.server_close()  # joins the handler threads, which the closed connections let finish
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> MockServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _handle_chat(self, raw: bytes, headers: dict[str, str]) -> Reply:
        with self._lock:
            number = self.request_count
            self.request_count += 1
            self.in_flight += 1
            in_flight = self.in_flight
            self.max_in_flight_seen = max(self.max_in_flight_seen, in_flight)
        try:
            if self.latency_ms > 0:
                time.sleep(self.latency_ms / 1000)
            body, reply = self._answer(raw, headers, number, in_flight)
            usage = reply[1].get("usage") if reply[0] == 200 and isinstance(reply[1], dict) else None
            self._record(reply[0], body, headers, in_flight, usage)
            return reply
        finally:
            with self._lock:
                self.in_flight -= 1

    def _answer(self, raw: bytes, headers: dict[str, str], number: int, in_flight: int) -> tuple[Any, Reply]:
        try:
            body = json.loads(raw)
        except ValueError:  # includes undecodable bytes
            return raw.decode("utf-8", "replace"), _bad_request("request body is not valid JSON", "invalid_json")
        if not isinstance(body, dict):
            return body, _bad_request("request body must be a JSON object", "invalid_body")
        if body.get("stream"):
            return body, _bad_request("stream=true is not supported by the mock server; send stream=false",
                                      "stream_unsupported")
        fault = self.faults.pick(number, in_flight, body, headers)
        failure = (self.faults.reply(fault, headers) if fault else None) or self._failure(body)
        if failure is not None:
            return body, failure
        if fault == "timeout":
            time.sleep(self.faults.hang_seconds)
        completion = _completion(body, self.seed, self.bad_tool_rate, self.no_reasoning_rate, self.summary_chars,
                                 self.base_url.removesuffix("/v1"))
        cached = self.cache.usage(body)
        if cached:
            completion["usage"]["prompt_tokens_details"] = cached
        if fault in CHANGES:
            completion = CHANGES[fault](completion)
        completion = with_tokens(body, completion)  # of the message as finally answered
        return body, (200, add_accounting(completion, self.usage_cost, self.provider_name), {})

    def _failure(self, body: dict[str, Any]) -> Reply | None:
        """An injected 429/500, drawn per (body, attempt) so that retrying the same request can succeed."""
        if self.fail_rate <= 0:
            return None
        key = _digest(_canon(body))
        with self._lock:
            attempt = self._attempts.get(key, 0)
            self._attempts[key] = attempt + 1
        draw = _draw(self.seed, key, attempt, "fail")
        if draw.random() >= self.fail_rate:
            return None
        if draw.random() < 0.5:
            error = _error("injected rate limit; retry the request", "rate_limit_exceeded", "rate_limit_exceeded")
            return 429, error, {"Retry-After": "0", "retry-after-ms": "50"}  # openai skips a 0 s retry-after
        return 500, _error("injected server error; retry the request", "server_error", "server_error"), {}

    def _record(self, status: int, body: Any, headers: dict[str, str], in_flight: int,
                usage: dict[str, Any] | None = None) -> None:
        if not self.record_path:
            return
        kept = {k: v for k, v in headers.items() if k not in _SECRET_HEADERS}
        record = {"t": time.time(), "status": status, "in_flight": in_flight, "body": body, "headers": kept,
                  "usage": usage}
        line = json.dumps(record, ensure_ascii=False, default=str)
        with self._record_lock, open(self.record_path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hermes_exp.mock", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    for flag in ("--fail-rate", "--bad-tool-rate", "--no-reasoning-rate"):
        parser.add_argument(flag, type=float, default=0.0, help="probability between 0 and 1")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--record", default=None, help="append one JSON line per chat request to this file")
    parser.add_argument("--faults", type=json.loads, default=None,
                        help='JSON, e.g. \'{"max_in_flight": 4, "script": ["429", "ok", "reset"]}\'')
    args = parser.parse_args(argv)
    try:
        server = MockServer(args.host, args.port, args.latency_ms, args.fail_rate, args.bad_tool_rate,
                            args.no_reasoning_rate, args.seed, args.record, faults=args.faults)
    except ConfigError as exc:
        parser.error(str(exc))
    stopping = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.set())
    with server:
        print(server.base_url, flush=True)
        while not stopping.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
