"""The hermes-exp command starts again with glibc's per-thread malloc cache off (hermes_exp/launch.py),
keeping the user's own tunables, once."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from hermes_exp.launch import tunables

REPO = Path(__file__).resolve().parent.parent
glibc = pytest.mark.skipif(not (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"), reason="glibc only")


def test_tunables_add_the_cache_setting_and_keep_the_users() -> None:
    assert tunables(None) == "glibc.malloc.tcache_count=0"
    assert tunables("glibc.malloc.arena_max=2") == "glibc.malloc.arena_max=2:glibc.malloc.tcache_count=0"
    assert tunables("glibc.malloc.tcache_count=3") is None  # the user's choice stands
    assert tunables("glibc.malloc.arena_max=2:glibc.malloc.tcache_count=0") is None  # already off: no second start


def _run(code: str, tunables_env: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    if tunables_env is not None:
        env["GLIBC_TUNABLES"] = tunables_env
    return subprocess.run([sys.executable, "-c", code, "an-argument"], env=env, capture_output=True, text=True,
                          timeout=60, check=True)


@glibc
def test_reexec_starts_the_same_command_once_with_the_cache_off() -> None:
    code = ("import os, sys; print('start', os.getpid()); from hermes_exp.launch import reexec; reexec(); "
            "print('after', os.getpid(), sys.argv[1:], os.environ.get('GLIBC_TUNABLES'))")
    lines = _run(code, "glibc.malloc.arena_max=4").stdout.splitlines()
    pid = lines[0].split()[1]
    # the first start's output is flushed before the exec; the same process (pid) runs the command again
    assert lines == [f"start {pid}", f"start {pid}",
                     f"after {pid} ['an-argument'] glibc.malloc.arena_max=4:glibc.malloc.tcache_count=0"]


@glibc
def test_reexec_leaves_a_users_cache_setting_alone() -> None:
    code = "from hermes_exp.launch import reexec; print('start'); reexec(); import os; print(os.environ['GLIBC_TUNABLES'])"
    assert _run(code, "glibc.malloc.tcache_count=7").stdout.splitlines() == ["start", "glibc.malloc.tcache_count=7"]


def test_the_console_command_goes_through_the_launcher() -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["hermes-exp"] == "hermes_exp.launch:main"


@glibc
def test_the_launcher_runs_the_cli() -> None:
    code = "import sys; sys.argv = ['hermes-exp', '--list-toolsets']; from hermes_exp.launch import main; main()"
    out = _run(code, None).stdout
    assert "terminal" in out



@glibc
def test_python_m_hermes_exp_is_the_command_with_its_restart(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(  # each interpreter start says what it was started with
        "import os, sys; print('started with', os.environ.get('GLIBC_TUNABLES'), file=sys.stderr)\n")
    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), *filter(None, [env.get("PYTHONPATH")])])
    done = subprocess.run([sys.executable, "-m", "hermes_exp", "--list-toolsets"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and "terminal" in done.stdout, done.stderr
    starts = [line for line in done.stderr.splitlines() if line.startswith("started with")]
    assert starts == ["started with None", "started with glibc.malloc.tcache_count=0"], done.stderr
