"""The request body and the prompt-token estimate with the tool list serialised once per task: the
same bytes and the same estimate as serialising the whole body for every call."""

from __future__ import annotations

import json

from hermes_exp.model.encode import body_bytes
from hermes_exp.money.cost import CHARS_PER_TOKEN, estimate_prompt_tokens

TOOLS = [{"type": "function", "function": {"name": "terminal", "description": "run a command — in the sandbox",
                                           "parameters": {"type": "object", "properties": {"c": {"type": "string"}}}}}]


def whole(body: dict) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def estimate_whole(body: dict) -> int:
    text = json.dumps(body.get("messages") or [], ensure_ascii=False) + json.dumps(body.get("tools") or [],
                                                                                   ensure_ascii=False)
    ascii_chars = len(text.encode("ascii", "ignore"))
    return int(ascii_chars / CHARS_PER_TOKEN) + len(text.encode("utf-8", "surrogatepass")) - ascii_chars + 1


def test_body_and_estimate_match_whole_serialisation_across_calls_and_tool_lists() -> None:
    messages = [{"role": "user", "content": "héllo 你好"}]
    other_tools = [{**TOOLS[0], "function": {**TOOLS[0]["function"], "name": "file"}}]
    for tools in (TOOLS, TOOLS, other_tools, TOOLS, []):
        body = {"model": "m", "messages": list(messages), "temperature": 0.0, "tools": tools,
                "tool_choice": "auto"}
        if not tools:
            del body["tools"]
        assert body_bytes(body) == whole(body)
        assert estimate_prompt_tokens(body) == estimate_whole(body)
        messages.append({"role": "assistant", "content": None, "tool_calls": [{"id": "1", "type": "function",
                         "function": {"name": "terminal", "arguments": "{\"c\": \"ls\"}"}}]})


def test_the_clients_encoding_matches_whole_serialisation_as_the_conversation_grows_and_changes() -> None:
    """encode() reuses each message's serialisation across a thread's calls: a message replaced by an
    equal copy, a changed copy (null content sent as ""), a new tool list or a new conversation must
    still give the whole body's bytes and estimate."""
    from hermes_exp.model.encode import encode

    conversation = [{"role": "system", "content": "be brief ✓"}, {"role": "user", "content": "héllo 你好"}]
    bodies = []
    for step, tools in enumerate((TOOLS, TOOLS, [], TOOLS[:1], TOOLS)):
        conversation.append({"role": "assistant", "content": None, "tool_calls": [{"id": str(step), "type": "function",
                             "function": {"name": "terminal", "arguments": "{\"c\": \"ls\"}"}}]})
        conversation.append({"role": "tool", "tool_call_id": str(step), "content": f"out {step} ✓"})
        sent = [{**m, "content": ""} if m["content"] is None else m for m in conversation]  # copies each call
        bodies.append({"model": "m", "messages": sent, **({"tools": tools} if tools else {})})
    bodies.append({"model": "m", "messages": conversation[:1]})  # the thread's next task
    bodies.append({"model": "m", "messages": []})
    for body in bodies:
        assert encode(body) == (whole(body), estimate_whole(body))
        assert encode(body) == (whole(body), estimate_prompt_tokens(body))  # the same pieces again


class Message(dict):
    """A message whose lifetime can be watched (a plain dict takes no weak reference)."""


def test_a_thread_holds_no_piece_of_a_conversation_once_it_has_forgotten_it() -> None:
    import gc
    import weakref

    from hermes_exp.model.encode import encode, forget

    message = Message(role="user", content="hi")
    watched = weakref.ref(message)
    first = encode({"model": "m", "messages": [message], "tools": TOOLS})
    forget()
    del message
    gc.collect()
    assert watched() is None
    assert encode({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS}) == first


def test_the_agent_loop_forgets_its_conversation_when_it_ends(mock_server, tmp_path) -> None:
    from test_providers import settings_for

    from hermes_exp.model import encode
    from hermes_exp.agent.loop import run_agent
    from hermes_exp.model.client import ModelClient
    from hermes_exp.sandbox.local import LocalSandboxFactory
    from hermes_exp.tools.base import Resources
    from hermes_exp.tools.registry import Registry
    from hermes_exp.tools.toolbox import Toolbox

    settings = settings_for("distribution=terminal_only")
    client = ModelClient(settings["model"], settings["provider"], mock_server.base_url, "sk-test")
    registry = Registry.from_settings(settings)
    tools = registry.schemas(registry.toolsets)
    sandbox = LocalSandboxFactory(root=str(tmp_path)).open("v1:abc", {})
    try:
        toolbox = Toolbox(registry, sandbox, settings.get("tools") or {}, Resources())
        out = run_agent(client, toolbox, "count the words of this sentence", tools, settings, [])
    finally:
        sandbox.close()
    assert out.completed and out.api_calls > 1
    assert not vars(encode._last)  # the session thread keeps nothing of the conversation it ran


def test_a_draws_tool_list_is_one_object_serialised_once_for_every_thread_and_never_mixed_up() -> None:
    """Registry.schemas gives every task of a draw the same list, and model/encode.py serialises each
    list once for all threads: bodies stay those of whole serialisation, for any list, in any thread,
    after the shared cache has started again, and after a list is dropped and a new one built."""
    import threading

    from hermes_exp.model import encode as enc
    from hermes_exp.tools.files import FileTool
    from hermes_exp.tools.registry import Registry, Toolset
    from hermes_exp.tools.terminal import Terminal

    registry = Registry([Toolset("terminal", tools={"terminal": Terminal()}),
                         Toolset("file", tools={"read_file": FileTool("read_file")})])
    both = registry.schemas(["terminal", "file"])
    assert registry.schemas(["terminal", "file"]) is both and registry.schemas(("terminal", "file")) is both
    assert [t["function"]["name"] for t in both] == ["terminal", "read_file"]
    assert [t["function"]["name"] for t in registry.schemas(["file"])] == ["read_file"]
    registry.add(Toolset("more", tools={"write_file": FileTool("write_file")}))  # a new toolset: lists made again
    assert registry.schemas(["terminal", "file"]) is not both and registry.schemas(["terminal", "file"]) == both

    def check(tools: list, failures: list) -> None:
        body = {"model": "m", "messages": [{"role": "user", "content": "hé"}], "tools": tools}
        if enc.encode(body) != (whole(body), estimate_whole(body)):
            failures.append(tools)

    failures: list = []
    lists = [registry.schemas(["terminal"]), both, registry.schemas(["file"]), TOOLS]
    threads = [threading.Thread(target=lambda: [check(t, failures) for t in lists * 5]) for _ in range(8)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    for n in range(3 * enc._MAX_TOOL_LISTS):  # fresh lists, each dropped after its call: addresses come back
        check([{**TOOLS[0], "function": {**TOOLS[0]["function"], "name": f"tool{n}"}}], failures)
    assert not failures
