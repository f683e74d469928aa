"""A small OTLP/HTTP trace collector on 127.0.0.1 for the tests: it decodes each export request with
opentelemetry-proto's own classes and keeps every span as plain data (its ids, parent, name, kind,
status, attributes and the resource's attributes)."""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (ExportTraceServiceRequest,
                                                                      ExportTraceServiceResponse)

from httpd import QuietHandler


@dataclass
class Received:
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    kind: int
    status: int
    description: str
    attributes: dict[str, Any]
    resource: dict[str, Any] = field(default_factory=dict)


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs}


class Collector:
    """`with Collector() as c:` c.endpoint is its base URL; c.spans what it received; c.paths where."""

    def __init__(self) -> None:
        self.spans: list[Received] = []
        self.paths: list[str] = []
        collector = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                collector.take(self.path, ExportTraceServiceRequest.FromString(body))
                self._send(200, "application/x-protobuf", ExportTraceServiceResponse().SerializeToString())

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._lock = threading.Lock()

    def take(self, path: str, request: ExportTraceServiceRequest) -> None:
        with self._lock:
            self.paths.append(path)
            for resource_spans in request.resource_spans:
                resource = _attributes(resource_spans.resource.attributes)
                for scope in resource_spans.scope_spans:
                    self.spans += [Received(s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(), s.name,
                                            s.kind, s.status.code, s.status.message, _attributes(s.attributes),
                                            resource) for s in scope.spans]

    def __enter__(self) -> Collector:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
