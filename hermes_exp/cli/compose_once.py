"""One composition of the config per run invocation instead of Hydra's two. `Hydra.get_mode` composes the
whole config (for a multirun, sweep overrides unchecked) only to read `hydra.mode`; when that says
"run", `Hydra.run` composes it again with `hydra.mode=RUN` appended: ~0.25 s of every start-up. While
`composed_once()` is active, that second composition is the first one with `hydra.mode=RUN` applied by
Hydra's own override code, whenever Hydra would have computed the same config: no sweep override (the
run's composition refuses those with its own message), no mandatory default left missing (the multirun
composition skips those, the run's refuses them), the same config name and overrides. Anything else is
composed by Hydra as before. This hooks one internal of hydra-core (pinned <1.4):
`ConfigLoaderImpl.load_configuration`; if its signature changes, the hook is not installed and a
warning says so (tests/test_compose_once.py fails on such a change)."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)
EXPECTED = ("self", "config_name", "overrides", "run_mode", "from_shell", "validate_sweep_overrides")
MISSING = "???"


@dataclass
class Composes:
    """What the hook saw in one invocation: compositions Hydra did, and ones served from the first."""

    composed: int = 0
    reused: int = 0
    first: tuple[Any, list[str], Any] | None = field(default=None, repr=False)  # name, overrides, cfg


def hookable() -> bool:
    """Whether Hydra's config loader is the one this hook was written for (hydra-core 1.3)."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    loader = getattr(ConfigLoaderImpl, "load_configuration", None)
    apply = getattr(ConfigLoaderImpl, "_apply_overrides_to_config", None)
    return callable(apply) and callable(loader) and tuple(inspect.signature(loader).parameters) == EXPECTED


@contextmanager
def composed_once() -> Iterator[Composes]:
    """Within this block, a run's second composition reuses `get_mode`'s (see the module's docstring)."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    seen = Composes()
    if not hookable():
        import hydra

        log.warning("hydra-core %s is not the version hermes-exp's start-up hook was written for: the config "
                    "is composed twice (correct, ~0.25 s slower)", hydra.__version__)
        yield seen
        return
    original = ConfigLoaderImpl.load_configuration

    def load_configuration(self: Any, config_name: Any, overrides: list[str], run_mode: Any,
                           from_shell: bool = True, validate_sweep_overrides: bool = True) -> Any:
        first, seen.first = seen.first, None  # serves the very next composition only
        if first is not None:
            try:
                reused = _reuse(first, config_name, overrides, run_mode, from_shell, validate_sweep_overrides)
            except Exception:  # noqa: BLE001 - Hydra composes, and raises its own error if there is one
                reused = None
            if reused is not None:
                seen.reused += 1
                return reused
        cfg = original(self, config_name, overrides, run_mode, from_shell, validate_sweep_overrides)
        seen.composed += 1
        if _is_mode_probe(run_mode, from_shell, validate_sweep_overrides):
            seen.first = (config_name, list(overrides), cfg)
        return cfg

    ConfigLoaderImpl.load_configuration = load_configuration  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        ConfigLoaderImpl.load_configuration = original  # type: ignore[method-assign]


def _is_mode_probe(run_mode: Any, from_shell: bool, validate: bool) -> bool:
    """`Hydra.get_mode`'s composition: for a multirun, from the shell, sweep overrides unchecked."""
    from hydra.types import RunMode

    return run_mode == RunMode.MULTIRUN and from_shell and not validate


def _reuse(first: tuple[Any, list[str], Any], config_name: Any, overrides: list[str], run_mode: Any,
           from_shell: bool, validate: bool) -> Any:
    """The first composition made into the run's, or None when Hydra must compose (see the docstring)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.types import RunMode

    name, probed, cfg = first
    added = overrides[len(probed):]
    if run_mode != RunMode.RUN or not from_shell or not validate or config_name != name:
        return None
    if overrides[:len(probed)] != probed or added not in ([], ["hydra.mode=RUN"]):
        return None
    parser = OverridesParser.create()
    if any(o.is_sweep_override() for o in parser.parse_overrides(overrides=list(overrides))):
        return None  # the run's composition refuses it, with its own message
    if MISSING in cfg.hydra.runtime.choices.values():
        return None  # a mandatory default not chosen: skipped by the probe, an error for a run
    _apply(cfg, added, parser)
    return cfg


def _apply(cfg: Any, added: list[str], parser: Any) -> None:
    """Apply `hydra.mode=RUN` as the run's composition would: last, and listed among Hydra's overrides."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    parsed = parser.parse_overrides(overrides=added)
    ConfigLoaderImpl._apply_overrides_to_config(parsed, cfg)
    for override in parsed:
        cfg.hydra.overrides.hydra.append(override.input_line)
