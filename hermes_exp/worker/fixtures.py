"""Before the agent's first turn: the row's fixtures. `files` ({path: content} or a folder, relative to
the dataset file) are copied into the working directory, then `setup` (a shell command) runs there.
A setup that fails or times out is error class `sandbox`: the task never started, so it is retried."""

from __future__ import annotations

from typing import Any

from hermes_exp.errors import ConfigError, SandboxError
from hermes_exp.sandbox.base import Sandbox, truncate
from hermes_exp.sandbox.files import put_files


def prepare(sandbox: Sandbox, row: dict[str, Any], base_dir: str, timeout: float) -> None:
    try:
        put_files(sandbox, row.get("files"), base_dir, "", "files")
    except ConfigError as exc:
        raise SandboxError(f"cannot copy the row's files into the sandbox: {exc.message}", exc.hint) from exc
    setup = row.get("setup")
    if not setup:
        return
    if not isinstance(setup, str):
        raise SandboxError(f"the row's `setup` is a {type(setup).__name__}, not a shell command",
                           "give `setup` as a string, e.g. \"pip install -q pytest\"")
    done = sandbox.exec(setup, timeout=timeout)
    if done.timed_out or done.exit_code != 0:
        why = f"timed out after {timeout:g}s (setup_timeout)" if done.timed_out else f"exited {done.exit_code}"
        raise SandboxError(f"the row's setup command {why}: {truncate(done.output.strip(), 800)[0]}",
                           "fix the row's `setup` (it runs in the working directory before the agent starts)")
