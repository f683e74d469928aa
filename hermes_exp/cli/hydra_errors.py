"""Hydra's and OmegaConf's errors as hermes-exp's own: one `error:` line naming the bad override, the valid
choices and a fix, exit 2. Hydra prints its own (an option list with its search path, "To append to your
config use +key=..." for a misspelt key, a stripped traceback) and exits 1 unless HYDRA_FULL_ERROR is set;
set, its errors reach the caller, and `translated()` says them the way every other config error is said.
A user who sets HYDRA_FULL_ERROR themselves gets Hydra's full traceback, as Hydra documents."""

from __future__ import annotations

import difflib
import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hermes_exp.errors import ConfigError, HermesExpError, StorageError

FULL_ERROR = "HYDRA_FULL_ERROR"
KEY_CUTOFF = 0.75  # max_turn -> max_turns, modle -> model, pth -> path, temprature -> temperature
OPTION_CUTOFF = 0.6  # answers -> answer, gpt5 -> gpt4o
UNWRITABLE = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.ENOSPC, errno.EDQUOT}


@contextmanager
def translated(argv: list[str]) -> Iterator[None]:
    """Within this block Hydra raises its errors instead of printing them; each leaves it as a
    HermesExpError (`argv`: the command's arguments, for the value given to a misspelt key)."""
    users = os.environ.get(FULL_ERROR)
    if users is None:
        os.environ[FULL_ERROR] = "1"
    try:
        yield
    except HermesExpError:
        raise
    except Exception as exc:  # noqa: BLE001 - only the kinds explain() knows are replaced
        error = None if users is not None else explain(exc, argv)
        if error is None:
            raise
        raise error from exc
    finally:
        if users is None:
            os.environ.pop(FULL_ERROR, None)


def explain(exc: BaseException, argv: list[str]) -> HermesExpError | None:
    """The error a user can act on for a Hydra, OmegaConf or file-system error; None for anything else."""
    from hydra.errors import ConfigCompositionException, MissingConfigException, OverrideParseException
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

    if isinstance(exc, MissingConfigException):
        return missing_option(exc)
    if isinstance(exc, OverrideParseException):
        return ConfigError(f"cannot read the override {exc.override!r}: {exc.message.splitlines()[0]}",
                           "write KEY=VALUE or GROUP=OPTION; quote a value with spaces, commas or brackets in "
                           "it: key='a, b' (in the shell: \"key='a, b'\")")
    if isinstance(exc, ConfigCompositionException):
        cause = exc.__cause__
        if isinstance(cause, (ConfigKeyError, ConfigAttributeError)) and cause.parent_node is not None:
            return unknown_key(cause, argv)
        if cause is None and (sweep := _sweep_without_m(argv)):
            return ConfigError(f"{sweep}: a comma-separated value sweeps, which needs -m",
                               f"hermes-exp -m ... {sweep} (one job per value); a list: key=[a,b]; text with a "
                               f"comma, quoted: \"key='a,b'\"")
        detail = f"\n  {_first_line(cause)}" if isinstance(cause, OmegaConfBaseException) else ""
        return ConfigError(f"{exc}{detail}", "see the groups and their options with hermes-exp --help")
    if isinstance(exc, OmegaConfBaseException):
        where = f"{exc.full_key}: " if exc.full_key else ""
        return ConfigError(f"{where}{_first_line(exc)}",
                           "check the values given (hermes-exp --cfg job shows the config they make)")
    return unwritable(exc)


def _first_line(exc: Any) -> str:
    """OmegaConf's message without the `full_key:` / `object_type=` lines it appends."""
    return str(exc.msg or exc).splitlines()[0]


def _sweep_without_m(argv: list[str]) -> str | None:
    """The first `key=a,b` of a command run without -m (Hydra: "Ambiguous value for argument")."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if "-m" in argv or "--multirun" in argv:
        return None
    parser = OverridesParser.create()
    for arg in argv:
        if "=" in arg and not arg.startswith("-"):
            try:
                if parser.parse_override(arg).is_sweep_override():
                    return arg
            except Exception:  # noqa: BLE001 - not this one
                continue
    return None


def missing_option(exc: Any) -> ConfigError:
    """`model=gpt5`: the group's options, the closest one first."""
    missing = str(exc.missing_cfg_file or "")
    options = list(exc.options or [])
    if "/" not in missing or not options:  # the primary config itself (--config-path, --config-name)
        return ConfigError(str(exc).split("\nConfig search path")[0].strip(),
                           "give --config-path an absolute path to a folder holding the --config-name file "
                           "(e.g. --config-path $PWD/outputs/<run>/.hydra --config-name config)")
    group, option = missing.rsplit("/", 1)
    close = difflib.get_close_matches(option, options, n=1, cutoff=OPTION_CUTOFF)
    meant = f": did you mean {group}={close[0]}?" if close else ""
    return ConfigError(f"{group}={option} is not an option of the config group {group}{meant}\n"
                       f"  {group}'s options: {', '.join(sorted(options))}",
                       f"choose one of them, e.g. {group}={close[0] if close else sorted(options)[0]}; or write "
                       f"your own as DIR/{group}/{option}.yaml and add --config-dir DIR")


def unknown_key(cause: Any, argv: list[str]) -> ConfigError:
    """`max_turn=3`: a key the config does not have, and the one it probably meant."""
    from omegaconf import OmegaConf

    full = str(cause.full_key or cause.key)
    parent = full[: -len(str(cause.key))].rstrip(".") if full.endswith(str(cause.key)) else ""
    given, value = _override(argv, full)
    node = OmegaConf.to_container(cause.parent_node, resolve=False)
    if parent and not node:  # dataset.fields, mcp.servers: maps the user fills, with +
        shown = f"{given}={value}" if value is not None else given
        return ConfigError(f"{parent} holds no keys yet: {shown} adds one, which takes a +",
                           f"+{shown}" if value is not None else f"+{given}=...")
    if not parent and isinstance(node, dict):
        node.pop("hydra", None)  # Hydra's own settings are not what a misspelt key of the run meant
    match = _closest(str(cause.key), node if isinstance(node, dict) else {})
    add = f"+{given}={value}" if value is not None else f"+{given}=..."
    if match is None:
        return ConfigError(f"{given} is not a setting of the config (none is named like it)",
                           f"see every setting with: hermes-exp --cfg job; to add a new key on purpose: {add}")
    meant = ".".join(p for p in (parent, match) if p) + given[len(full):]
    return ConfigError(f"{given} is not a setting of the config: did you mean {meant}?",
                       f"{meant}={value if value is not None else '...'}; to add {given} as a new key on purpose: "
                       f"{add}")


def _override(argv: list[str], full: str) -> tuple[str, str | None]:
    """The key as typed (`model.sampl.temperature` for the missing `model.sampl`) and its value."""
    for arg in argv:
        key, sep, value = arg.partition("=")
        key = key.lstrip("~+")
        if sep and not arg.startswith("-") and (key == full or key.startswith(full + ".")):
            return key, value
    return full, None


def _closest(name: str, node: dict[str, Any]) -> str | None:
    """The path under `node` whose last part is most like `name`; the shallowest of equals."""
    paths = dict(_paths(node, ""))
    best = difflib.get_close_matches(name, set(paths.values()), n=1, cutoff=KEY_CUTOFF)
    if not best:
        return None
    return min((p for p, n in paths.items() if n == best[0]), key=lambda p: (p.count("."), p))


def _paths(node: dict[str, Any], prefix: str) -> Iterator[tuple[str, str]]:
    for key, value in node.items():
        yield f"{prefix}{key}", str(key)
        if isinstance(value, dict):
            yield from _paths(value, f"{prefix}{key}.")


def unwritable(exc: BaseException) -> StorageError | None:
    """A run or sweep directory that cannot be made or written (Hydra makes it and opens its log there
    before the run starts: the log's error comes wrapped in a ValueError of the logging module)."""
    seen: BaseException | None = exc
    while seen is not None and not (isinstance(seen, OSError) and seen.errno in UNWRITABLE):
        seen = seen.__cause__
    if seen is None:
        return None
    where = os.path.abspath(seen.filename) if getattr(seen, "filename", None) else "the run directory"
    return StorageError(f"cannot write {where}: {seen.strerror}",
                        "run hermes-exp in a folder you can write to, or put the run elsewhere with "
                        "hydra.run.dir=/a/writable/folder (a -m sweep: hydra.sweep.dir=...)")
