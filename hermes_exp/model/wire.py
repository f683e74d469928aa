"""The request body that a model and provider config put on the wire: sampling, routing, reasoning,
and the interop knobs for servers that differ from OpenAI. Pure config -> dict, validated up front,
so every setting either reaches the wire exactly as configured or stops the run with a ConfigError."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from hermes_exp.model.tokens import TokenData
from hermes_exp.settings.sections import Section, choice
from hermes_exp.errors import ConfigError

# Request fields a model preset may set under `sampling`; null means "not sent".
SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "seed", "stop", "tool_choice",
                 "parallel_tool_calls", "frequency_penalty", "presence_penalty")
# Not in OpenAI's API, understood by OpenRouter, vLLM, llama.cpp and Ollama: sent in the body as they are.
EXTRA_SAMPLING_KEYS = ("top_k", "min_p", "repetition_penalty")
TOOL_ONLY_KEYS = ("tool_choice", "parallel_tool_calls")  # refused by servers when no tools are offered
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
REASONING_FORMATS = ("openrouter", "openai", "chat_template", "none")
REASONING_KEYS = ("format", "enabled", "effort", "max_tokens", "exclude")
ROUTING_CHOICES = {"sort": ("price", "throughput", "latency"), "data_collection": ("allow", "deny")}
ROUTING_LISTS = ("order", "only", "ignore", "quantizations")
ROUTING_FLAGS = ("allow_fallbacks", "require_parameters")
QUANTIZATIONS = ("int4", "int8", "fp4", "fp6", "fp8", "fp16", "bf16", "fp32", "unknown")
TOOL_CHOICES = ("auto", "none", "required")
OMITTED = "to leave it out of requests"  # what null means for a key that goes on the wire


@dataclass(frozen=True)
class Interop:
    """How to talk to a server that differs from OpenAI (config: `model.interop`)."""

    null_content_as_empty: bool = True   # send "" for a null message content (llama.cpp answers 500 to null)
    send_max_tokens: bool = True         # false: never send max_tokens (the budget still assumes it)
    max_tokens_key: str = "max_tokens"   # or max_completion_tokens (OpenAI's reasoning models)
    send_parallel_tool_calls: bool = True
    send_tool_choice: bool = True

    @classmethod
    def from_config(cls, raw: dict[str, Any] | None) -> Interop:
        names = [f.name for f in fields(cls)]
        section = Section("model.interop", raw).only(names)
        section.choice("max_tokens_key", ("max_tokens", "max_completion_tokens"))
        for name in names:
            if name != "max_tokens_key":
                section.flag(name)
        return cls(**{k: v for k, v in section.raw.items() if v is not None})


def sampling(model: dict[str, Any], interop: Interop) -> tuple[dict[str, Any], dict[str, Any]]:
    """(SDK keyword arguments, extra body fields) from `model.sampling`."""
    section = Section("model.sampling", model.get("sampling"), null=OMITTED).only(
        SAMPLING_KEYS + EXTRA_SAMPLING_KEYS, f"use {', '.join(SAMPLING_KEYS + EXTRA_SAMPLING_KEYS)}, "
                                             "or model.extra_body for others")
    raw, key = section.raw, "model.sampling."
    section.number("temperature", low=0, high=2)
    section.number("top_p", low=0, high=1)
    section.number("max_tokens", low=1, integer=True)
    section.number("seed", integer=True)
    section.number("top_k", low=0, integer=True)
    section.flag("parallel_tool_calls")
    if not isinstance(raw.get("tool_choice"), dict):
        section.choice("tool_choice", TOOL_CHOICES)
    stop = raw.get("stop")
    if stop is not None and not isinstance(stop, str) and not (
            isinstance(stop, list) and all(isinstance(s, str) for s in stop)):
        raise ConfigError(f"{key}stop={stop!r} must be a string or a list of strings", f"set {key}stop=[...] or null")
    kwargs = {k: raw[k] for k in SAMPLING_KEYS if raw.get(k) is not None}
    skip = {"max_tokens": not interop.send_max_tokens, "parallel_tool_calls": not interop.send_parallel_tool_calls,
            "tool_choice": not interop.send_tool_choice}
    kwargs = {k: v for k, v in kwargs.items() if not skip.get(k)}
    if "max_tokens" in kwargs and interop.max_tokens_key != "max_tokens":
        kwargs[interop.max_tokens_key] = kwargs.pop("max_tokens")
    return kwargs, {k: raw[k] for k in EXTRA_SAMPLING_KEYS if raw.get(k) is not None}


def routing(provider: dict[str, Any]) -> dict[str, Any]:
    """OpenRouter's `provider` object from `provider.routing` (null keys are not sent)."""
    section = Section("provider.routing", provider.get("routing"), null=OMITTED)
    section.only(set(ROUTING_CHOICES) | set(ROUTING_LISTS) | set(ROUTING_FLAGS))
    raw = section.raw
    for key, value in raw.items():
        name = f"provider.routing.{key}"
        if key in ROUTING_CHOICES:
            section.choice(key, ROUTING_CHOICES[key])
        elif key in ROUTING_FLAGS:
            section.flag(key)
        elif value is not None:
            if isinstance(value, str):
                raise ConfigError(f"{name}={value!r} must be a list", f"write {name}=[{value}]")
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"{name}={value!r} must be a list of names", f"write {name}=[a,b]")
            for item in value if key == "quantizations" else ():
                choice(name, item, QUANTIZATIONS)
    return {k: v for k, v in raw.items() if v is not None}


def reasoning(model: dict[str, Any], provider: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(SDK keyword arguments, extra body fields) for `model.reasoning` in the provider's format."""
    section = Section("model.reasoning", model.get("reasoning"), null=OMITTED)
    raw = section.only(REASONING_KEYS, f"use {', '.join(REASONING_KEYS)}").raw
    own = raw.pop("format", None)
    fmt = own or provider.get("reasoning_format") or "none"
    choice("model.reasoning.format" if own else "provider.reasoning_format", fmt, REASONING_FORMATS)
    section.choice("effort", EFFORTS)
    section.flag("enabled")
    section.flag("exclude")
    section.number("max_tokens", low=1, integer=True)
    wanted = {k: v for k, v in raw.items() if v is not None}
    if wanted.get("enabled") is False and wanted.get("effort") not in (None, "none"):
        raise ConfigError(f"model.reasoning.enabled=false contradicts model.reasoning.effort={wanted['effort']!r}",
                          "drop one of them (effort=none also turns reasoning off)")
    return _REASONING[fmt](wanted)


def _unsupported(fmt: str, wanted: dict[str, Any], allowed: tuple[str, ...]) -> None:
    extra = [k for k in wanted if k not in allowed]
    if extra:
        keys = ", ".join(f"model.reasoning.{k}={wanted[k]!r}" for k in extra)
        raise ConfigError(f"{keys} cannot be sent with reasoning_format={fmt} (it only carries "
                          f"{', '.join(allowed) or 'nothing'})",
                          "set those keys to null, or use a provider/format that supports them")


def _openrouter(wanted: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    if "effort" in wanted and "max_tokens" in wanted:
        raise ConfigError("model.reasoning.effort and model.reasoning.max_tokens are both set; OpenRouter "
                          "takes one or the other", "set one of them to null")
    return {}, ({"reasoning": wanted} if wanted else {})


def _openai(wanted: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    _unsupported("openai", wanted, ("effort", "enabled"))
    if wanted.get("enabled") is True and "effort" not in wanted:
        raise ConfigError("model.reasoning.enabled=true needs model.reasoning.effort with reasoning_format=openai",
                          f"set model.reasoning.effort to one of {', '.join(EFFORTS)}")
    effort = "none" if wanted.get("enabled") is False else wanted.get("effort")
    return ({"reasoning_effort": effort} if effort else {}), {}


def _chat_template(wanted: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    _unsupported("chat_template", wanted, ("enabled",))
    if "enabled" not in wanted:
        return {}, {}
    return {}, {"chat_template_kwargs": {"enable_thinking": wanted["enabled"]}}


def _none(wanted: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    _unsupported("none", wanted, ())
    return {}, {}


_REASONING = {"openrouter": _openrouter, "openai": _openai, "chat_template": _chat_template, "none": _none}


def static_request(model: dict[str, Any], provider: dict[str, Any]) -> dict[str, Any]:
    """Everything in a request body that does not change between calls, as plain JSON: provider and
    model `extra_body` layers are merged in here (over the sampling keys, as the SDK would)."""
    interop = Interop.from_config(model.get("interop"))
    request, extra_sampling = sampling(model, interop)
    reasoning_kwargs, reasoning_extra = reasoning(model, provider)
    request.update(reasoning_kwargs)
    extra: dict[str, Any] = {}
    for layer in (provider.get("extra_body"), model.get("extra_body"), extra_sampling, reasoning_extra):
        for key, value in (layer or {}).items():
            both_dicts = isinstance(value, dict) and isinstance(extra.get(key), dict)
            extra[key] = {**extra[key], **value} if both_dicts else value
    route = routing(provider)
    if route:
        extra["provider"] = {**(extra.get("provider") or {}), **route}
    request["model"] = model["name"]
    request.update(extra)
    request.update(TokenData.from_config(model).request())  # after extra_body: what model.logprobs says wins
    return request


def call_request(static: dict[str, Any], messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                 interop: Interop) -> dict[str, Any]:
    """The JSON body of one call."""
    if interop.null_content_as_empty:
        messages = [{**m, "content": ""} if m.get("content", "") is None else m for m in messages]
    request = {**static, "messages": messages}
    if tools:
        request["tools"] = tools
    else:
        request = {k: v for k, v in request.items() if k not in TOOL_ONLY_KEYS}
    return request
