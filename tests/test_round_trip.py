"""Round trip: a stored sample's OpenAI messages (and tool list), replayed against the mock server through
the model client, reproduce the requests that were sent, except the documented ephemeral parts (the
ephemeral system prompt and the prefill messages), and get back the replies that were stored."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import agent_bodies, run_cli, write_dataset
from omegaconf import OmegaConf

from hermes_exp.agent.loop import as_sent
from hermes_exp.model.client import ModelClient
from hermes_exp.mock.server import MockServer
from hermes_exp.store.ledger import Ledger

PREFILL = [{"role": "user", "content": "PREFILL-Q"}, {"role": "assistant", "content": "PREFILL-A"}]


def _without_ephemeral(body: dict) -> dict:
    messages = body["messages"]
    assert messages[0]["content"] == "SAVED\n\nEPHEMERAL" and messages[1:3] == PREFILL
    return {**body, "messages": [{"role": "system", "content": "SAVED"}, *messages[3:]]}


def test_replayed_messages_reproduce_the_requests_sent(tmp_path: Path, mock_server) -> None:
    prefill = tmp_path / "prefill.json"
    prefill.write_text(json.dumps(PREFILL))
    prompts = ["RUN: echo one\nWRITE: a.txt hello\nREAD: a.txt\nReport.", "Count the words in 'a b c'."]
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": p} for p in prompts])
    result = run_cli(tmp_path, f"dataset.path={data}", "run_name=rt", f"model.base_url={mock_server.base_url}",
                     "system_prompt=SAVED", "ephemeral_system_prompt=EPHEMERAL", f"prefill_messages={prefill}",
                     "model.sampling.max_tokens=300", "model.sampling.top_p=0.9")
    assert result.returncode == 0, result.stderr
    sent: dict[str, list[dict]] = {}
    for body in agent_bodies(tmp_path / "requests.jsonl"):  # vision_analyze's own calls are no agent turn
        sent.setdefault(body["messages"][3]["content"], []).append(body)

    out = tmp_path / "outputs" / "rt"
    config = OmegaConf.to_container(OmegaConf.load(out / ".hydra" / "config.yaml"))
    ledger = Ledger(out / "ledger.db")
    try:
        stored = [(json.loads(r["result"])["messages"], json.loads(r["tools"])) for r in ledger.rows(("done",))]
    finally:
        ledger.close()
    assert len(stored) == 2
    with MockServer(record_path=str(tmp_path / "replay.jsonl")) as replay:
        client = ModelClient(config["model"], config["provider"], replay.base_url, "not-needed")
        for messages, tools in stored:
            turns = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
            for i in turns:  # every call: the conversation before that reply, as stored
                reply = client.complete([as_sent(m) for m in messages[:i]], tools)
                assert {**reply.message, "role": "assistant"} == messages[i]  # the stored reply, again
            originals = sent[messages[1]["content"]]
            assert len(originals) == len(turns) > 1
            replayed = agent_bodies(tmp_path / "replay.jsonl")[-len(turns):]
            assert replayed == [_without_ephemeral(b) for b in originals]
