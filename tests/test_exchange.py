"""The model client's HTTP exchange (the SDK's aiohttp client, model/transport.py) against a real loopback
server that answers in the ways servers do: kept-alive, `Connection: close`, closing an idle kept-alive connection, chunked
and gzip-encoded bodies, HTTP/1.0, a body ended by the connection's end, a `100 Continue` first, a
redirect. Every call gets its answer, over as few connections as the server allows; what is not HTTP
fails the call as a connection error, and so does a header that would split the request."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
from collections.abc import Iterator

import openai
import pytest
from test_deadlines import ANSWER
from test_providers import TOOLS, settings_for

from hermes_exp.model.client import ModelClient
from hermes_exp.errors import ProviderError

BODY = json.dumps(ANSWER).encode()


class RawServer:
    """Answers each request on a connection with a valid completion, framed as `mode` says, and
    counts the connections it accepted."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.connections = 0
        self.targets: list[str] = []  # the request target of every request answered
        self.methods: list[str] = []  # and its method
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.1)
        self.base_url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/v1"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            self.connections += 1
            threading.Thread(target=self._answer_all, args=(conn,), daemon=True).start()

    def _answer_all(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as reader:
            while request := _read_request(reader):
                method, target = request
                self.targets.append(target)  # before the answer: the caller may look once it has it
                self.methods.append(method)
                conn.sendall(self._response(target))
                if self.mode in ("close", "drop_idle", "http10", "until_close", "garbage"):
                    break  # "close" said so in its header; "drop_idle" hangs up without a word

    def _response(self, target: str) -> bytes:
        head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        if self.mode == "http10":
            return (f"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(BODY)}\r\n\r\n"
                    ).encode() + BODY
        if self.mode == "until_close":
            return head.encode() + b"\r\n" + BODY
        if self.mode == "continue":
            head = "HTTP/1.1 100 Continue\r\n\r\n" + head
        if self.mode == "garbage":
            return b"SSH-2.0-OpenSSH_9.2\r\n\r\n"
        if self.mode.startswith("redirect-") and not target.startswith("/moved/"):  # redirect-STATUS
            return f"HTTP/1.1 {self.mode[9:]} Moved\r\nLocation: /moved{target}\r\nContent-Length: 0\r\n\r\n".encode()
        if self.mode == "chunked_gzip":
            data = gzip.compress(BODY)
            chunks = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (data[:10], data[10:]))
            return (head + "Transfer-Encoding: chunked\r\nContent-Encoding: gzip\r\n\r\n").encode() + chunks + b"0\r\n\r\n"
        close = "Connection: close\r\n" if self.mode == "close" else ""
        return (head + close + f"Content-Length: {len(BODY)}\r\n\r\n").encode() + BODY

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sock.close()


def _read_request(reader) -> tuple[str, str] | None:
    """Read one request (head and Content-Length body): its method and target; None when the client
    closed the connection."""
    length = None
    method = target = ""
    while True:
        line = reader.readline()
        if not line:
            return None
        if not target:
            method, target = line.decode("latin-1").split(" ")[:2]
            continue
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode("latin-1").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    reader.read(length or 0)
    return method, target


@pytest.fixture
def serve() -> Iterator:
    servers: list[RawServer] = []

    def start(mode: str) -> RawServer:
        servers.append(RawServer(mode))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def ask_three(server: RawServer, pause: float = 0.0, headers: dict[str, str] | None = None) -> list[str]:
    settings = settings_for("model.retry.max_attempts=1")
    provider = {**settings["provider"], "headers": headers} if headers else settings["provider"]
    client = ModelClient(settings["model"], provider, server.base_url, "sk-test")
    answers = []
    for _ in range(3):
        answers.append(client.complete([{"role": "user", "content": "hi"}], TOOLS).message["content"])
        time.sleep(pause)
    return answers


@pytest.mark.parametrize("mode,connections", [("keep_alive", 1), ("close", 3), ("chunked_gzip", 1), ("http10", 3),
                                              ("until_close", 3), ("continue", 1)])
def test_every_framing_is_read_and_a_kept_alive_connection_is_reused(serve, mode: str, connections: int) -> None:
    server = serve(mode)
    assert ask_three(server) == [ANSWER["choices"][0]["message"]["content"]] * 3
    assert server.connections == connections


def sdk_ask_three(server: RawServer) -> list[str]:
    """The reference: the openai SDK as a user calls it, with its default HTTP client."""
    client = openai.OpenAI(api_key="sk-test", base_url=server.base_url, max_retries=0)
    return [client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}]
                                           ).choices[0].message.content for _ in range(3)]


@pytest.mark.parametrize("ask", [ask_three, sdk_ask_three], ids=["ours", "sdk"])
@pytest.mark.parametrize("status,method", [(301, "GET"), (302, "GET"), (303, "GET"), (307, "POST"), (308, "POST")])
def test_a_redirect_is_sent_once_and_followed_as_the_sdk_follows_it(serve, ask, status: int, method: str) -> None:
    server = serve(f"redirect-{status}")
    assert ask(server) == [ANSWER["choices"][0]["message"]["content"]] * 3
    sent = list(zip(server.methods, server.targets))
    assert sent == [("POST", "/v1/chat/completions"), (method, "/moved/v1/chat/completions")] * 3


def test_a_server_that_does_not_speak_http_fails_the_call_as_a_connection_error(serve) -> None:
    with pytest.raises(ProviderError, match="APIConnectionError: ClientResponseError: Bad status line: Expected HTTP/"):
        ask_three(serve("garbage"))


def test_a_provider_header_that_would_split_the_request_fails_each_call_and_sends_nothing(serve) -> None:
    server = serve("keep_alive")
    with pytest.raises(ProviderError, match="APIConnectionError: the request was not sent: Forbidden control character"):
        ask_three(server, headers={"X-Extra": "a\r\nInjected: 1"})
    assert server.targets == []


def test_a_kept_alive_connection_the_server_closed_is_replaced_before_the_next_call(serve) -> None:
    server = serve("drop_idle")  # one retry-free attempt per call: a stale connection would fail the call
    assert ask_three(server, pause=0.1) == [ANSWER["choices"][0]["message"]["content"]] * 3
    assert server.connections == 3


def _self_signed(tmp_path) -> tuple[str, str]:
    """A certificate and key for `localhost` (files), made with the `cryptography` package."""
    import datetime

    from cryptography import x509  # in the dev extra: the test must run, never skip
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_file), str(key_file)


def test_https_is_verified_against_the_trusted_certificates_and_the_host_name(serve, tmp_path, monkeypatch) -> None:
    import ssl

    cert, key = _self_signed(tmp_path)
    server = serve("keep_alive")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server._sock = context.wrap_socket(server._sock, server_side=True)  # connections accepted from now on are TLS
    server._sock.settimeout(0.1)
    port = server.base_url.rsplit(":", 1)[1]
    settings = settings_for("model.retry.max_attempts=1")

    def ask(host: str) -> str:
        client = ModelClient(settings["model"], settings["provider"], f"https://{host}:{port}", "sk-test")
        return client.complete([{"role": "user", "content": "hi"}], TOOLS).message["content"]

    with pytest.raises(ProviderError, match="certificate verify failed"):  # the cause, named
        ask("localhost")  # a certificate nobody trusts
    monkeypatch.setenv("SSL_CERT_FILE", cert)
    assert ask("localhost") == ANSWER["choices"][0]["message"]["content"]
    with pytest.raises(ProviderError, match="certificate verify failed: IP address mismatch"):
        ask("127.0.0.1")  # trusted, but not this host's certificate


class SlowReader:
    """Accepts one connection and does what `mode` says: "slow" starts reading the request only after a
    pause, then answers; "deaf" never reads; "mute" reads the request and never answers; "drip" answers
    in pieces with pauses between them."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.received = b""
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self._done = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        conn, _ = self._sock.accept()
        with conn:
            if self.mode == "deaf":
                self._done.wait(10)
                return
            if self.mode == "slow":
                time.sleep(0.3)  # the client fills the sockets' buffers and waits for room
            chunks = [b""]
            while not chunks[-1].endswith(b"}"):  # the request's body is a JSON object: its last byte
                chunks.append(conn.recv(1 << 16))
            self.received = b"".join(chunks)
            if self.mode == "mute":
                self._done.wait(10)
                return
            answer = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(BODY)}\r\n\r\n".encode() + BODY
            pieces = [answer[i:i + 40] for i in range(0, len(answer), 40)] if self.mode == "drip" else [answer]
            for piece in pieces:
                conn.sendall(piece)
                time.sleep(0.02 if self.mode == "drip" else 0)
            self._done.wait(10)

    def ask(self, content: str, timeout: float) -> str:
        """The model client's one attempt at a call whose user message is `content`."""
        settings = settings_for("model.retry.max_attempts=1", f"model.timeout={timeout}")
        client = ModelClient(settings["model"], settings["provider"], f"http://127.0.0.1:{self.port}/v1", "sk-test")
        try:
            return client.complete([{"role": "user", "content": content}], TOOLS).message["content"]
        finally:
            self._done.set()
            self._sock.close()


def test_a_body_larger_than_the_sockets_buffers_arrives_whole_at_a_slow_reader() -> None:
    server = SlowReader("slow")
    assert server.ask("x" * (32 << 20), timeout=60) == ANSWER["choices"][0]["message"]["content"]
    body = server.received.partition(b"\r\n\r\n")[2]
    assert json.loads(body)["messages"][0]["content"] == "x" * (32 << 20)


def test_an_answer_in_pieces_with_pauses_is_read_whole() -> None:
    assert SlowReader("drip").ask("hi", timeout=5) == ANSWER["choices"][0]["message"]["content"]


@pytest.mark.parametrize("mode", ["deaf", "mute"])
def test_a_server_that_stops_reading_or_answering_times_out_at_model_timeout(mode: str) -> None:
    with pytest.raises(ProviderError, match="Timeout") as info:
        SlowReader(mode).ask("x" * (32 << 20 if mode == "deaf" else 10), timeout=0.5)
    assert info.value.transient
