"""vision_analyze through the real model client to the mock server (which receives the image part), and
image_generate against a fake OpenAI-images endpoint, each on a real local sandbox."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from conftest import read_jsonl, run_cli, write_dataset
from webfixtures import IMAGE, web_server

from hermes_exp.mock.server import MockServer
from hermes_exp.sandbox.local import LocalSandboxFactory
from hermes_exp.tools.base import Resources
from hermes_exp.tools.image_gen import ImageGenerate
from hermes_exp.tools.registry import Registry, Toolset
from hermes_exp.tools.toolbox import Toolbox


@pytest.fixture
def sandbox(tmp_path: Path):
    box = LocalSandboxFactory(root=str(tmp_path / "boxes")).open("v1:img", {})
    yield box
    box.close()


def call(toolbox: Toolbox, name: str, **args) -> dict:
    content, valid = toolbox.call(name, json.dumps(args), toolbox.registry.known_tools)
    assert valid
    return json.loads(content)


def test_image_generate_saves_the_image_in_the_sandbox(sandbox, monkeypatch) -> None:
    monkeypatch.setenv("HX_TEST_IMG_KEY", "img-test-key")
    resources = Resources()
    with web_server() as server:
        tool = ImageGenerate(url=server.root + "/v1/images/generations", api_key_env="HX_TEST_IMG_KEY",
                             model="img-model", size="256x256", block_private=False)
        toolbox = Toolbox(Registry([Toolset("image_gen", tools={"image_generate": tool})]), sandbox, {}, resources)
        first = call(toolbox, "image_generate", prompt="an otter")
        second = call(toolbox, "image_generate", prompt="another otter")
        named = call(toolbox, "image_generate", prompt="x", filename="../../escape.jpg")
        assert first == {"path": "images/image_1.png", "bytes": len(IMAGE), "mime_type": "image/png",
                         "revised_prompt": "rev", "error": None}
        assert second["path"] == "images/image_2.png" and named["path"] == "images/escape.png"
        assert sandbox.read_file("images/image_1.png") == IMAGE
        sent = server.requests[0]
        assert json.loads(sent["body"]) == {"model": "img-model", "prompt": "an otter", "n": 1, "size": "256x256"}
        assert sent["headers"]["authorization"] == "Bearer img-test-key"
        url_tool = ImageGenerate(url=server.root + "/v1/images/generations", api_key_env="HX_TEST_IMG_KEY",
                                 response_format="url", block_private=False)
        toolbox = Toolbox(Registry([Toolset("image_gen", tools={"image_generate": url_tool})]), sandbox, {}, resources)
        by_url = call(toolbox, "image_generate", prompt="an otter")
        assert sandbox.read_file(by_url["path"]) == IMAGE and server.requests[-1]["path"] == "/generated.png"
        assert "HTTP 400" in call(toolbox, "image_generate", prompt="fail please")["error"]
        monkeypatch.setenv("HX_TEST_IMG_KEY", "wrong")
        assert "HTTP 401" in call(toolbox, "image_generate", prompt="an otter")["error"]
    resources.close()
    assert "export HX_UNSET_VAR" in ImageGenerate(url="http://x", api_key_env="HX_UNSET_VAR").missing(False)
    assert "toolsets.image_gen.tools.image_generate.url" in ImageGenerate().missing(False)
    assert ImageGenerate().missing(True) is None


def _vision_run(tmp_path: Path, server: MockServer, prompt: str, *extra: str):
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": prompt}])
    result = run_cli(tmp_path, f"dataset.path={data}", "run_name=vision", "distribution=creative",
                     "distribution.toolsets.image_gen=100", "distribution.toolsets.vision=100",
                     "distribution.toolsets.web=0", f"model.base_url={server.base_url}",
                     "model.pricing.prompt=1", "model.pricing.completion=2", *extra)
    assert result.returncode == 0, result.stderr
    return read_jsonl(tmp_path / "outputs" / "vision" / "trajectories.jsonl")[0]


def test_vision_sends_the_sandbox_image_to_the_model_and_counts_its_cost(tmp_path: Path) -> None:
    record = tmp_path / "requests.jsonl"
    with MockServer(record_path=str(record), usage_cost={"prompt": 1.0, "completion": 2.0}) as server:
        row = _vision_run(tmp_path, server, "IMAGINE: a green field\nLOOK: images/image_1.png")
    requests = [json.loads(line)["body"] for line in record.read_text().splitlines()]
    vision = [b for b in requests if isinstance(b["messages"][-1]["content"], list)]
    assert len(vision) == 1 and not vision[0].get("tools")
    parts = vision[0]["messages"][-1]["content"]
    assert parts[0] == {"type": "text", "text": "What does this image show?"}
    url = parts[1]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    saved = base64.b64decode(url.split(",", 1)[1])
    assert saved.startswith(b"\x89PNG") and len(saved) > 50  # the image image_generate wrote, sent whole
    analysis = json.loads(row["conversations"][-2]["value"].split("\n", 1)[1].rsplit("\n", 1)[0])["content"]
    assert analysis["error"] is None and "8x8 PNG image" in analysis["analysis"]
    assert row["tool_stats"]["vision_analyze"] == {"count": 1, "success": 1, "failure": 0}
    import sqlite3

    with sqlite3.connect(tmp_path / "outputs" / "vision" / "ledger.db") as db:
        cost, spent, raw = db.execute("SELECT cost_usd, spent_usd, result FROM tasks").fetchone()
    result = json.loads(raw)
    agent = sum(u["cost_usd"] for u in result["usage"])
    tool = sum(u["cost_usd"] for u in result["tool_model_calls"])
    assert len(result["tool_model_calls"]) == 1 and tool > 0
    assert cost == pytest.approx(agent + tool) and spent == pytest.approx(agent + tool)
    assert row["api_calls"] == 3  # the agent's calls only; the vision call is the tool's


def test_vision_of_a_url_and_of_a_non_image(tmp_path: Path) -> None:
    with MockServer() as server:
        site = server.base_url.removesuffix("/v1")
        row = _vision_run(tmp_path, server, f"LOOK: {site}/site/cat.png\nLOOK: {site}/site/cats.html")
    bodies = [t["value"] for t in row["conversations"] if t["from"] == "tool"]
    assert "16x12 PNG image" in bodies[0]
    assert "is not a PNG, JPEG, GIF or WebP image" in bodies[1]
    assert row["tool_stats"]["vision_analyze"] == {"count": 2, "success": 1, "failure": 1}
