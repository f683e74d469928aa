"""The public APIs of openai and aiohttp that the model client relies on (model/transport.py,
model/client.py), each named: when a release changes one, this fails saying which, before any run does."""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
import tomllib
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

import aiohttp
import openai
from httpd import QuietHandler
from test_deadlines import ANSWER

from hermes_exp.model.transport import AttemptFailed, Transport

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def _major(version: str) -> int:
    return int(version.split(".")[0])


def test_the_installed_majors_are_the_ones_pyproject_pins() -> None:
    deps = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    for name, module in (("openai[aiohttp]", openai), ("aiohttp", aiohttp)):
        [spec] = [d for d in deps if d.startswith(name + ">=")]
        assert f"<{_major(module.__version__) + 1}" in spec, f"{name} {module.__version__} is outside {spec!r}"


def test_the_sdk_offers_its_aiohttp_client_and_the_calls_the_client_makes() -> None:
    http = openai.DefaultAioHttpClient()  # raises RuntimeError when the aiohttp extra is missing
    client = openai.AsyncOpenAI(api_key="sk-test", base_url="http://127.0.0.1:9/v1", max_retries=0,
                                http_client=http, default_headers={"X-Title": "t"}, timeout=700.0)
    post = inspect.signature(client.post).parameters
    assert {"cast_to", "content"} <= set(post), f"AsyncOpenAI.post takes {list(post)}"
    assert inspect.iscoroutinefunction(client.post) and inspect.iscoroutinefunction(client.close)
    assert callable(client.chat.completions.with_raw_response.create)  # the documented raw-response door
    assert issubclass(aiohttp.ClientResponseError, aiohttp.ClientError)  # what the transport catches
    asyncio.run(client.close())


class _Answer(QuietHandler):
    """200 with a completion for the body {"ok":1}; else 429 with Retry-After and an error object."""

    seen: list[tuple[str, str, bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.seen.append((self.path, self.headers.get("Authorization", ""), body))
        if body == b'{"ok":1}':
            return self._send(200, "application/json", json.dumps(ANSWER).encode())
        error = {"error": {"message": "slow down", "type": "rate_limit_exceeded"}}
        self._send(429, "application/json", json.dumps(error).encode(), {"Retry-After": "2"})


@pytest.fixture
def transport() -> Iterator[Transport]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Answer.seen = []
    try:
        yield Transport(f"http://127.0.0.1:{server.server_port}/v1", "sk-test", None, 10.0)
    finally:
        server.shutdown()
        server.server_close()


def test_a_post_of_raw_bytes_comes_back_as_raw_bytes_with_the_sdks_auth(transport: Transport) -> None:
    answer = transport.post(b'{"ok":1}')
    assert isinstance(answer, bytes) and json.loads(answer) == ANSWER
    assert _Answer.seen == [("/v1/chat/completions", "Bearer sk-test", b'{"ok":1}')]


def test_an_error_status_is_the_sdks_status_error_with_its_headers(transport: Transport) -> None:
    assert issubclass(openai.APITimeoutError, openai.APIConnectionError)
    with pytest.raises(AttemptFailed) as info:
        transport.post(b'{"ok":0}')
    failure = info.value.failure  # read from openai.RateLimitError: its status_code, message and response
    assert (failure.status, failure.retry_after) == (429, 2.0)
    assert failure.message.startswith("RateLimitError (HTTP 429): ") and "slow down" in failure.message
