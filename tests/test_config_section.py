"""The one config section reader: what it accepts, and the message and fix of everything it refuses."""

from __future__ import annotations

import pytest

from hermes_exp.model.cache import CacheControl
from hermes_exp.agent.limits import TaskLimits
from hermes_exp.model.ratelimit import Limits
from hermes_exp.model.retry import RetryPolicy
from hermes_exp.model.wire import Interop, reasoning, routing, sampling
from hermes_exp.money.budget import BudgetLimits
from hermes_exp.compress.config import CompressSettings
from hermes_exp.settings.sections import Section, choice
from hermes_exp.money.cost import Pricing
from hermes_exp.errors import ConfigError
from hermes_exp.tools.mcp_client import ServerSpec


def refused(call) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        call()
    return info.value


def test_unknown_keys_are_named_with_the_valid_ones() -> None:
    section = Section("model.retry", {"max_attempts": 3, "max_attempt": 4, "zzz": None})
    error = refused(lambda: section.only(["max_attempts", "backoff_seconds"]))
    assert error.message == "model.retry has unknown keys: max_attempt, zzz"  # a null typo is a typo too
    assert error.hint == "use one of: backoff_seconds, max_attempts"
    assert Section("s", {"a": 1}).only(["a", "b"]).raw == {"a": 1}
    assert refused(lambda: Section("s", {"c": 1}).only(["a"], "use a")).hint == "use a"


def test_numbers_within_bounds_and_their_defaults() -> None:
    section = Section("model.sampling", {"temperature": 0.5, "max_tokens": 10, "seed": None})
    assert section.number("temperature", low=0, high=2) == 0.5
    assert section.number("max_tokens", low=1, integer=True) == 10
    assert section.number("seed", 7) == 7 and section.number("absent", 3.0) == 3.0
    assert Section("budget", {"x": 0.01}).number("x", positive=True) == 0.01


@pytest.mark.parametrize("value, kwargs, message", [
    (3, {"low": 0, "high": 2}, "s.k=3 must be a number between 0 and 2"),
    (0, {"low": 1, "integer": True}, "s.k=0 must be an integer >= 1"),
    (2.0, {"integer": True}, "s.k=2.0 must be an integer"),
    (True, {}, "s.k=True must be a number"),
    ("1", {}, "s.k='1' must be a number"),
    (0, {"positive": True}, "s.k=0 must be a positive number"),
    (-1, {"positive": True, "integer": True}, "s.k=-1 must be a positive integer"),
    (-1, {"low": 0, "unit": "USD per 1M tokens"}, "s.k=-1 must be a number >= 0 (USD per 1M tokens)"),
])
def test_a_bad_number_names_key_value_and_bounds(value: object, kwargs: dict, message: str) -> None:
    assert refused(lambda: Section("s", {"k": value}).number("k", **kwargs)).message == message


def test_the_fix_says_what_null_means() -> None:
    assert refused(lambda: Section("s", {"k": -1}).number("k", 5, low=0)).hint == \
        "set s.k=<number >= 0>, or null for the default 5"
    assert refused(lambda: Section("b", {"k": 0}, null="for no limit").number("k", positive=True)).hint == \
        "set b.k=<positive number>, or null for no limit"
    assert refused(lambda: Section("s", {"k": "x"}).number("k", fix="do this")).hint == "do this"
    assert refused(lambda: Section("c", {}).number("n", low=1, integer=True, required=True)).message == \
        "c.n=None must be an integer >= 1"


def test_flags_and_choices() -> None:
    section = Section("m", {"on": True, "off": None, "bad": "yes", "pick": "b"})
    assert section.flag("on") is True and section.flag("off", False) is False and section.flag("gone", 1) == 1
    assert refused(lambda: section.flag("bad")).message == "m.bad='yes' must be true, false or null"
    assert refused(lambda: section.flag("off", nullable=False)).message == "m.off=None must be true or false"
    assert refused(lambda: section.flag("gone", required=True, nullable=False)).message == \
        "m.gone=None must be true or false"
    assert section.choice("pick", ("a", "b")) == "b" and section.choice("gone", ("a",), "a") == "a"
    error = refused(lambda: Section("m", {"pick": "z"}, null="to leave it out").choice("pick", ("a", "b")))
    assert error.message == "m.pick='z' is not valid; valid values: a, b"
    assert error.hint == "set m.pick to one of a, b, or null to leave it out"
    assert choice("k", None, ("a",)) is None


def test_another_file_gets_its_own_exception() -> None:
    class TomlError(ValueError):
        pass

    section = Section("[environment]", {"cpus": 0}, error=lambda message, _fix: TomlError(message))
    with pytest.raises(TomlError, match=r"^\[environment\].cpus=0 must be a positive number$"):
        section.number("cpus", positive=True)


TYPO = {"typo": 1}
READERS = {  # every config section and what reads it: each refuses a key it does not have, by name
    "model.retry": lambda: RetryPolicy.from_config(TYPO),
    "model.rate_limit": lambda: Limits.from_config(TYPO, 4),
    "model.cache_control": lambda: CacheControl.from_config({"enabled": True, **TYPO}),
    "model.interop": lambda: Interop.from_config(TYPO),
    "model.sampling": lambda: sampling({"sampling": TYPO}, Interop()),
    "provider.routing": lambda: routing({"routing": TYPO}),
    "model.reasoning": lambda: reasoning({"reasoning": TYPO}, {}),
    "model.pricing": lambda: Pricing.from_config({"prompt": 1, "completion": 2, **TYPO}),
    "budget": lambda: BudgetLimits.from_settings({"budget": TYPO}),
    "limits": lambda: TaskLimits.from_settings({"limits": TYPO}),
    "compress": lambda: CompressSettings.from_settings({"compress": TYPO, "model": {}}),
    "mcp.servers.s": lambda: ServerSpec.from_config("s", {"command": "x", **TYPO}),
}


@pytest.mark.parametrize("section", READERS)
def test_every_section_refuses_an_unknown_key(section: str) -> None:
    assert refused(READERS[section]).message == f"{section} has unknown keys: typo"
