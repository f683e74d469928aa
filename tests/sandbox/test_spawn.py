"""How a tool command is started (sandbox/spawn.py): through glibc's posix_spawn where it can, through Popen
where it cannot, and the command cannot tell which: the same descriptors (0-2 only, even beside an
inheritable one of the runner's), stdin /dev/null read-write, stdout and stderr into the spool, the working
directory, exactly the environment, its own session and process group, the signal dispositions and mask,
umask and rlimits, exit statuses and start errors. Real processes, compared with each other."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from hermes_exp.sandbox import spawn as spawn_mod
from hermes_exp.sandbox.process import clean_env, read_spool, run_group, spool

needs_libc = pytest.mark.skipif(spawn_mod._LIBC is None, reason="no glibc >= 2.34 posix_spawn file actions here")
STARTS = {"posix_spawn": spawn_mod.posix_spawn, "popen": spawn_mod.popen}

PROPERTIES = r"""
readlink /proc/$$/fd/0; echo into-stdin >&0 && echo stdin-writable
pwd; env | sort | tr '\n' ' '; echo
echo "$$ $(cut -d' ' -f5,6 /proc/$$/stat)"
grep -E '^Sig(Blk|Ign)' /proc/self/status | tr '\n' ' '; echo
umask; ulimit -n; ulimit -c
yes | head -n 1
echo to-stderr >&2
"""


def _run(start, command: str, cwd: str | None, env: dict[str, str]) -> tuple[int, int, str]:
    out = spool()
    try:
        child = start(["/bin/sh", "-c", command], cwd=cwd, env=env, out=out)
        code = child.wait()
        return child.pid, code, read_spool(out, 100_000)[0]
    finally:
        os.close(out)


def _run_argv(start, argv: list[str], cwd: str) -> str:
    out = spool()
    try:
        assert start(argv, cwd=cwd, env={}, out=out).wait() == 0
        return read_spool(out, 100_000)[0]
    finally:
        os.close(out)


def _inherited_ignored() -> int:
    """The signals a command inherits as ignored: those this process ignores (a run under `nohup` ignores
    SIGHUP, and so do its commands, with Popen as with posix_spawn), less SIGPIPE and SIGXFSZ, which
    Python ignores for itself and both starts put back to their defaults."""
    status = Path("/proc/self/status").read_text()
    ignored = int(next(line for line in status.splitlines() if line.startswith("SigIgn:")).split("\t")[1], 16)
    return ignored & ~(1 << (signal.SIGPIPE - 1)) & ~(1 << (signal.SIGXFSZ - 1))


@needs_libc
def test_a_command_sees_the_same_process_either_way(tmp_path: Path) -> None:
    env = clean_env(str(tmp_path), {"EXTRA": "a=b,c", "EMPTY": ""})
    seen = {name: _run(start, PROPERTIES, str(tmp_path), env) for name, start in STARTS.items()}
    outputs = {}
    for name, (pid, code, output) in seen.items():
        assert code == 0, output
        lines = output.splitlines()
        assert lines[0:2] == ["/dev/null", "stdin-writable"], name
        assert lines[2] == str(tmp_path), name
        assert lines[3].split(" ") == sorted(f"{k}={v}" for k, v in env.items()) + [""], name
        assert lines[4] == f"{pid} {pid} {pid}", name  # process group and session led by the command
        ignored = int(lines[5].split("SigIgn:\t")[1].split()[0], 16)
        assert ignored == _inherited_ignored(), (name, lines[5])  # SIGPIPE back to its default
        assert lines[9:] == ["y", "to-stderr"], name  # `yes` died of SIGPIPE quietly, stderr in the spool
        outputs[name] = lines[:4] + lines[5:]
    assert outputs["posix_spawn"] == outputs["popen"]


@needs_libc
def test_a_command_gets_no_descriptor_beyond_0_1_2_even_an_inheritable_one(tmp_path: Path) -> None:
    leaked_r, leaked_w = os.pipe()
    os.set_inheritable(leaked_r, True)
    os.set_inheritable(leaked_w, True)
    try:
        for name, start in STARTS.items():
            listing = _run_argv(start, ["/bin/ls", "-l", "/proc/self/fd"], str(tmp_path))
            links = [line.split(" -> ") for line in listing.splitlines() if " -> " in line]
            fds = {link.split()[-1]: target for link, target in links}
            # 0-2, and the one `ls` opened to read the listing (a pipe of ours would show as pipe:[...])
            assert set(fds) == {"0", "1", "2", "3"} and fds["3"].startswith("/proc/"), (name, listing)
            assert fds["0"] == "/dev/null" and fds["1"] == fds["2"], (name, listing)
    finally:
        os.close(leaked_r)
        os.close(leaked_w)


@needs_libc
def test_the_callers_signal_mask_ignored_signals_umask_and_limits_are_inherited_as_with_popen(tmp_path: Path) -> None:
    seen: dict[str, tuple[str, str]] = {}
    old_ignore = signal.signal(signal.SIGUSR2, signal.SIG_IGN)  # ignored stays ignored across exec
    old_umask = os.umask(0o027)
    old_core = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (0, old_core[1]))

    def in_thread() -> None:  # a session thread with SIGUSR1 blocked: its mask is the command's
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
        for name, start in STARTS.items():
            # grep itself, not under sh: dash clears the mask of what it starts
            masks = _run_argv(start, ["/bin/grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"], str(tmp_path))
            seen[name] = masks, _run(start, "umask; ulimit -n; ulimit -c", str(tmp_path), {})[2]

    try:
        worker = threading.Thread(target=in_thread)
        worker.start()
        worker.join()
    finally:
        signal.signal(signal.SIGUSR2, old_ignore)
        os.umask(old_umask)
        resource.setrlimit(resource.RLIMIT_CORE, old_core)
    for name, (masks, limits) in seen.items():
        blocked, ignored = (int(line.split("\t")[1], 16) for line in masks.splitlines())
        wanted = (1 << (signal.SIGUSR1 - 1), _inherited_ignored() | 1 << (signal.SIGUSR2 - 1))
        assert (blocked, ignored) == wanted, (name, masks)
        assert limits.split() == ["0027", str(resource.getrlimit(resource.RLIMIT_NOFILE)[0]), "0"], name
    assert seen["posix_spawn"] == seen["popen"]


@pytest.mark.parametrize("start", STARTS.values(), ids=STARTS.keys())
def test_exit_statuses_are_popens(start, tmp_path: Path) -> None:
    if start is spawn_mod.posix_spawn and spawn_mod._LIBC is None:
        pytest.skip("no glibc posix_spawn here")
    assert _run(start, "exit 3", str(tmp_path), {})[1] == 3
    assert _run(start, "kill -9 $$", str(tmp_path), {})[1] == -signal.SIGKILL
    assert _run(start, "pwd", None, {})[2] == os.getcwd() + "\n"  # no cwd: the runner's own


@pytest.mark.parametrize("start", STARTS.values(), ids=STARTS.keys())
def test_start_errors_are_popens(start, tmp_path: Path) -> None:
    if start is spawn_mod.posix_spawn and spawn_mod._LIBC is None:
        pytest.skip("no glibc posix_spawn here")
    out = spool()
    try:
        with pytest.raises(FileNotFoundError) as gone:
            start(["/bin/sh", "-c", "true"], cwd=str(tmp_path / "gone"), env={}, out=out)
        assert gone.value.filename == str(tmp_path / "gone")
        with pytest.raises(FileNotFoundError) as missing:
            start([str(tmp_path / "no-such-program")], cwd=str(tmp_path), env={}, out=out)
        assert missing.value.filename == str(tmp_path / "no-such-program")
        for argv, env in ((["/bin/sh", "-c", "echo a\0b"], {}), (["/bin/sh", "-c", "true"], {"A": "x\0y"}),
                          (["/bin/sh", "-c", "true"], {"A=B": "x"})):
            with pytest.raises(ValueError):
                start(argv, cwd=str(tmp_path), env=env, out=out)
    finally:
        os.close(out)


@needs_libc
def test_run_group_starts_commands_without_popen_where_glibc_can(tmp_path: Path, monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("Popen used")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    result = run_group(["/bin/sh", "-c", "pwd; echo err >&2; exit 4"], cwd=str(tmp_path), env=clean_env(str(tmp_path)),
                       timeout=10, output_limit=1000)
    assert (result.exit_code, result.output) == (4, f"{tmp_path}\nerr\n")
