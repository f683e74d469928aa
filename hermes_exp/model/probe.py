"""One cheap reachability check of the model endpoint at start-up, so a wrong `base_url` is one
clear error instead of a failure per prompt."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

from hermes_exp.errors import ConfigError


def probe(base_url: str, timeout: float = 5.0) -> None:
    """Open (and close) a TCP connection to the endpoint's host and port. No request is sent, so
    nothing is billed and no provider-specific path is assumed."""
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"model endpoint {base_url!r} is not an http(s) URL",
                          "set model.base_url (or provider.base_url) to e.g. http://127.0.0.1:8000/v1")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout):
            return
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigError(
            f"cannot reach the model endpoint {base_url} ({parts.hostname}:{port}: {reason})",
            "start the server, or fix model.base_url / provider.base_url; model=mock runs offline") from exc
