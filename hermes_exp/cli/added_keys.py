"""A key added with `+` that is a typo of one the config has is refused. Hydra answers a misspelt key
(`max_turn=3`) with "To append to your config use +max_turn=3", and following that advice used to run
with the key nobody reads and the real one at its default: max_turns=10, temperature unchanged, the
sandbox's memory limit unset, without a word. A new key whose name is close to an existing key of the
same section (or of the top level, for a new section) is refused with the key it probably meant;
`++key=value` adds a key on purpose, unchecked."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator
from typing import Any

from hermes_exp.errors import ConfigError

CUTOFF = 0.8  # difflib's similarity: one wrong, missing or swapped letter in a word of 6+ letters


def check(settings: dict[str, Any], overrides: Iterable[str], groups: set[str]) -> None:
    """`overrides`: the job's task overrides as given (`+a.b=v`, `key=v`, ...); `groups`: the config
    group names, whose `+group=option` adds an option, not a key."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import OverrideType

    parsed = OverridesParser.create().parse_overrides(list(overrides))  # Hydra parsed them already: no error
    added = [(o.key_or_group, o.get_value_element_as_str()) for o in parsed
             if o.type == OverrideType.ADD and o.package is None and "/" not in o.key_or_group
             and o.key_or_group not in groups]  # `+group=option` and `+group@pkg=option` add an option
    paths = {key for key, _ in added}
    for key, value in added:
        parts = key.split(".")
        new = _first_new(settings, parts, paths)  # the first part that exists only because of `+` overrides
        if new == 0:  # a new section: like one of the top level's
            candidates = {k: k for k in settings if k not in paths and not _under(k, paths)}
        else:  # a new key in a section: like one anywhere in that section (model.sampling.temperature)
            section = settings.get(parts[0])
            candidates = {p: p.rsplit(".", 1)[-1] for p in _paths(section, parts[0] + ".")
                          if p not in paths and not _under(p, paths)} if isinstance(section, dict) else {}
        match = _closest(parts[new], candidates)
        if match:
            meant = ".".join([match, *parts[new + 1:]])
            raise ConfigError(f"+{key} adds a key nothing reads: did you mean {meant}?",
                              f"set {meant}={value} (without the +); if {key} is a new key on purpose, "
                              f"add it with ++{key}={value}")


def _first_new(settings: dict[str, Any], parts: list[str], added: set[str]) -> int:
    """Index of the first part of `parts` whose node holds nothing but keys added by `+` overrides."""
    for i in range(len(parts) - 1):
        node = _node(settings, parts[: i + 1])
        prefix = ".".join(parts[: i + 1]) + "."
        if isinstance(node, dict) and all(p in added or _under(p, added) for p in _leaves(node, prefix)):
            return i
    return len(parts) - 1


def _leaves(node: dict[str, Any], prefix: str) -> Iterator[str]:
    for key, value in node.items():
        if isinstance(value, dict) and value:
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


def _node(settings: dict[str, Any], parts: list[str]) -> Any:
    node: Any = settings
    for part in parts:
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _paths(node: dict[str, Any], prefix: str) -> Iterator[str]:
    for key, value in node.items():
        path = f"{prefix}{key}"
        yield path
        if isinstance(value, dict):
            yield from _paths(value, path + ".")


def _under(path: str, added: set[str]) -> bool:
    return any(path.startswith(a + ".") for a in added)


def _closest(name: str, candidates: dict[str, str]) -> str | None:
    """The candidate path whose last part is most like `name` (not the same name: that is another key)."""
    names = [n for n in set(candidates.values()) if n != name]
    best = difflib.get_close_matches(name, names, n=1, cutoff=CUTOFF)
    if not best:
        return None
    return min((p for p, n in candidates.items() if n == best[0]), key=lambda p: (p.count("."), p))


def check_sections(settings: dict[str, Any], overrides: Iterable[str], sections: dict[str, list[str]]) -> None:
    """`dataset=/data/p.jsonl` (meant: dataset.path=...) replaces a whole section with a value, and the
    run would fail far from the cause. `sections`: the config's sections (name -> their keys)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    for o in OverridesParser.create().parse_overrides(list(overrides)):
        key = o.key_or_group
        if o.is_delete() or key not in sections or isinstance(settings.get(key), dict):
            continue
        keys = sections[key]
        value = o.get_value_element_as_str()
        raise ConfigError(f"{key}={value} gives a value to the section {key}, which holds settings: "
                          f"{', '.join(keys)}",
                          f"set one of its keys, e.g. {key}.{keys[0]}={value}" if keys else f"leave {key} out")
