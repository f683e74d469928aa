"""One reader for a config section (the mapping under one dotted key): unknown keys, numbers, flags and
choices are checked here, each error naming the key, the bad value, what is valid and the fix."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from hermes_exp.errors import ConfigError

Error = Callable[[str, str], Exception]  # (message, fix) -> the exception to raise


class Section:
    """`name` is the section's dotted path as a user writes it ("model.retry", "[environment]"); `null`
    says what null means for its keys in a fix ("for no limit"; default: the key's default value)."""

    def __init__(self, name: str, raw: Mapping[str, Any] | None, null: str = "", error: Error = ConfigError) -> None:
        self.name = name
        self.raw = dict(raw or {})
        self.null = null
        self._error = error

    def path(self, key: str) -> str:
        return f"{self.name}.{key}" if self.name else key

    def only(self, known: Iterable[str], fix: str | None = None) -> Section:
        """Refuse keys the section does not have (a typo would otherwise be ignored silently)."""
        known = list(known)
        unknown = sorted(set(self.raw) - set(known))
        if unknown:
            raise self._error(f"{self.name} has unknown keys: {', '.join(unknown)}",
                              fix or f"use one of: {', '.join(sorted(known))}")
        return self

    def number(self, key: str, default: Any = None, low: float | None = None, high: float | None = None,
               integer: bool = False, positive: bool = False, unit: str = "", fix: str | None = None,
               required: bool = False) -> Any:
        """The value (`default` when null or absent, unless `required`) if it is a number within the bounds:
        `low` and `high` inclusive, `positive` above 0. A boolean is not a number; `integer` wants an int."""
        value = self.raw.get(key)
        if value is None and not required:
            return default
        bad = isinstance(value, bool) or not isinstance(value, int if integer else (int, float))
        if not (bad or (positive and value <= 0) or (low is not None and value < low)
                or (high is not None and value > high)):
            return value
        noun = ("positive " if positive else "") + ("integer" if integer else "number")
        bounds = f" between {low} and {high}" if high is not None else f" >= {low}" if low is not None else ""
        path = self.path(key)
        raise self._error(f"{path}={value!r} must be {_article(noun)} {noun}{bounds}{f' ({unit})' if unit else ''}",
                          fix or f"set {path}=<{noun}{bounds}>{'' if required else self._or_null(default)}")

    def flag(self, key: str, default: Any = None, nullable: bool = True, fix: str | None = None,
             required: bool = False) -> Any:
        """True or false. Absent gives `default` (unless `required`), null too when `nullable`."""
        value = self.raw.get(key)
        if (key not in self.raw and not required) or (value is None and nullable):
            return default
        if isinstance(value, bool):
            return value
        path = self.path(key)
        raise self._error(f"{path}={value!r} must be {'true, false or null' if nullable else 'true or false'}",
                          fix or f"set {path}=true or {path}=false")

    def choice(self, key: str, valid: Iterable[str], default: Any = None, fix: str | None = None) -> Any:
        """One of `valid`; null (or absent) gives `default`."""
        value = self.raw.get(key)
        if value is None:
            return default
        valid = tuple(valid)
        return choice(self.path(key), value, valid,
                      fix or f"set {self.path(key)} to one of {', '.join(valid)}{self._or_null(default)}", self._error)

    def _or_null(self, default: Any) -> str:
        if self.null:
            return f", or null {self.null}"
        return f", or null for the default {default}" if default is not None else ", or null"


def choice(path: str, value: Any, valid: tuple[str, ...], fix: str | None = None, error: Error = ConfigError) -> Any:
    """`value` if it is null or one of `valid`, else an error naming key, value and choices."""
    if value is None or value in valid:
        return value
    raise error(f"{path}={value!r} is not valid; valid values: {', '.join(valid)}",
                fix or f"set {path} to one of {', '.join(valid)}")


def _article(noun: str) -> str:
    return "an" if noun[0] in "aeiou" else "a"
