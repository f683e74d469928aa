"""`tools.names`: a run offers its tools under Hermes's renamed set (`hermes-2026-09`: process ->
process_manage, ...) and everything downstream follows the one map: the schemas sent, the calls made, the
trajectories, tool_stats, statistics.json, the hallucinated_tools filter and the `checks` verifier, which
resolves a grader's tool name (old or new) to the offered one. Real CLI runs against the mock model."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from conftest import read_jsonl, run_cli, write_dataset

RENAMED = "tools.names=hermes-2026-09"
# The mock's default plan on terminal_only: terminal, the file tools, then a background job waited for
# with the process tool (under whichever name it is offered).
ROWS = [
    {"prompt": "Search the notes", "verifier": "checks",
     "checks": {"tool_called": "process", "tool_succeeded": ["process", "terminal"]}},  # the old name
    {"prompt": "Take notes on the folder", "verifier": "checks",
     "checks": {"tool_called": ["process_manage", "write_file"]}},  # the new name
    {"prompt": "Count the words of a sentence", "verifier": "checks", "checks": {"tool_called": "todo"}},
    {"prompt": "Write a short note", "verifier": "checks", "checks": {"tool_succeeded": "process"}},
    {"prompt": "Summarise what you find", "verifier": "checks", "checks": {"tool_called": "process"}},
    {"prompt": "Look around the working folder"},  # the mock's made-up tool (bad_tool_rate) here
]
COMMAND = ("run_name=renamed", "sandbox=local", "distribution=terminal_only", "filters=default",
           "model.mock_server.no_reasoning_rate=0.4", "model.mock_server.bad_tool_rate=0.2")


@pytest.fixture(scope="module")
def renamed_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run of the renamed set, shared by the asserts below."""
    cwd = tmp_path_factory.mktemp("names")
    data = write_dataset(cwd / "prompts.jsonl", ROWS)
    proc = run_cli(cwd, f"dataset.path={data}", *COMMAND, RENAMED)
    assert proc.returncode == 0, proc.stderr
    return cwd


def _called(row: dict) -> set[str]:
    names = set()
    for turn in row["conversations"]:
        if turn["from"] == "gpt":
            for block in turn["value"].split("<tool_call>\n")[1:]:
                names.add(json.loads(block.split("\n</tool_call>")[0])["name"])
    return names


def test_the_model_is_offered_and_calls_the_new_names(renamed_run: Path) -> None:
    rows = read_jsonl(renamed_run / "outputs" / "renamed" / "trajectories.jsonl")
    assert rows
    for row in rows:
        offered = [t["function"]["name"] for t in json.loads(row["tools"])]
        assert "process_manage" in offered and "process" not in offered, offered
        assert '"name": "process_manage"' in row["conversations"][0]["value"]  # Hermes's <tools> system turn
        terminal = next(t["function"] for t in json.loads(row["tools"]) if t["function"]["name"] == "terminal")
        assert "with the process_manage tool" in json.dumps(terminal)  # never told to call a name it lacks
        assert "process_manage" in _called(row) and "process" not in _called(row)
        assert "process" not in row["tool_stats"] and "process" not in row["tool_error_counts"]
        assert row["tool_stats"]["process_manage"]["count"] >= 1
        assert row["tool_stats"]["process_manage"]["success"] >= 1


def test_statistics_and_filters_follow_the_map(renamed_run: Path) -> None:
    out = renamed_run / "outputs" / "renamed"
    stats = json.loads((out / "statistics.json").read_text())
    assert "process" not in stats["tool_statistics"]
    assert stats["tool_statistics"]["process_manage"]["count"] >= stats["kept"] >= 1
    with sqlite3.connect(out / "ledger.db") as db:
        reasons = dict(db.execute("SELECT reason, COUNT(*) FROM tasks WHERE state = 'filtered' GROUP BY reason"))
    # only the mock's made-up tool is hallucinated: every call of process_manage was an offered tool's
    assert reasons.get("hallucinated_tools") == 1  # the last row's made-up tool, and nothing else
    assert stats["kept"] + sum(reasons.values()) == len(ROWS)
    # Hermes's key, beside reasoning_statistics as Hermes writes it: the samples dropped for no reasoning
    assert reasons.get("no_reasoning", 0) >= 1
    assert stats["discarded_no_reasoning"] == reasons["no_reasoning"]
    keys = list(stats)
    assert keys.index("discarded_no_reasoning") == keys.index("reasoning_statistics") + 1


def test_checks_name_a_tool_by_either_name(renamed_run: Path) -> None:
    with sqlite3.connect(renamed_run / "outputs" / "renamed" / "ledger.db") as db:
        scored = {prompt: (reward, passed, details) for prompt, reward, passed, details in db.execute(
            "SELECT t.prompt, s.reward, s.passed, s.details FROM scores s "
            "JOIN tasks t ON t.key = s.key")}
    for row in ROWS[:-1]:
        reward, passed, details = scored[row["prompt"]]
        if row["checks"] == {"tool_called": "todo"}:  # not offered in any name: still a failed check
            assert (reward, passed) == (0.0, 0), details
            assert "todo_list" in details
        else:
            assert (reward, passed) == (1.0, 1), (row, details)


def test_the_renamed_set_is_another_experiment_and_the_default_is_not(renamed_run: Path) -> None:
    data = renamed_run / "prompts.jsonl"
    again = run_cli(renamed_run, f"dataset.path={data}", *COMMAND, "tools.names=hermes")
    assert again.returncode == 2
    assert "holds another experiment" in again.stderr, again.stderr


def test_an_unknown_name_set_is_refused_before_any_work(tmp_path: Path) -> None:
    proc = run_cli(tmp_path, "run_name=bad", "sandbox=local", "tools.names=hermes-2027")
    assert proc.returncode == 2, proc.stderr
    assert "tools.names='hermes-2027'" in proc.stderr and "hermes-2026-09" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "outputs" / "bad" / "ledger.db").exists()


def test_the_listing_shows_the_offered_names(tmp_path: Path) -> None:
    proc = run_cli(tmp_path, "--list-toolsets", RENAMED)
    assert proc.returncode == 0, proc.stderr
    terminal = next(line for line in proc.stdout.splitlines() if line.strip().startswith("terminal "))
    assert "process_manage" in terminal, proc.stdout


def test_the_default_set_hashes_as_a_config_without_the_key() -> None:
    """Runs made before `tools.names` existed (no such key in their snapshot) keep their identity."""
    from test_providers import settings_for

    from hermes_exp.settings.resolved import identity_hash

    default = settings_for("sandbox=local")
    unset = {**default, "tools": {k: v for k, v in default["tools"].items() if k != "names"}}
    assert default["tools"]["names"] == "hermes"
    assert identity_hash(default) == identity_hash(unset)
    assert identity_hash(settings_for("sandbox=local", RENAMED)) != identity_hash(default)


def test_our_texts_name_a_renamed_tool_as_offered() -> None:
    from hermes_exp.tools.names import NAME_SETS, in_text

    renames = NAME_SETS["hermes-2026-09"]
    said = "3 background processes are running; kill one with process(action='kill') first, see the process tool"
    assert in_text(said, renames) == ("3 background processes are running; kill one with process_manage(action="
                                      "'kill') first, see the process_manage tool")
    assert in_text("todo_list and the todo tool", renames) == "todo_list and the todo_list tool"
    assert in_text(said, {}) == said
