"""Token IDs and logprobs per assistant turn (model.logprobs, top_logprobs, token_ids), end to end with the
real CLI and the mock model over HTTP: asked for on the wire under the names config gives, kept on each
assistant turn in the ledger beside its text, exported in trajectories.openai.jsonl, absent where the server
sent none, never asked for by the summariser, and marked dropped in a compressed row."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from conftest import read_jsonl, run_cli, write_dataset
from test_compress import train_tokenizer

from hermes_exp.mock.server import MockServer
from hermes_exp.mock.tokens import generated_text, token_id

PROMPTS = [
    "RUN: echo start\nRUN: seq 1 400\nRUN: seq 400 800\nRUN: seq 800 1200\nRUN: echo end\nReport.",
    "Say hi",
]
ASK = ("model.logprobs=true", "model.top_logprobs=2", "model.token_ids=true")
TOKEN_KEYS = ("logprobs", "token_ids", "prompt_token_ids")


def requests(path: Path) -> list[dict]:
    return [r["body"] for r in read_jsonl(path) if r["status"] == 200]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory):
    """One run that asks for token data, then compressed (its long row gets a summary from the mock)."""
    tmp = tmp_path_factory.mktemp("tokens")
    with MockServer(record_path=str(tmp / "requests.jsonl")) as server:
        data = write_dataset(tmp / "p.jsonl", [{"prompt": p} for p in PROMPTS])
        base = [f"dataset.path={data}", "run_name=rl", f"model.base_url={server.base_url}", "distribution=terminal_only",
                "outputs.formats=[sharegpt,openai]", f"compress.tokenizer={train_tokenizer(tmp / 'tokenizer.json')}",
                *ASK]
        result = run_cli(tmp, *base)
        assert result.returncode == 0, result.stderr
        agent_calls = len(requests(tmp / "requests.jsonl"))
        result = run_cli(tmp, *base, "compress.target_max_tokens=7000", "compress.summary_target_tokens=100",
                         "compress.keep_last_turns=2", "action=compress")
        assert result.returncode == 0, result.stderr
    return tmp, tmp / "outputs" / "rl", agent_calls


def test_each_turn_keeps_the_tokens_of_its_own_text(made) -> None:
    _, out, _ = made
    rows = read_jsonl(out / "trajectories.openai.jsonl")
    assert len(rows) == len(PROMPTS)
    turns = 0
    for row in rows:
        for message in row["messages"]:
            if message["role"] != "assistant":
                assert not any(k in message for k in TOKEN_KEYS), message
                continue
            turns += 1
            content = message["logprobs"]["content"]
            # the tokens join back into this turn's text: not a neighbour's, not a shifted turn's
            assert "".join(t["token"] for t in content) == generated_text({**message, "reasoning": message["reasoning_content"]})
            assert message["token_ids"] == [token_id(t["token"]) for t in content]
            assert all(len(t["top_logprobs"]) == 2 and t["top_logprobs"][0]["token"] == t["token"] for t in content)
            assert message["prompt_token_ids"]
    assert turns >= 7  # the long row's five commands, its answer, and "Say hi"'s turns


def test_the_ledger_keeps_them_per_assistant_turn_and_the_server_was_asked(made) -> None:
    tmp, out, agent_calls = made
    with sqlite3.connect(out / "ledger.db") as db:
        results = [json.loads(r[0]) for r in db.execute("SELECT result FROM tasks")]
    assistant = [m for r in results for m in r["messages"] if m["role"] == "assistant"]
    assert assistant and all(all(k in m for k in TOKEN_KEYS) for m in assistant)
    bodies = requests(tmp / "requests.jsonl")
    assert len(assistant) == agent_calls
    for body in bodies[:agent_calls]:
        assert (body["logprobs"], body["top_logprobs"], body["return_token_ids"]) == (True, 2, True)
        # what goes back to the server is the turn, never the token data kept beside it
        assert not any(k in m for m in body["messages"] for k in TOKEN_KEYS)
    summaries = bodies[agent_calls:]
    assert summaries and not any(k in b for b in summaries for k in ("logprobs", "top_logprobs", "return_token_ids"))


def test_a_compressed_row_says_its_token_data_is_dropped(made) -> None:
    _, out, _ = made
    rows = {r["prompt_index"]: r["compression"] for r in read_jsonl(out / "trajectories.compressed.jsonl")}
    assert rows[0]["status"] == "compressed" and rows[0]["token_data"] == "dropped"
    assert rows[1]["status"] == "skipped" and rows[1]["token_data"] == "unchanged"


def test_config_names_the_fields_and_what_the_server_leaves_out_is_absent(tmp_path: Path) -> None:
    """The request field comes from model.token_fields; the mock answers only vLLM's `return_token_ids`,
    so no IDs come back, and the turns have no token_ids key at all (not an empty list)."""
    with MockServer(record_path=str(tmp_path / "requests.jsonl")) as server:
        data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "Say hi"}])
        result = run_cli(tmp_path, f"dataset.path={data}", "run_name=named", f"model.base_url={server.base_url}",
                         "distribution=terminal_only", "outputs.formats=[sharegpt,openai]", "model.logprobs=true",
                         "model.token_ids=true", "model.token_fields.token_ids=want_ids")
        assert result.returncode == 0, result.stderr
    body = requests(tmp_path / "requests.jsonl")[0]
    assert body["want_ids"] is True and "return_token_ids" not in body and "top_logprobs" not in body
    turns = [m for r in read_jsonl(tmp_path / "outputs" / "named" / "trajectories.openai.jsonl")
             for m in r["messages"] if m["role"] == "assistant"]
    assert turns and all(m["logprobs"]["content"] for m in turns)
    assert not any("token_ids" in m or "prompt_token_ids" in m for m in turns)


def test_off_by_default_nothing_is_asked_and_nothing_kept(tmp_path: Path) -> None:
    with MockServer(record_path=str(tmp_path / "requests.jsonl")) as server:
        data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "Say hi"}])
        result = run_cli(tmp_path, f"dataset.path={data}", "run_name=plain", f"model.base_url={server.base_url}",
                         "distribution=terminal_only", "outputs.formats=[sharegpt,openai]")
        assert result.returncode == 0, result.stderr
    assert not any(k in b for b in requests(tmp_path / "requests.jsonl")
                   for k in ("logprobs", "top_logprobs", "return_token_ids"))
    messages = [m for r in read_jsonl(tmp_path / "outputs" / "plain" / "trajectories.openai.jsonl") for m in r["messages"]]
    assert messages and not any(k in m for m in messages for k in TOKEN_KEYS)


@pytest.mark.parametrize("overrides, said", [
    (("model.top_logprobs=3",), "model.top_logprobs=3 needs model.logprobs=true"),
    (("model.logprobs=yes",), "model.logprobs='yes' must be true, false or null"),
    (("model.logprobs=true", "model.top_logprobs=-1"), "model.top_logprobs=-1 must be an integer >= 0"),
    (("model=llamacpp_local", "model.token_ids=true"), "model.token_fields.token_ids is null"),
    (("model.logprobs=true", "model.token_fields.logprobs=''"), "model.token_fields.logprobs='' must be a field name"),
])
def test_bad_settings_stop_the_run_before_any_work(tmp_path: Path, overrides: tuple[str, ...], said: str) -> None:
    result = run_cli(tmp_path, "run_name=bad", *overrides)
    assert result.returncode == 2, result.stderr
    assert said in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "outputs" / "bad" / "ledger.db").exists()


def test_asking_for_token_data_is_another_experiment_and_the_field_names_are_not() -> None:
    """A run that asks for none keeps its identity (tests/test_legacy_run.py: an old run resumes); one that
    asks is told apart from it; naming the endpoint's fields differently is how it is reached, not what it does."""
    from hermes_exp.cli.listing import compose_settings
    from hermes_exp.settings.paths import config_dir
    from hermes_exp.settings.resolved import identity_hash

    def ident(*overrides: str) -> str:
        return identity_hash(compose_settings(config_dir(), list(overrides)))

    plain = ident()
    assert ident("model.logprobs=false", "model.token_fields.token_ids=other") == plain
    asking = ident("model.logprobs=true")
    assert asking != plain and ident("model.logprobs=true", "model.token_ids=true") not in (plain, asking)
