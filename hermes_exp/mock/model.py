"""The offline mock model's behaviour: a deterministic plan that really uses the tools it is offered
(prompt directives RUN:/BG:/WRITE:/READ:/SEARCH:/EXTRACT:/IMAGINE:/LOOK:/LOOP, else a default plan that
calls every offered tool once; ANSWER: sets the final answer), answers from the tool results, describes
images it is shown (the vision tool's requests), and reports reasoning and usage. `mock_server.py` serves
it over HTTP."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import shlex
import struct
import time
from typing import Any

from hermes_exp.mock import followups as mock_followups
from hermes_exp.mock.judge import judge_answer

Action = tuple[str, dict[str, Any]]

_INTROS = {"terminal": "Let me run a command.", "write_file": "Let me write a file.",
           "read_file": "Let me read a file.", "search_files": "Let me search the files.",
           "patch": "Let me patch a file.", "web_search": "Let me search the web.",
           "web_extract": "Let me read that page.", "image_generate": "Let me draw a picture.",
           "vision_analyze": "Let me look at the image."}
# Filled in from the conversation so far (or the mock site) when the call is made.
SEARCH_HIT, LAST_IMAGE = "$SEARCH_HIT", "$LAST_IMAGE"
_DIRECTIVES = {"RUN": lambda r: ("terminal", {"command": r}), "BG": lambda r: ("terminal", {"command": r, "background": True}),
               "READ": lambda r: ("read_file", {"path": r}),
               "SEARCH": lambda r: ("web_search", {"query": r}), "EXTRACT": lambda r: ("web_extract", {"urls": [r]}),
               "IMAGINE": lambda r: ("image_generate", {"prompt": r}),
               "LOOK": lambda r: ("vision_analyze", {"image_url": r, "question": "What does this image show?"})}


def canon(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def digest(*parts: object) -> str:
    return hashlib.blake2b("|".join(str(p) for p in parts).encode(), digest_size=16).hexdigest()


def draw(*parts: object) -> random.Random:
    """A generator seeded only by `parts`, so the same conversation state decides the same way every run."""
    return random.Random(int(digest(*parts), 16))


def _text(content: Any) -> str:
    """Message content as text: a string, or the text parts of a list of parts."""
    if isinstance(content, list):
        return "\n".join(_text(p.get("text") if isinstance(p, dict) else p) for p in content)
    return content if isinstance(content, str) else "" if content is None else canon(content)


def _plan(prompt: str, tools: list[str]) -> tuple[list[Action], bool]:
    """Actions requested by the prompt's directives (else the default plan) and whether LOOP follows them."""
    actions: list[Action] = []
    found = False
    for line in prompt.splitlines():
        line = line.strip()
        head, _, rest = line.partition(":")
        rest = rest.strip()
        if line == "LOOP":
            return actions, bool(tools)
        if head in _DIRECTIVES and rest:
            action: Action = _DIRECTIVES[head](rest)
        elif head == "WRITE" and rest:
            path, _, content = rest.partition(" ")
            action = ("write_file", {"path": path, "content": content})
        elif head == "READ" and rest:
            action = ("read_file", {"path": rest})
        else:
            continue
        found = True
        if action[0] in tools:
            actions.append(action)
    return (actions if found else _default_plan(prompt, tools)), False


def _stated_answer(prompt: str) -> str:
    """The final answer an `ANSWER: text` line of the prompt asks for (lets a dataset script answers)."""
    for line in prompt.splitlines():
        head, _, rest = line.strip().partition(":")
        if head == "ANSWER" and rest.strip():
            return rest.strip()
    return ""


def _default_plan(prompt: str, tools: list[str]) -> list[Action]:
    snippet = " ".join(prompt.split())[:40]
    candidates: list[Action] = [
        ("terminal", {"command": f"echo {shlex.quote(snippet)} | wc -w"}),
        ("write_file", {"path": "notes.md", "content": f"# Notes\n{prompt}\n"}),
        ("read_file", {"path": "notes.md"}),
        ("search_files", {"pattern": "Notes"}),
        ("web_search", {"query": snippet}),
        ("web_extract", {"urls": [SEARCH_HIT]}),
        ("image_generate", {"prompt": f"an illustration of: {snippet}"}),
        ("vision_analyze", {"image_url": LAST_IMAGE, "question": "What does this image show?"}),
    ]
    return [a for a in candidates if a[0] in tools]


def _next_action(prompt: str, tools: list[str], step: int, bad: bool) -> Action | None:
    """The tool call for this step, or None when the plan is exhausted and the model should answer."""
    plan, loops = _plan(prompt, tools)
    if bad and step == 0 and (plan or loops):
        return "nonexistent_tool", {"x": 1}
    if step < len(plan):
        return plan[step]
    if not loops:
        return None
    if "terminal" in tools:
        return "terminal", {"command": f"echo step {step}"}
    fallback = _default_plan(prompt, tools[:1])  # any offered tool keeps the loop going
    return fallback[0] if fallback else (tools[0], {})


def _fill(args: dict[str, Any], messages: list[dict[str, Any]], site: str) -> dict[str, Any]:
    """Put the first search hit / the last generated image of the conversation into the arguments."""
    found = {SEARCH_HIT: f"{site}/site/index.html", LAST_IMAGE: f"{site}/site/cat.png"}
    for m in messages:
        try:
            data = json.loads(_text(m.get("content"))) if m.get("role") == "tool" else None
        except ValueError:
            continue
        if isinstance(data, dict) and data.get("results") and isinstance(data["results"][0], dict) \
                and "snippet" in data["results"][0] and found[SEARCH_HIT].endswith("/index.html"):
            found[SEARCH_HIT] = data["results"][0]["url"]
        if isinstance(data, dict) and str(data.get("path", "")).endswith((".png", ".jpg")):
            found[LAST_IMAGE] = data["path"]
    text = json.dumps(args)
    for marker, value in found.items():
        text = text.replace(marker, value)
    return json.loads(text)


def describe_image(content: Any) -> str | None:
    """The answer to a vision request (a user message with an image part), or None if it has none."""
    parts = content if isinstance(content, list) else []
    urls = [p["image_url"].get("url", "") for p in parts if isinstance(p, dict) and isinstance(p.get("image_url"), dict)]
    if not urls:
        return None
    question = " ".join(p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type") == "text")
    head, _, data = urls[0].partition(";base64,")
    raw = base64.b64decode(data[:200] + "=" * (-len(data[:200]) % 4)) if data else b""
    size = "an image"
    if raw.startswith(b"\x89PNG") and len(raw) >= 24:
        width, height = struct.unpack(">II", raw[16:24])
        size = f"a {width}x{height} PNG image"
    return f"I see {size} ({head.removeprefix('data:') or 'linked'}). You asked: {question.strip()!r}."


def _last_user_content(body: dict[str, Any]) -> Any:
    users = [m for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"]
    return users[-1].get("content") if users else None


def _parse(body: dict[str, Any]) -> tuple[list[dict[str, Any]], str, list[str]]:
    """The conversation since the prompt, the prompt, and offered tool names, tolerating odd shapes."""
    raw_messages = body.get("messages")
    messages = [m for m in raw_messages if isinstance(m, dict)] if isinstance(raw_messages, list) else []
    # The task is the last user message: earlier ones (and their answers) are prefill.
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    prompt = _text(messages[last_user].get("content")) if last_user >= 0 else ""
    messages = messages[last_user + 1:] if last_user >= 0 else messages
    raw_tools = body.get("tools") if isinstance(body.get("tools"), list) else []
    functions = [t.get("function") for t in raw_tools if isinstance(t, dict)]
    tools = [f["name"] for f in functions if isinstance(f, dict) and isinstance(f.get("name"), str)]
    return messages, prompt, tools


# A summariser request (the marker of hermes_exp/compress/summarise.py) gets a summary of the turns it lists.
def _followups(body: dict[str, Any], prompt: str, tools: list[str], step: int, messages: list[dict[str, Any]],
               site: str | None) -> list[Action]:
    """Calls whose arguments come from earlier results (a background job, the browser form, each offered
    MCP tool), filled from the previous turn's results. They ride along with the default plan's turns
    (so a prompt makes as many model calls as before), or follow it when the plan is shorter."""
    plan, loops = _plan(prompt, tools)
    if loops or plan != _default_plan(prompt, tools):
        return []  # a prompt with directives gets exactly what it asks for
    turns = mock_followups.steps(tools, site, prompt) + mock_followups.mcp_steps(body.get("tools"))
    k = step if len(plan) >= len(turns) else step - len(plan)
    if not 0 <= k < len(turns):
        return []
    return [(name, mock_followups.fill(args, _tool_results(messages))) for name, args in turns[k]]


def _tool_results(messages: list[dict[str, Any]]) -> list[str]:
    """The text of every tool result in the conversation, in order."""
    return [_text(m.get("content")) for m in messages if m.get("role") == "tool"]


SUMMARY_MARK = "TURNS TO SUMMARIZE:"


def _summary(prompt: str, chars: int) -> str:
    """The first `chars` characters of every listed turn, flattened: shorter than the turns when they
    are long, longer than they are (what the compressor must reject) when `chars` is large."""
    listed = prompt.split(SUMMARY_MARK, 1)[1]
    turns = [" ".join(t.split()) for t in listed.split("\n\n[Turn ") if t.strip()]
    return "[CONTEXT SUMMARY]: " + " | ".join(t[:chars] for t in turns)


def completion(body: dict[str, Any], seed: int, bad_tool_rate: float, no_reasoning_rate: float,
               summary_chars: int = 60, site: str = "") -> dict[str, Any]:
    """`site`: the mock server's root URL (its search, images and web site, and the browser's form under
    /browser/), for web, vision and browser calls."""
    messages, prompt, tools = _parse(body)
    if not tools and SUMMARY_MARK in prompt:
        return _answer(body, seed, {"role": "assistant", "content": _summary(prompt, summary_chars)}, "stop", "")
    step = sum(1 for m in messages if m.get("role") == "assistant")
    bad = draw(seed, prompt, "bad").random() < bad_tool_rate
    seen = describe_image(_last_user_content(body)) if not tools else None
    action = None if seen else _next_action(prompt, tools, step, bad)
    more = [] if seen or (bad and step == 0) else _followups(body, prompt, tools, step, messages,
                                                              f"{site}/browser/" if site else None)
    if action is None and more:
        action, more = more[0], more[1:]
    if seen:
        message = {"role": "assistant", "content": seen}
        reasoning, out_text = "The user showed me an image; I describe what I see.", seen
    elif action is None:
        message, reasoning, out_text = _final_answer(prompt, messages)
    else:
        message, reasoning, out_text = _tool_turn(prompt, messages, step, [action, *more], site)
    finish = "tool_calls" if "tool_calls" in message else "stop"
    if draw(seed, prompt, "reasoning").random() < no_reasoning_rate:
        reasoning = ""
    else:
        message["reasoning"] = message["reasoning_content"] = reasoning
    return _answer(body, seed, message, finish, reasoning, out_text)


def _asked(prompt: str) -> str:
    return f"The user asked {' '.join(prompt.split())[:80]!r}"


def _final_answer(prompt: str, messages: list[dict[str, Any]]) -> tuple[dict[str, Any], str, str]:
    """The closing turn (message, reasoning, the text it counts as output): the judge's verdict, the
    prompt's ANSWER:, or the tool results quoted."""
    results = _tool_results(messages)
    quoted = " ".join(f"[{i}] {json.dumps(r[:200], ensure_ascii=False)}" for i, r in enumerate(results, 1))
    content = judge_answer(prompt) or _stated_answer(prompt) or (
        f"Done. I ran {len(results)} tools." + (f" Results: {quoted}" if quoted else ""))
    reasoning = f"{_asked(prompt)}; I have {len(results)} tool results, so I will now give the final answer."
    return {"role": "assistant", "content": content}, reasoning, content


def _tool_turn(prompt: str, messages: list[dict[str, Any]], step: int, calls: list[Action],
               site: str) -> tuple[dict[str, Any], str, str]:
    """A turn of parallel tool calls (message, reasoning, the text it counts as output); the first call's
    placeholders are filled from the conversation, the others' (followups) already are."""
    (name, args), more = calls[0], calls[1:]
    arguments = json.dumps(_fill(args, messages, site), ensure_ascii=False)
    content = _INTROS.get(name, f"Let me call {name}.")
    encoded = [(name, arguments), *((n, json.dumps(a, ensure_ascii=False)) for n, a in more)]
    message = {"role": "assistant", "content": content,
               "tool_calls": [{"id": f"call_{step}_{i}", "type": "function", "function": {"name": n, "arguments": a}}
                              for i, (n, a) in enumerate(encoded)]}
    reasoning = f"{_asked(prompt)}; this is step {step}, next I will call {name} because it is next in my plan."
    return message, reasoning, content + arguments


def tokens(text: str) -> int:
    """Usage as real tokenizers count it, roughly: four ASCII characters a token, and a token for every
    other character (CJK above all; a byte-level tokenizer may spend more on rare ones)."""
    ascii_chars = len(text.encode("ascii", "ignore"))
    return ascii_chars // 4 + (len(text) - ascii_chars)


def _answer(body: dict[str, Any], seed: int, message: dict[str, Any], finish: str, reasoning: str,
            out_text: str | None = None) -> dict[str, Any]:
    out_text = message.get("content") or "" if out_text is None else out_text
    prompt_tokens, reasoning_tokens = tokens(canon(body.get("messages"))), tokens(reasoning)
    completion_tokens = tokens(out_text) + 1 + reasoning_tokens
    return {
        "id": "chatcmpl-" + digest(seed, canon(body))[:24], "object": "chat.completion",
        "created": int(time.time()), "model": str(body.get("model") or "mock"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens,
                  "completion_tokens_details": {"reasoning_tokens": reasoning_tokens}},
    }
