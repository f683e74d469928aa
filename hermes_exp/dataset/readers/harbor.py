"""Harbor task folders as a dataset (`dataset.format=harbor`, or a folder of folders with task.toml):
one task per folder, as Harbor lays it out (harbor-framework/harbor, src/harbor/models/task/paths.py):
instruction.md (the prompt), task.toml, environment/Dockerfile, tests/test.sh, solution/solve.sh.

Each task becomes a row for the parts hermes-exp already has, with Harbor's container paths
(src/harbor/models/trial/paths.py, EnvironmentPaths):
- the image is [environment].docker_image when the engine has or can pull it, else built from
  environment/ (hermes_exp/sandbox/images.py); the agent starts in its WORKDIR;
- tests/ is copied to /tests only after the agent (src/harbor/verifier/verifier.py), test.sh runs there
  and /logs/verifier/reward.json (else reward.txt) is the score: the `command` verifier;
- agent=oracle copies solution/ to /solution and runs solve.sh (src/harbor/agents/oracle.py);
- task.toml's timeouts, cpus, memory and network map onto limits and the container (harbor_toml.py);
  [agent].user runs the agent's commands (and the oracle's solve.sh), [verifier].user runs test.sh.
The task's key covers the whole folder's content, so editing a task runs it again."""

from __future__ import annotations

import logging
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hermes_exp.errors import ConfigError, DatasetError
from hermes_exp.dataset.readers.base import Record
from hermes_exp.dataset.readers.harbor_toml import Parsed, TaskTomlError, read_task_toml
from hermes_exp.sandbox.images import content_digest

log = logging.getLogger(__name__)
TESTS_DIR, SOLUTION_DIR = "/tests", "/solution"


def is_task(folder: Path) -> bool:
    return (folder / "task.toml").is_file()


def is_harbor_folder(path: Path) -> bool:
    """A Harbor task folder, or a folder holding at least one."""
    return path.is_dir() and (is_task(path) or any(is_task(child) for child in path.iterdir() if child.is_dir()))


def base_dir(path: Path) -> Path:
    """The folder the rows' relative paths start at: the dataset folder (one task: its parent)."""
    return path.parent if is_task(path) else path


class HarborSource:
    """The task folders of `path` in name order (index = position); hidden folders are skipped and a
    folder without task.toml is reported as an invalid task. Needs sandbox=docker."""

    unit = "task"
    requires_sandbox = "docker"
    own_images = True  # every task brings its image: sandbox.image is never used

    def __init__(self, path: Path) -> None:
        self._path, self.path = path, str(path)
        self.base = base_dir(path)
        self._reported: set[str] = set()  # task.toml keys already warned about, once each
        self._digests: dict[Path, Any] = {}  # a run reads the tasks twice (scan, dispatch): hash once

    def _folders(self) -> list[Path]:
        if is_task(self._path):
            return [self._path]
        if not self._path.is_dir():
            raise DatasetError(f"dataset.path {self._path} is not a folder of Harbor tasks",
                               "point dataset.path at a folder holding task folders (each with task.toml)")
        return sorted(p for p in self._path.iterdir() if p.is_dir() and not p.name.startswith("."))

    def rows(self) -> Iterator[Record]:
        for index, folder in enumerate(self._folders()):
            where = str(folder / "task.toml")
            try:
                yield Record(index, where, self._row(folder))
            except TaskTomlError as exc:
                yield Record(index, where, None, str(exc))

    def _row(self, folder: Path) -> dict[str, Any]:
        if not is_task(folder):
            raise TaskTomlError("no task.toml: not a Harbor task folder")
        parsed = read_task_toml(folder / "task.toml")
        self._report(folder, parsed)
        name = folder.relative_to(self.base).as_posix()
        row: dict[str, Any] = {"id": name, "prompt": _instruction(folder),
                               "harbor": {"digest": content_digest(folder, self._digests)},
                               "container": _container(folder, name, parsed, self._digests)}
        row.update(_verification(folder, name, parsed))
        if parsed.docker_image and "build" not in row["container"]:
            row["image"] = parsed.docker_image  # the only image: checked (pulled) before the run starts
        if parsed.workdir:
            row["cwd"] = parsed.workdir
        if parsed.agent_timeout is not None:
            row["limits"] = {"task_seconds": parsed.agent_timeout}
        return row

    def _report(self, folder: Path, parsed: Parsed) -> None:
        notes = [(k, "is not a Harbor task.toml key; it is ignored") for k in parsed.unknown]
        notes += [(k, "is not applied by hermes-exp") for k in parsed.ignored]
        env = {**parsed.verifier_env, **parsed.solution_env}
        if any("${" in v for v in env.values()):
            notes.append(("env ${VAR}", "templates are not resolved from the host (they would be stored "
                          "with the task); the text is passed as it is"))
        for key, why in notes:
            if key not in self._reported:
                self._reported.add(key)
                log.warning("%s %s (seen first in %s)", key, why, folder / "task.toml")


def _instruction(folder: Path) -> str:
    try:
        return (folder / "instruction.md").read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TaskTomlError("no instruction.md (the task's prompt)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskTomlError(f"cannot read instruction.md: {exc}") from exc


def _container(folder: Path, name: str, parsed: Parsed, digests: dict[Path, Any]) -> dict[str, Any]:
    """The container the task runs in: built from environment/ (or Harbor's docker_image) with its limits."""
    env_dir = folder / "environment"
    if (env_dir / "docker-compose.yaml").is_file() or (env_dir / "docker-compose.yml").is_file():
        raise TaskTomlError("environment/docker-compose.yaml (several containers) is not supported")
    container: dict[str, Any] = {}
    if not parsed.docker_image and not (env_dir / "Dockerfile").is_file():
        raise TaskTomlError("no environment/Dockerfile (and no [environment].docker_image)")
    if (env_dir / "Dockerfile").is_file():
        container["build"] = {"context": f"{name}/environment", "digest": content_digest(env_dir, digests),
                              "timeout_sec": parsed.build_timeout, "task": name}
        if parsed.docker_image:  # tried first, as in Harbor; pulled by the task that needs it, else built
            container["image"] = parsed.docker_image
    for key, value in (("cpus", parsed.cpus), ("memory_mb", parsed.memory_mb), ("network", parsed.network),
                       ("user", parsed.agent_user)):
        if value is not None:
            container[key] = value
    return container


def _exports(env: dict[str, str]) -> str:
    return "".join(f"export {k}={shlex.quote(v)}; " for k, v in sorted(env.items()))


def _verification(folder: Path, name: str, parsed: Parsed) -> dict[str, Any]:
    """tests/ -> /tests after the agent, test.sh run as the verifier; solution/ -> /solution for agent=oracle."""
    if not (folder / "tests" / "test.sh").is_file():
        raise TaskTomlError("no tests/test.sh (the task's verifier)")
    fields: dict[str, Any] = {
        "tests": f"{name}/tests",
        "verifier": {"kind": "command", "tests_dir": TESTS_DIR, "timeout_seconds": parsed.verifier_timeout,
                     "require_reward_file": True, **({"user": parsed.verifier_user} if parsed.verifier_user else {})},
        "verify": f"{_exports(parsed.verifier_env)}chmod +x {TESTS_DIR}/test.sh && {TESTS_DIR}/test.sh",
    }
    if (folder / "solution" / "solve.sh").is_file():
        fields.update(solution=f"{_exports(parsed.solution_env)}chmod +x {SOLUTION_DIR}/solve.sh && "
                               f"{SOLUTION_DIR}/solve.sh",
                      solution_files=f"{name}/solution", solution_dir=SOLUTION_DIR)
    return fields


def check_sandbox(source: Any, settings: dict[str, Any]) -> None:
    """A Harbor dataset runs in containers built from its tasks: refuse any other sandbox up front,
    and say once that Harbor's default network (public) stays off unless sandbox.network=true."""
    needed = getattr(source, "requires_sandbox", None)
    sandbox = settings.get("sandbox") or {}
    if needed and sandbox.get("kind") != needed:
        raise ConfigError(f"the Harbor dataset {source.path} needs sandbox=docker (each task runs in the image "
                          f"built from its environment/Dockerfile), but sandbox={sandbox.get('kind')} runs no "
                          "containers", "add sandbox=docker to the command (and a reachable engine: DOCKER_HOST)")
    if needed and not sandbox.get("network"):
        log.warning("Harbor tasks have the internet unless their task.toml says network_mode = \"no-network\"; "
                    "with sandbox.network=false every container of %s is offline (tests that download what "
                    "they need will fail): set sandbox.network=true to give it to the tasks that ask", source.path)
