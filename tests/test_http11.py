"""The model client's HTTP/1.1 framing and parsing (agent/http11.py), on the bytes servers send: every
response is read the same however the stream is cut into reads, 1xx interim responses are skipped, and
what could split a request or is not HTTP/1.x is refused."""

from __future__ import annotations

import pytest

from hermes_exp.model.http11 import ProtocolError, RequestError, read_response, request_head

BODY = b'{"choices": [{"message": {"content": "hi"}}]}'
LENGTH = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY)
CHUNKED = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"a;name=value\r\n" + BODY[:10] + b"\r\n" + b"%X\r\n" % (len(BODY) - 10) + BODY[10:] + b"\r\n"
           b"0\r\nX-Trailer: 1\r\n\r\n")


def reads(data: bytes, size: int):
    """`recv` over `data` in pieces of `size` bytes, then the end of the stream."""
    pieces = [data[i:i + size] for i in range(0, len(data), size)]

    def recv(_n: int) -> bytes:
        return pieces.pop(0) if pieces else b""
    return recv


@pytest.mark.parametrize("size", [1, 2, 7, 64, 65536])
@pytest.mark.parametrize("raw", [LENGTH, CHUNKED, b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\n" + LENGTH])
def test_a_response_reads_the_same_however_the_stream_is_cut(raw: bytes, size: int) -> None:
    received, extra = read_response(reads(raw, size))
    assert (received.status, received.reason, received.version) == (200, b"OK", b"HTTP/1.1")
    assert received.content == BODY and not received.will_close and not extra


def test_the_end_of_the_connection_delimits_a_body_without_length_and_closes_it() -> None:
    received, _ = read_response(reads(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" + BODY, 5))
    assert received.content == BODY and received.will_close


@pytest.mark.parametrize("version,connection,closes", [
    (b"HTTP/1.1", b"", False), (b"HTTP/1.1", b"Connection: close\r\n", True),
    (b"HTTP/1.0", b"", True), (b"HTTP/1.0", b"Connection: keep-alive\r\n", False)])
def test_who_closes_the_connection_follows_the_version_and_the_connection_header(version, connection, closes) -> None:
    raw = version + b" 200 OK\r\n" + connection + b"Content-Length: 2\r\n\r\n{}"
    received, _ = read_response(reads(raw, 3))
    assert received.will_close is closes and received.version == version and received.content == b"{}"


def test_headers_are_kept_in_order_and_a_204_has_no_body() -> None:
    received, extra = read_response(reads(b"HTTP/1.1 204 No Content\r\nA: 1\r\nB:  two \r\nA: 3\r\n\r\n", 4))
    assert received.headers == [(b"A", b"1"), (b"B", b"two"), (b"A", b"3")] and received.content == b""
    assert not received.will_close and not extra


def test_trailer_fields_are_not_headers() -> None:
    received, _ = read_response(reads(CHUNKED, 9))
    assert received.headers == [(b"Transfer-Encoding", b"chunked")] and received.content == BODY


def test_bytes_beyond_the_response_are_reported_so_the_connection_is_not_reused() -> None:
    assert read_response(reads(LENGTH + b"HTTP/1.1 200 OK\r\n", 65536))[1] is True


@pytest.mark.parametrize("raw,message", [
    (b"", "without sending a response"),
    (b"HELLO\r\n\r\n", "Expected HTTP/"),
    (b"HTTP/1.1 2000 OK\r\n\r\n", "Invalid response status"),
    (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "Invalid header token"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}", "before the end of the response's body"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 2, 3\r\n\r\n{}", "Invalid character in Content-Length"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: -2\r\n\r\n{}", "Invalid character in Content-Length"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x2\r\n{}\r\n0\r\n\r\n", "Invalid character in chunk size"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n", "Expected LF after chunk data"),
    (b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 101 + b"\r\n", "more than 100 header lines"),
    (b"HTTP/1.1 200 OK\r\nA: 1\r\n  folded\r\n\r\n", "Unexpected whitespace"),  # obs-fold: refused, as llhttp does
    (b"HTTP/1.1 200 OK\r\nX: " + b"y" * 70000, "longer than 65536 bytes"),
    (b"HTTP/1.1 200 OK\r\nContent-Le", "in the middle of the response's head"),
])
def test_what_is_not_an_http_response_is_refused(raw: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        read_response(reads(raw, 1000))


def test_a_request_head_is_the_request_line_and_headers_as_given() -> None:
    head = request_head(b"POST", b"/v1/chat/completions?x=1", [(b"Host", b"h:1"), (b"X-A", b" v ")])
    assert head == b"POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: h:1\r\nX-A: v\r\n"


@pytest.mark.parametrize("target,headers", [
    (b"/a b", []), (b"/a\r\nX: 1", []), (b"", []),
    (b"/", [(b"X-A", b"v\r\nInjected: 1")]), (b"/", [(b"X-A", b"v\nInjected: 1")]), (b"/", [(b"X-A", b"v\x00")]),
    (b"/", [(b"X A", b"v")]), (b"/", [(b"X:A", b"v")]), (b"/", [(b"", b"v")]),
])
def test_what_could_split_a_request_is_refused(target: bytes, headers) -> None:
    with pytest.raises(RequestError):
        request_head(b"POST", target, headers)
