"""The Sandbox protocol every backend implements, and helpers they share."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any, Protocol

from hermes_exp.errors import ToolError

READ_LIMIT = 16 << 20  # bytes read_file returns when the caller names no smaller limit
SPOOL_LIMIT = 64 << 20  # bytes of one command's output kept on the host while it runs; past it, it is killed
TRUNCATION_MARKER = "\n[... output truncated: {dropped} characters dropped ...]\n"


@dataclass(frozen=True)
class ExecResult:
    """What one command produced. `output` is stdout and stderr interleaved, already truncated."""

    exit_code: int
    output: str
    timed_out: bool = False
    truncated: bool = False


class Sandbox(Protocol):
    """One prompt's isolated environment. Closed exactly once, whatever happened.

    `workdir` is the task directory as commands inside the sandbox see it.
    exec() raises SandboxError when the sandbox itself is broken (not when the command fails).
    read_file()/write_file() take paths relative to `workdir` (or absolute inside it) and raise
    ToolError for paths that escape it, missing files, or directories. read_file() reads at most
    `limit` bytes (the head of the file), never the whole of a file of any size.
    resolve() returns a path relative to `workdir` for a command to use, raising ToolError if it
    escapes — where commands run on the host (local), judged by where it resolves (symlinks).
    spawn() starts a background command (see sandbox/background.py) kept in `background` and killed by
    close(); it raises ToolError when too many run, SandboxError when the sandbox is broken.
    stop_processes() kills every process the sandbox's commands started (before a verification, so
    nothing the agent left running can write the reward); the sandbox stays open for more commands.
    """

    workdir: str
    background: Any  # a BackgroundSet

    def spawn(self, command: str) -> Any: ...

    def exec(self, command: str, timeout: float) -> ExecResult: ...

    def stop_processes(self) -> None: ...

    def read_file(self, path: str, limit: int = READ_LIMIT) -> bytes: ...

    def resolve(self, path: str) -> str: ...

    def write_file(self, path: str, data: bytes) -> None: ...

    def close(self) -> None: ...


class SandboxFactory(Protocol):
    """Built once per run from `cfg.sandbox` (via `_target_`); opens one sandbox per task.

    open() raises SandboxError when no sandbox can be made for this task (e.g. its image is missing).
    """

    def preflight(self, rows_images: set[str] | None = None, default_image: bool = True) -> None:
        """Fail the whole run before any task starts if this kind cannot work here (engine down,
        bubblewrap missing), and remove what a killed earlier invocation of the run left. `rows_images`:
        the images rows name; `default_image`: whether the run's default image is used at all."""
        ...

    def open(self, task_key: str, row: dict[str, Any]) -> Sandbox: ...

    def shutdown(self) -> None: ...


# why a file tool cannot write a path the agent gave (its mistake, a tool error), the same on every backend
THROUGH_A_FILE = "a directory on its path is a file"
NAME_TOO_LONG = "a name on its path is too long"


def confine(workdir: str, path: str) -> str:
    """Return `path` as a path relative to `workdir`, refusing any path that escapes it."""
    if not isinstance(path, str) or not path.strip():
        raise ToolError("path must be a non-empty string")
    if "\x00" in path:
        raise ToolError("path contains a NUL byte, which no file name can hold")
    joined = posixpath.normpath(posixpath.join(workdir, path))
    root = posixpath.normpath(workdir)
    if joined != root and not joined.startswith(root.rstrip("/") + "/"):
        raise ToolError(f"path {path!r} is outside the working directory {workdir}; use a path inside it")
    return posixpath.relpath(joined, root)


def truncate(text: str, limit: int) -> tuple[str, bool]:
    """Keep the head and tail of `text` within `limit` characters, with a marker between them."""
    if len(text) <= limit:
        return text, False
    head = limit * 2 // 3
    tail = limit - head
    dropped = len(text) - head - tail
    return text[:head] + TRUNCATION_MARKER.format(dropped=dropped) + text[len(text) - tail :], True
