"""The sandbox section is read by one reader for every backend (sandbox/options.py): a value a factory
would misread is refused with its key, the value, what is valid and the fix, before the run directory
is claimed by that config."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes_exp.errors import ConfigError
from hermes_exp.sandbox import options
from hermes_exp.sandbox.bwrap import BwrapSandboxFactory
from hermes_exp.sandbox.docker import DockerSandboxFactory
from hermes_exp.sandbox.local import LocalSandboxFactory
from tests.conftest import run_cli

BAD = [  # (reader, key, value, what the message says)
    ("docker", "memory_mb", "lots", "must be a positive integer"),
    ("docker", "memory_mb", 0, "must be a positive integer"),
    ("docker", "cpus", -1, "must be a positive number"),
    ("docker", "cpus", True, "must be a positive number"),
    ("docker", "pids_limit", 1.5, "must be an integer >= 0"),
    ("docker", "network", "maybe", "must be true, false or null"),
    ("docker", "read_only", 1, "must be true, false or null"),
    ("docker", "max_sandboxes", "x", "must be an integer >= 0"),
    ("docker", "pull_timeout", 0, "must be a positive number"),
    ("docker", "max_builds", 0, "must be an integer >= 1"),
    ("docker", "max_starts_per_second", -2, "must be a number >= 0"),
    ("docker", "warm_pool", "4", "must be an integer >= 0"),
    ("docker", "image", "", "must be a non-empty string"),
    ("docker", "base_url", 5, "must be a non-empty string"),
    ("docker", "runtime", "", "must be a non-empty string"),
    ("docker", "output_limit", 0, "must be a positive integer"),
    ("docker", "env", ["A=1"], "must be a mapping"),
    ("docker", "env", {"A=B": "1"}, "a variable needs a name without '='"),
    ("bwrap", "memory_mb", -1, "must be an integer >= 0"),
    ("bwrap", "cpu_seconds", "600s", "must be an integer >= 0"),
    ("bwrap", "pids_limit", -5, "must be an integer >= 0"),
    ("bwrap", "keep", "yes", "must be true, false or null"),
    ("local", "output_limit", -1, "must be a positive integer"),
    ("local", "root", "", "must be a non-empty string"),
    ("local", "env", {"X": {"nested": 1}}, "a plain value"),
]


@pytest.mark.parametrize("reader, key, value, says", BAD)
def test_a_bad_value_names_its_key_value_and_fix(reader, key, value, says) -> None:
    with pytest.raises(ConfigError) as err:
        options.READERS[reader]({key: value})
    assert f"sandbox.{key}" in str(err.value) and says in str(err.value)
    assert f"sandbox.{key}" in err.value.hint


def test_the_factories_read_their_values_through_the_same_reader() -> None:
    for factory, key, value in ((DockerSandboxFactory, "cpus", -1), (BwrapSandboxFactory, "cpu_seconds", "x"),
                                (LocalSandboxFactory, "output_limit", 0)):
        with pytest.raises(ConfigError, match=f"sandbox.{key}"):
            factory(**{key: value})


def test_defaults_nulls_and_env_values() -> None:
    got = options.docker({"cpus": None, "image": "busybox", "env": {"N": 3, "F": 1.5}})
    assert got["cpus"] == 1.0 and got["image"] == "busybox" and got["env"] == {"N": "3", "F": "1.5"}
    assert got["max_sandboxes"] == 8 and got["remove_in_background"] is True and got["base_url"] is None
    assert got["runtime"] is None  # the engine's default runtime
    assert options.bwrap({})["memory_mb"] == 4096 and options.host({"keep": None})["keep"] is False
    with pytest.raises(ConfigError, match="sandbox.image"):
        options.docker({"image": None})  # the default image is the section's; null is not "no image"


def test_a_users_own_factory_is_left_to_read_its_own_settings() -> None:
    options.check({"_target_": "my_pkg.MyFactory", "cpus": "whatever"})
    with pytest.raises(ConfigError, match="sandbox.cpus"):
        options.check({"_target_": "hermes_exp.sandbox.docker.DockerSandboxFactory", "cpus": "whatever"})


def test_the_cli_refuses_before_claiming_the_run_directory(tmp_path: Path) -> None:
    """A bad value exits 2 with its key and fix, and leaves no ledger: the corrected command then runs
    in the same run directory, not against an identity the mistake had claimed."""
    bad = run_cli(tmp_path, "run_name=opts", "sandbox=local", "sandbox.output_limit=0")
    assert bad.returncode == 2, bad.stderr
    assert "error: sandbox.output_limit=0 must be a positive integer" in bad.stderr
    assert "fix: set sandbox.output_limit=<positive integer>" in bad.stderr
    assert not (tmp_path / "outputs" / "opts" / "ledger.db").exists()
    good = run_cli(tmp_path, "run_name=opts", "sandbox=local", "max_samples=1")
    assert good.returncode == 0, good.stderr
