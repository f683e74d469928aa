"""Harbor task folders as a dataset, through the real CLI, the mock model and a real Docker engine:
images built from each task's environment/Dockerfile (FROM a locally built busybox image), tests
copied to /tests after the agent, rewards from /logs/verifier, agent=oracle running solve.sh, a
broken Dockerfile failing only its own task; task.toml read and reported without an engine."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli

from hermes_exp.dataset.readers.harbor import HarborSource
from hermes_exp.dataset.readers.harbor_toml import TaskTomlError, read_task_toml
from hermes_exp.sandbox.images import CONTEXT_LABEL, TAG_REPO
from tests.sandbox.conftest import IMAGE, docker_problem, unavailable

TEST_SH = ('#!/bin/sh\nif [ "$(cat /app/out.txt 2>/dev/null)" = hello ]; then echo 1 > /logs/verifier/reward.txt; '
           'else echo 0 > /logs/verifier/reward.txt; fi\n')
SOLVE_SH = "#!/bin/sh\necho hello > /app/out.txt\n"
TOML = '[metadata]\ndifficulty = "easy"\n\n[verifier]\ntimeout_sec = 60.0\n\n[agent]\ntimeout_sec = 120.0\n\n' \
       '[environment]\nbuild_timeout_sec = 120.0\ncpus = 1\nmemory_mb = 256\n'


def make_task(root: Path, name: str, instruction: str, dockerfile: str, toml: str = TOML) -> Path:
    task = root / name
    for sub in ("environment", "tests", "solution"):
        (task / sub).mkdir(parents=True, exist_ok=True)
    (task / "instruction.md").write_text(instruction)
    (task / "task.toml").write_text(toml)
    (task / "environment" / "Dockerfile").write_text(dockerfile)
    (task / "tests" / "test.sh").write_text(TEST_SH)
    (task / "solution" / "solve.sh").write_text(SOLVE_SH)
    return task


def make_dataset(root: Path, nonce: str) -> Path:
    """Two tasks sharing one build context (built once), and one whose Dockerfile fails."""
    good = f"FROM {IMAGE}\nLABEL hx.test.nonce={nonce}\nWORKDIR /app\nRUN echo built > /app/.built\n"
    make_task(root, "solved", "Write hello to /app/out.txt.\nRUN: echo hello > /app/out.txt\n", good)
    make_task(root, "unsolved", "Write hello to /app/out.txt.\nRUN: ls /tests/test.sh\nRUN: echo bye > /app/out.txt\n",
              good, TOML + "fancy_new_option = true\n")
    make_task(root, "broken", "Anything.\nRUN: true\n", f"FROM {IMAGE}\nLABEL hx.test.nonce={nonce}\nRUN echo broken-step-marker && exit 7\n")
    return root


def ledger(run_dir: Path) -> dict[str, dict[str, Any]]:
    with sqlite3.connect(run_dir / "ledger.db") as db:
        db.row_factory = sqlite3.Row
        tasks = {r["key"]: dict(r) for r in db.execute("SELECT key, prompt_index, state, error_class, error, result FROM tasks "
                                                  "ORDER BY finished_at")}
        for key, reward, error in db.execute("SELECT key, reward, error FROM scores"):
            tasks[key].update(reward=reward, score_error=error)
    return {json.loads(t["result"])["row"]["id"]: t for t in tasks.values()}


def docker_errors(engine: Any) -> type[Exception]:
    import docker

    return docker.errors.NotFound


def built_by(engine: Any, nonce: str) -> list[Any]:
    return engine.images.list(name=TAG_REPO, filters={"label": f"hx.test.nonce={nonce}"})


@pytest.fixture
def engine() -> Iterator[Any]:
    problem = docker_problem()
    if problem:
        unavailable(problem)
    import docker

    client = docker.from_env()
    yield client


@pytest.fixture
def nonce(engine: Any) -> Iterator[str]:
    """Makes this test's build contexts new to the engine; their images are removed afterwards."""
    value = uuid.uuid4().hex
    yield value
    leftovers = engine.images.list(all=True, filters={"label": f"hx.test.nonce={value}"})  # the broken build's layers too
    for image in sorted(leftovers, key=lambda i: i.attrs["Created"], reverse=True):  # children first
        try:
            engine.images.remove(image.id, force=True)
        except docker_errors(engine):  # already gone with its child
            pass


def _args(data: Path, run_name: str, base_url: str, *extra: str) -> list[str]:
    return [f"dataset.path={data}", f"run_name={run_name}", "sandbox=docker", f"sandbox.image={IMAGE}",
            "distribution=terminal_only",
            "filters=none", "num_workers=3", f"model.base_url={base_url}", *extra]


@pytest.mark.docker
@pytest.mark.slow
def test_harbor_tasks_model_oracle_and_broken_build(tmp_path: Path, mock_server, engine: Any, nonce: str) -> None:
    data = make_dataset(tmp_path / "tasks", nonce)
    first = run_cli(tmp_path, *_args(data, "model", mock_server.base_url), timeout=300)
    assert first.returncode == 3, first.stderr  # the broken task failed; the others are settled
    tasks = ledger(tmp_path / "outputs" / "model")
    assert tasks["solved"]["reward"] == 1.0 and tasks["unsolved"]["reward"] == 0.0, tasks
    listing = json.loads(tasks["unsolved"]["result"])["messages"][3]["content"]
    assert "No such file" in listing  # the agent never saw /tests
    broken = tasks["broken"]
    assert broken["state"] == "error" and broken["error_class"] == "sandbox", broken
    assert "task broken" in broken["error"] and "broken-step-marker" in broken["error"], broken["error"]
    assert "returned a non-zero code: 7" in broken["error"] or "exit code: 7" in broken["error"], broken["error"]
    assert first.stderr.count("fancy_new_option") == 1 and "unsolved/task.toml" in first.stderr
    built = built_by(engine, nonce)
    assert len(built) == 1 and built[0].labels.get(CONTEXT_LABEL)  # two tasks, one build context

    oracle = run_cli(tmp_path, *_args(data, "oracle", mock_server.base_url, "agent=oracle"), timeout=300)
    assert oracle.returncode == 3, oracle.stderr
    tasks = ledger(tmp_path / "outputs" / "oracle")
    assert tasks["solved"]["reward"] == 1.0 and tasks["unsolved"]["reward"] == 1.0, tasks
    again = built_by(engine, nonce)
    assert [i.id for i in again] == [built[0].id]  # reused, not rebuilt

    (data / "unsolved" / "instruction.md").write_text("Write hello to /app/out.txt.\nRUN: echo hello > /app/out.txt\n")
    (data / "broken" / "environment" / "Dockerfile").write_text(f"FROM {IMAGE}\nLABEL hx.test.nonce={nonce}\n")
    edited = run_cli(tmp_path, *_args(data, "model", mock_server.base_url), timeout=300)
    assert "(2 planned now" in edited.stderr, edited.stderr  # the two edited tasks; `solved` is kept
    tasks = ledger(tmp_path / "outputs" / "model")
    why = {k: (t["state"], t.get("error_class"), (t.get("error") or "")[-600:], t.get("score_error")) for k, t in tasks.items()}
    assert tasks["unsolved"]["reward"] == 1.0 and tasks["broken"]["reward"] == 0.0, (why, edited.stderr[-3000:])


def test_harbor_needs_docker(tmp_path: Path) -> None:
    data = make_dataset(tmp_path / "tasks", "x")
    result = run_cli(tmp_path, f"dataset.path={data}", "sandbox=local", "run_name=h")
    assert result.returncode == 2
    assert "needs sandbox=docker" in result.stderr and "add sandbox=docker" in result.stderr


def test_task_toml_mapping_and_reports(tmp_path: Path) -> None:
    toml = ('version = "1.0"\n[verifier]\ntimeout_sec = 30\nenv = {MODE = "strict"}\n[agent]\ntimeout_sec = 90\n'
            '[environment]\nmemory = "2G"\ncpus = 2\nallow_internet = false\ngpus = 1\nwidgets = 3\n')
    parsed_path = tmp_path / "task.toml"
    parsed_path.write_text(toml)
    parsed = read_task_toml(parsed_path)
    assert (parsed.verifier_timeout, parsed.agent_timeout, parsed.memory_mb, parsed.cpus) == (30, 90, 2048, 2)
    assert parsed.network is False and parsed.verifier_env == {"MODE": "strict"}
    assert parsed.ignored == ["[environment].gpus"] and parsed.unknown == ["[environment].widgets"]
    parsed_path.write_text('[[steps]]\nname = "one"\n')
    with pytest.raises(TaskTomlError, match="multi-step"):
        read_task_toml(parsed_path)

    data = make_dataset(tmp_path / "tasks", "x")
    (data / "notes").mkdir()
    records = {r.where.split("/")[-2]: r for r in HarborSource(data).rows()}
    assert "no task.toml" in records["notes"].problem
    row = records["solved"].row
    assert row["id"] == "solved" and row["prompt"].startswith("Write hello")
    assert row["container"]["build"]["context"] == "solved/environment" and row["limits"] == {"task_seconds": 120.0}
    assert row["verifier"]["timeout_seconds"] == 60.0 and row["verifier"]["tests_dir"] == "/tests"
    assert row["solution_dir"] == "/solution" and row["tests"] == "solved/tests"
    before = row["harbor"]["digest"]
    (data / "solved" / "tests" / "test.sh").write_text(TEST_SH + "# edited\n")
    edited = {r.where.split("/")[-2]: r for r in HarborSource(data).rows()}["solved"].row
    assert edited["harbor"]["digest"] != before  # editing a task changes its content key


def test_harbor_folder_detection_and_base(tmp_path: Path) -> None:
    from hermes_exp.dataset.readers import dataset_base_dir, open_source

    data = make_dataset(tmp_path / "tasks", "x")
    source = open_source({"path": str(data)})
    assert isinstance(source, HarborSource) and source.unit == "task"
    assert dataset_base_dir({"path": str(data)}) == str(data)
    one = open_source({"path": str(data / "solved"), "format": "harbor"})  # a single task folder
    rows = [r.row for r in one.rows()]
    assert [r["id"] for r in rows] == ["solved"]
    assert dataset_base_dir({"path": str(data / "solved")}) == str(data)
    (data / "solved" / "environment" / "Dockerfile").write_text("FROM scratch\n# a longer file than before\n")
    again = [r.row for r in one.rows()][0]  # the same source (its digest cache) sees the edit
    assert again["container"]["build"]["digest"] != rows[0]["container"]["build"]["digest"]
    assert again["harbor"]["digest"] != rows[0]["harbor"]["digest"]
    with pytest.raises(Exception, match="do not apply to a Harbor dataset"):
        open_source({"path": str(data), "fields": {"prompt": "question"}})


@pytest.mark.docker
@pytest.mark.slow
def test_prebuilt_docker_image_and_fallback_build(tmp_path: Path, mock_server, engine: Any, nonce: str) -> None:
    """[environment].docker_image is used when the engine has it (no Dockerfile needed); one it cannot
    get is replaced by a build of environment/. Tasks keep the image's HOME, not the workdir."""
    root = tmp_path / "tasks"
    solve = "#!/bin/sh\nmkdir -p /app && echo hello > /app/out.txt\necho \"home=$HOME pwd=$(pwd)\"\n"
    prebuilt = make_task(root, "prebuilt", "Anything.\n", "", TOML + f'docker_image = "{IMAGE}"\n')
    (prebuilt / "environment" / "Dockerfile").unlink()
    fallback = make_task(root, "fallback", "Anything.\n", f"FROM {IMAGE}\nLABEL hx.test.nonce={nonce}\nWORKDIR /app\n",
                         TOML + 'docker_image = "hermes-exp-test/absent:never"\n')
    for task in (prebuilt, fallback):
        (task / "solution" / "solve.sh").write_text(solve)
    args = [a if not a.startswith("sandbox.image=") else "sandbox.image=hermes-exp-test/never-used:1"
            for a in _args(root, "pre", mock_server.base_url, "agent=oracle", "sandbox.pull_timeout=5")]
    result = run_cli(tmp_path, *args, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "never-used" not in result.stderr  # no task runs in sandbox.image: it is not pulled
    assert "building it from fallback/environment instead" in result.stderr
    tasks = ledger(tmp_path / "outputs" / "pre")
    assert tasks["prebuilt"]["reward"] == 1.0 and tasks["fallback"]["reward"] == 1.0, tasks
    said = {name: json.loads(json.loads(t["result"])["messages"][-2]["content"])["output"] for name, t in tasks.items()}
    assert "pwd=/app" in said["fallback"] and "home=/app" not in said["fallback"], said
    assert "pwd=/\n" in said["prebuilt"], said  # busybox has no WORKDIR: Harbor runs in /


def test_row_limits_narrow_the_runs() -> None:
    from hermes_exp.agent.limits import for_row

    settings = {"limits": {"task_seconds": 60, "task_tokens": None}}
    assert for_row(settings, {"limits": {"task_seconds": 120}})["limits"]["task_seconds"] == 60
    assert for_row({"limits": {"task_seconds": None}}, {"limits": {"task_seconds": 120}})["limits"]["task_seconds"] == 120
    assert for_row(settings, {"prompt": "x"}) is settings


def test_build_slots_and_reward_option_leave_identities_alone() -> None:
    """sandbox.max_builds is how a run goes, not what it produces; the command verifier's identity
    is what it was before Harbor rows could ask for a reward file."""
    from hermes_exp.settings.resolved import identity_hash
    from hermes_exp.verify import registry

    base = {"sandbox": {"kind": "docker", "image": "x"}, "model": {"name": "m"}, "seed": 0}
    assert identity_hash(base) == identity_hash({**base, "sandbox": {**base["sandbox"], "max_builds": 8}})
    from omegaconf import OmegaConf

    command = OmegaConf.to_container(OmegaConf.load(Path(__file__).parent.parent / "conf/verifier/command.yaml"))
    assert "require_reward_file" not in command
    harbor_row = {"kind": "command", "tests_dir": "/tests", "require_reward_file": True}
    assert registry.identity({**command, **harbor_row}) != registry.identity(command)


def test_reward_json_is_its_reward_else_the_mean_of_its_named_rewards() -> None:
    """"reward" when the object has one, else the mean of its named rewards (Harbor's multi-reward recipe)."""
    from hermes_exp.verify.base import VerifierFailed
    from hermes_exp.verify.command import _reward

    assert _reward("json", '{"reward": 0.5, "style": 1}', 0) == 0.5
    assert _reward("json", '{"accuracy": 0.25}', 1) == 0.25
    assert _reward("json", '{"correctness": 1, "performance": 0}', 0) == 0.5
    with pytest.raises(VerifierFailed, match="must all be numbers"):
        _reward("json", '{"a": 1, "b": "x"}', 0)
