"""What a model call does once instead of per call (bench/RESULTS.md, sixth pass): the request's
members other than messages and tools serialised once per thread, the reply's nulls dropped without a
call per scalar. Bytes and values stay those of the plain computation."""

from __future__ import annotations

import json
import threading
from typing import Any

from hermes_exp.model import encode as enc
from hermes_exp.model import client as model


def whole(body: dict) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _record_calls(monkeypatch, module: Any, name: str) -> list[Any]:
    """Replace module.name by a wrapper that records each argument it is called with (the real function
    still answers); the list of those arguments."""
    seen: list[Any] = []
    plain = getattr(module, name)

    def recording(value: Any) -> Any:
        seen.append(value)
        return plain(value)

    monkeypatch.setattr(module, name, recording)
    return seen


def test_the_requests_other_members_are_serialised_once_per_thread_while_they_are_the_same_objects(monkeypatch) -> None:
    static = {"model": "m", "temperature": 0.7, "max_tokens": 1024, "extra": {"provider": {"order": ["a"]}}}
    serialised = _record_calls(monkeypatch, enc, "dumps")
    enc.forget()
    conversation = [{"role": "user", "content": "héllo"}]
    for step in range(5):
        body = {**static, "messages": conversation}
        assert enc.encode(body)[0] == whole(body)
        conversation = conversation + [{"role": "assistant", "content": f"step {step} ✓"}]
    assert sum(value is static["extra"] for value in serialised) == 1
    assert sum(value is static["temperature"] for value in serialised) == 1
    # a member replaced by another object (equal or not) is serialised again, never taken for the old one
    for temperature in (0.0, -0.0, 1.5, 0.0):
        body = {**static, "temperature": temperature, "extra": {"provider": {"order": [str(temperature)]}},
                "messages": conversation}
        assert enc.encode(body)[0] == whole(body)
    enc.forget()
    assert not vars(enc._last)


def test_other_threads_and_a_new_conversation_get_the_same_bytes() -> None:
    static = {"model": "m", "top_p": 0.9, "seed": 3}
    failures: list[Any] = []

    def run(name: str) -> None:
        for task in range(3):
            messages = [{"role": "user", "content": f"{name} {task}"}]
            for model_name in ("m", "m", f"other-{name}"):
                body = {**static, "model": model_name, "messages": messages}
                if enc.encode(body)[0] != whole(body):
                    failures.append(body)
            enc.forget()

    threads = [threading.Thread(target=run, args=(str(n),)) for n in range(6)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert not failures


def _reference(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reference(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_reference(v) for v in value]
    return value


def test_nulls_are_dropped_at_every_depth_descending_only_into_objects_and_arrays(monkeypatch) -> None:
    message = {"role": "assistant", "content": None, "refusal": None, "reasoning": "r",
               "tool_calls": [{"id": "1", "type": "function", "function": {"name": "t", "arguments": "{}"},
                               "extra": None, "list": [None, 1, {"a": None, "b": [None, {"c": None}]}]}],
               "annotations": [], "audio": {}, "n": 0, "f": False}
    assert model._without_none(message) == _reference(message)
    assert model._without_none([None, "x", 3]) == [None, "x", 3]  # arrays keep their nulls, as before
    assert model._without_none("text") == "text"
    calls = _record_calls(monkeypatch, model, "_without_none")
    model._without_none(message)
    containers = [message, message["tool_calls"], message["tool_calls"][0], message["tool_calls"][0]["function"],
                  message["tool_calls"][0]["list"], message["tool_calls"][0]["list"][2],
                  message["tool_calls"][0]["list"][2]["b"], message["tool_calls"][0]["list"][2]["b"][1],
                  message["annotations"], message["audio"]]
    assert len(calls) == len(containers)  # one call per object or array, none per string or number
