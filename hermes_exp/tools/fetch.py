"""HTTP for tools (web_extract, vision, image_gen), on the runner's side of the sandbox.

These requests leave from the runner's host, not from the prompt's sandbox: they reach whatever the
runner can reach. So by default (`block_private: true`) a URL whose host resolves to a loopback, private,
link-local or reserved address is refused, on every redirect hop (the mock server's own address is
allowed in the offline demo). Redirects are followed by hand up to `max_redirects`, bodies are read as
a stream and cut off at `max_bytes`. One httpx client per worker process, closed by `worker.release`.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from hermes_exp.errors import ToolError
from hermes_exp.tools.base import ToolContext

if TYPE_CHECKING:  # httpx is imported when a request is made: building the tools (every start-up) needs none
    import httpx

USER_AGENT = "hermes-exp/0.1 (tool-using agent experiments)"


@dataclass(frozen=True)
class Page:
    url: str  # after redirects
    status: int
    content_type: str  # lower-case media type without parameters
    charset: str | None
    body: bytes


def client(ctx: ToolContext) -> httpx.Client:
    """The process's shared client (connection pool); redirects are followed by `get`, not by httpx."""
    import httpx

    return ctx.resources.get("httpx", lambda: httpx.Client(follow_redirects=False, headers={
        "User-Agent": USER_AGENT}), lambda c: c.close())


def json_call(http: httpx.Client, method: str, url: str, label: str, timeout: float, **kwargs: Any) -> Any:
    """One request to a JSON API (a search backend, an images endpoint): its decoded body, or a ToolError
    naming `label` for a timeout, an unreachable host, an HTTP error status or a body that is not JSON."""
    import httpx

    try:
        response = http.request(method, url, timeout=timeout, **kwargs)
    except httpx.TimeoutException as exc:
        raise ToolError(f"the {label} did not answer within {timeout:g}s") from exc
    except httpx.HTTPError as exc:
        raise ToolError(f"the {label} cannot be reached: {type(exc).__name__}: {exc}") from exc
    if response.status_code >= 400:
        raise ToolError(f"the {label} answered HTTP {response.status_code}: {response.text[:300]}")
    try:
        return response.json()
    except ValueError as exc:
        raise ToolError(f"the {label} did not answer JSON ({response.headers.get('content-type')})") from exc


def check_url(url: str, block_private: bool, allowed: str | None = None) -> None:
    """Refuse what is not http(s), and (with `block_private`) hosts on the runner's own networks."""
    where = origin(url)
    if where is None:
        raise ToolError(f"{url!r} is not an http(s) URL with a host (and a port from 1 to 65535, if any)")
    if not block_private or same_origin(url, allowed):
        return
    try:
        infos = socket.getaddrinfo(where[1], where[2], proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        raise ToolError(f"cannot resolve the host of {url}: {exc.strerror}") from exc
    for info in infos:
        address = ipaddress.ip_address(info[4][0])
        if not address.is_global:
            raise ToolError(f"{url} resolves to {address}, a private or local address, which web tools may not "
                            "reach (they run on the runner's host); set block_private: false in the toolset "
                            "config to allow it")


DEFAULT_PORTS = {"http": 80, "https": 443}


def origin(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an http(s) URL, ports made explicit; None for anything else, or a URL
    whose port cannot be read. What a trusted address is compared by: a string prefix would let
    `http://TRUSTED@other-host/` (TRUSTED read as a user name) pass for the trusted server."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        return None
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port if port is not None else DEFAULT_PORTS[scheme]


def same_origin(url: str, trusted: str | None) -> bool:
    """Whether `url` is on the `trusted` server (same scheme, host and port)."""
    mine = origin(url)
    return bool(trusted) and mine is not None and mine == origin(trusted)


def get(ctx: ToolContext, url: str, *, timeout: float, max_bytes: int, max_redirects: int,
        block_private: bool, headers: dict[str, str] | None = None) -> Page:
    """GET `url`, following at most `max_redirects` redirects; raise ToolError for anything the model
    should hear about (bad URL, refused host, timeout, too many redirects, HTTP error, too large)."""
    import httpx

    http = client(ctx)
    for _ in range(max_redirects + 1):
        check_url(url, block_private, ctx.services)
        try:
            with http.stream("GET", url, timeout=timeout, headers=headers) as response:
                if response.is_redirect and response.headers.get("location"):
                    url = urljoin(url, response.headers["location"])
                    continue
                if response.status_code >= 400:
                    raise ToolError(f"{url} answered HTTP {response.status_code} {response.reason_phrase}")
                return Page(url, response.status_code, *_media_type(response), _read(response, url, max_bytes))
        except httpx.TimeoutException as exc:
            raise ToolError(f"{url} did not answer within {timeout:g}s") from exc
        except httpx.HTTPError as exc:
            raise ToolError(f"fetching {url} failed: {type(exc).__name__}: {exc}") from exc
    raise ToolError(f"{url}: more than {max_redirects} redirects (a redirect loop?); giving up")


def _media_type(response: httpx.Response) -> tuple[str, str | None]:
    raw = response.headers.get("content-type", "")
    media = raw.split(";", 1)[0].strip().lower()
    return media, response.charset_encoding


def _read(response: httpx.Response, url: str, max_bytes: int) -> bytes:
    declared = response.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise ToolError(f"{url} is {int(declared):,} bytes, over the limit of {max_bytes:,} (max_bytes)")
    chunks, size = [], 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > max_bytes:
            raise ToolError(f"{url} is larger than the limit of {max_bytes:,} bytes (max_bytes); not read")
        chunks.append(chunk)
    return b"".join(chunks)
