"""Hostile tool calls on every backend: arguments no process can take (NUL, 1 MB), a sparse 1 GB file,
a symlink out of the task directory, and a command flooding its output into a real small tmpfs."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

from hermes_exp.sandbox.base import SPOOL_LIMIT
from hermes_exp.tools import files
from hermes_exp.tools.base import Resources
from hermes_exp.tools.registry import Registry, Toolset
from hermes_exp.tools.terminal import Terminal
from hermes_exp.tools.toolbox import Toolbox

ALL_TOOLS = ["terminal", "read_file", "write_file", "patch", "search_files"]
REGISTRY = Registry([Toolset("terminal", tools={"terminal": Terminal()}),
                     Toolset("file", tools={name: files.FileTool(name) for name in ALL_TOOLS[1:]})])


def _call(sandbox, name: str, **args) -> dict:
    box = Toolbox(REGISTRY, sandbox, {"terminal_timeout": 20}, Resources())
    content, valid = box.call(name, json.dumps(args), ALL_TOOLS)
    assert valid
    return json.loads(content)


def test_nul_bytes_and_huge_arguments_are_tool_errors(sandbox) -> None:
    assert "NUL byte" in _call(sandbox, "terminal", command="echo a\x00b")["error"]
    assert "more than the 100000" in _call(sandbox, "terminal", command="echo " + "x" * 1_000_000)["error"]
    assert "without NUL" in _call(sandbox, "search_files", pattern="a\x00b")["error"]
    assert "at most 10000" in _call(sandbox, "search_files", pattern="x" * 1_000_000)["error"]
    for tool, extra in (("read_file", {}), ("write_file", {"content": "x"}),
                        ("patch", {"old_string": "a", "new_string": "b"})):
        assert "NUL byte" in _call(sandbox, tool, path="a\x00b", **extra)["error"]
    assert _call(sandbox, "write_file", path="big.txt", content="y" * 1_000_000)["bytes_written"] == 1_000_000


def test_read_file_of_a_sparse_1gb_file_reads_only_its_head(sandbox) -> None:
    made = sandbox.exec("truncate -s 1G sparse && printf 'head\\n' | dd of=sparse conv=notrunc 2>/dev/null; "
                        "ls -l sparse", timeout=20)
    assert "1073741824" in made.output, made.output
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = _call(sandbox, "read_file", path="sparse", limit=1)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before) / 1024
    assert result["truncated"] and "only its first" in result["note"]
    assert result["content"] == "     1|head"
    assert grown_mb < 256, f"reading a 1 GB file grew the runner by {grown_mb:.0f} MB"
    assert "too large to patch" in _call(sandbox, "patch", path="sparse", old_string="head", new_string="x")["error"]



def test_file_paths_an_agent_gets_wrong_are_tool_errors_and_a_fifo_does_not_hang(sandbox) -> None:
    """A path under a file, a name too long for the filesystem, a directory or a FIFO to read: the agent's
    mistakes answered as tool errors (the task goes on), never a hang or a failed task."""
    assert _call(sandbox, "write_file", path="a.txt", content="x")["error"] is None
    assert "a directory on its path is a file" in _call(sandbox, "write_file", path="a.txt/b", content="y")["error"]
    assert _call(sandbox, "read_file", path="a.txt/b")["error"]
    long_name = "n" * 300
    assert "too long" in _call(sandbox, "write_file", path=long_name, content="y")["error"]
    assert _call(sandbox, "read_file", path=long_name)["error"]
    assert _call(sandbox, "write_file", path="d1/d2/f.txt", content="deep\n")["bytes_written"] == 5
    assert _call(sandbox, "read_file", path="d1/d2/f.txt")["content"] == "     1|deep"
    assert _call(sandbox, "read_file", path="d1")["error"]
    assert "is a directory" in _call(sandbox, "write_file", path="d1", content="y")["error"]
    assert sandbox.exec("mkfifo pipe && echo made", timeout=10).output.strip() == "made"
    started = time.monotonic()
    assert _call(sandbox, "read_file", path="pipe")["error"]
    assert time.monotonic() - started < 10  # opened without waiting for a writer that never comes

def test_search_files_on_local_judges_where_a_path_resolves(backend, sandbox) -> None:
    if backend.name != "local":
        pytest.skip("on bwrap and docker a symlink resolves inside the sandbox's own filesystem")
    sandbox.exec("ln -s / root && mkdir -p sub && ln -s /etc sub/etc", timeout=10)
    assert "resolves outside" in _call(sandbox, "search_files", pattern="root:", path="root")["error"]
    assert "resolves outside" in _call(sandbox, "search_files", pattern="root:", path="sub/etc")["error"]
    found = _call(sandbox, "search_files", pattern="root:.*:0:0")  # grep -r never follows links it meets
    assert found["count"] == 0, found


def test_file_tools_on_local_stay_confined_when_a_command_swaps_the_task_directory_for_a_symlink(
        backend, sandbox) -> None:
    if backend.name != "local":
        pytest.skip("on bwrap and docker the task directory is a mount the command cannot replace")
    moved = sandbox.exec('d="$PWD" && cd .. && mv "$d" "$d.moved" && ln -s /etc "$d" && echo swapped', timeout=10)
    try:
        assert "swapped" in moved.output, moved.output
        assert "resolves outside" in _call(sandbox, "read_file", path="passwd")["error"]
        assert "resolves outside" in _call(sandbox, "write_file", path="hx-swapped", content="x")["error"]
        assert not os.path.exists("/etc/hx-swapped")
    finally:
        os.unlink(sandbox.workdir)
        os.rename(sandbox.workdir + ".moved", sandbox.workdir)


@pytest.fixture
def small_tmp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A real 400 MB tmpfs as the runner's temp dir (where command output is spooled)."""
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=400m", "tmpfs", str(mount)]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    monkeypatch.setattr(tempfile, "tempdir", str(mount))
    yield mount
    subprocess.run(["umount", "-l", str(mount)])


def _roomy(backend):
    """The spool is on a tmpfs here, whose pages count against bwrap's memory cgroup: with the contract's
    128 MB the kernel's OOM killer could win the race against the 64 MB cap, so these sandboxes get more.
    (The backend's factory is shut down after the test, closing the sandbox.)"""
    return backend.factory(memory_mb=1024).open(f"v1:{uuid.uuid4().hex}", {})


def test_a_flood_of_output_is_capped_on_the_host(backend, small_tmp: Path) -> None:
    sandbox = _roomy(backend)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.005):
            st = os.statvfs(small_tmp)
            peak[0] = max(peak[0], (st.f_blocks - st.f_bfree) * st.f_frsize)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        result = sandbox.exec("yes", timeout=60)
    finally:
        done.set()
        sampler.join()
    assert not result.timed_out and result.truncated
    assert f"printed more than {SPOOL_LIMIT >> 20} MB of output" in result.output
    # the promise is that the host's disk does not fill (this tmpfs holds 400 MB): the watcher polls the
    # spool every <= 50 ms, and on a loaded machine `yes` outruns it by some tens of MB more
    assert peak[0] < 6 * SPOOL_LIMIT, f"the spool reached {peak[0] >> 20} MB"
    assert result.output.startswith("y\ny\n")


def test_a_flood_from_a_background_command_is_capped_too(backend, small_tmp: Path) -> None:
    if backend.name == "docker":
        pytest.skip("a container's background output is dropped past the cap, not spooled: nothing to kill")
    from hermes_exp.tools.terminal import terminal

    sandbox = _roomy(backend)

    started = terminal(sandbox, {"command": "yes", "background": True}, {"terminal_timeout": 20})
    proc = sandbox.background.get(started["session_id"])
    deadline = time.monotonic() + 60
    while proc.exit_code() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert proc.exit_code() is not None, "a background `yes` was never stopped"
    size = os.fstat(proc.log.file.fileno()).st_size
    assert size < 6 * SPOOL_LIMIT, f"the background log reached {size >> 20} MB"  # < the 400 MB disk
    lines, _ = proc.log.tail_lines(None, 2, 200)
    assert f"printed more than {SPOOL_LIMIT >> 20} MB" in lines[-1], (proc.exit_code(), size, lines)
