"""Toolset `file`: read, write, patch and search files, confined to the sandbox's working directory."""

from __future__ import annotations

import shlex
from typing import Any

from hermes_exp.errors import ToolError
from hermes_exp.sandbox.base import Sandbox, truncate
from hermes_exp.tools.base import ToolContext, function_schema as _schema, text_arg as _text_arg

_S = {"type": "string"}
_I = {"type": "integer"}
READ_FILE = _schema("read_file", "Read a text file in your working directory, with line numbers.",
                    {"path": _S, "offset": {**_I, "description": "First line (1-based)."},
                     "limit": {**_I, "description": "Number of lines."}}, ["path"])
WRITE_FILE = _schema("write_file", "Create or overwrite a file in your working directory.",
                     {"path": _S, "content": _S}, ["path", "content"])
PATCH = _schema("patch", "Replace an exact string in a file (must match once unless replace_all).",
                {"path": _S, "old_string": _S, "new_string": _S, "replace_all": {"type": "boolean"}},
                ["path", "old_string", "new_string"])
SEARCH_FILES = _schema("search_files", "Search file contents under a directory for a regular expression.",
                       {"pattern": _S, "path": {**_S, "description": "Directory (default: working dir)."}},
                       ["pattern"])


READ_CAP = 1 << 20  # bytes of a file read_file looks at: a runner with 64 sessions must not hold GBs
PATCH_CAP = 8 << 20  # patch rewrites the whole file, so it must read all of it
PATTERN_CAP = 10_000  # characters of a search pattern (it goes on a command line)


def _int_arg(args: dict[str, Any], name: str, default: int) -> int:
    value = args.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or abs(value) > 1e12:
        raise ToolError(f"'{name}' must be a whole number of lines")
    return int(value)


def read_file(sandbox: Sandbox, args: dict[str, Any], limits: dict[str, Any]) -> dict[str, Any]:
    path = _text_arg(args, "path")
    data = sandbox.read_file(path, READ_CAP + 1)
    capped = len(data) > READ_CAP
    lines = data[:READ_CAP].decode("utf-8", "replace").splitlines()
    offset = max(_int_arg(args, "offset", 1), 1)
    limit = _int_arg(args, "limit", len(lines) or 1)
    chosen = lines[offset - 1 : offset - 1 + limit]
    numbered = "\n".join(f"{offset + i:6d}|{line}" for i, line in enumerate(chosen))
    content, truncated = truncate(numbered, int(limits.get("max_output_chars", 20000)))
    result = {"content": content, "total_lines": len(lines), "truncated": truncated or capped, "error": None}
    if capped:
        result["note"] = (f"the file is larger than {READ_CAP} bytes: only its first {READ_CAP} bytes were read "
                          "(total_lines counts those); read further with the terminal, e.g. sed -n '100000,100100p'")
    return result


def write_file(sandbox: Sandbox, args: dict[str, Any], limits: dict[str, Any]) -> dict[str, Any]:
    path = _text_arg(args, "path")
    content = _text_arg(args, "content", allow_empty=True)
    sandbox.write_file(path, content.encode("utf-8"))
    return {"path": path, "bytes_written": len(content.encode("utf-8")), "error": None}


def patch(sandbox: Sandbox, args: dict[str, Any], limits: dict[str, Any]) -> dict[str, Any]:
    path = _text_arg(args, "path")
    old = _text_arg(args, "old_string")
    new = _text_arg(args, "new_string", allow_empty=True)
    data = sandbox.read_file(path, PATCH_CAP + 1)
    if len(data) > PATCH_CAP:
        raise ToolError(f"{path} is larger than {PATCH_CAP} bytes, too large to patch; edit it with the terminal")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start}); patch edits text files") from exc
    found = text.count(old)
    if found == 0:
        raise ToolError(f"old_string not found in {path}")
    if found > 1 and not args.get("replace_all"):
        raise ToolError(f"old_string occurs {found} times in {path}; add context or set replace_all")
    sandbox.write_file(path, text.replace(old, new).encode("utf-8"))
    return {"path": path, "replacements": found if args.get("replace_all") else 1, "error": None}


def search_files(sandbox: Sandbox, args: dict[str, Any], limits: dict[str, Any]) -> dict[str, Any]:
    pattern = _text_arg(args, "pattern")
    if "\x00" in pattern or len(pattern) > PATTERN_CAP:
        raise ToolError(f"'pattern' must be a regular expression of at most {PATTERN_CAP} characters, without NUL")
    where = sandbox.resolve(args.get("path") or ".")
    command = f"grep -rnIE -e {shlex.quote(pattern)} -- {shlex.quote(where)} | head -n 200"
    result = sandbox.exec(command, timeout=float(limits.get("terminal_timeout", 60)))
    matches = [line for line in result.output.splitlines() if line]
    return {"matches": matches, "count": len(matches), "error": None}


class FileTool:
    """One of the `file` tools, chosen by name (`read_file`, `write_file`, `patch`, `search_files`)."""

    _TOOLS = {"read_file": (READ_FILE, read_file), "write_file": (WRITE_FILE, write_file),
              "patch": (PATCH, patch), "search_files": (SEARCH_FILES, search_files)}

    def __init__(self, name: str) -> None:
        if name not in self._TOOLS:
            raise ValueError(f"no file tool {name!r}; choose one of {', '.join(self._TOOLS)}")
        self.schema, self._run = self._TOOLS[name]

    def missing(self, mock: bool) -> str | None:
        return None

    def __call__(self, ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        return self._run(ctx.sandbox, args, ctx.limits)
