"""The browser toolset's settings are checked, not coerced: `headless=no` was bool("no"), true, and a URL
pattern given as one string was read as a list of its characters."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli, write_dataset
from hermes_exp.errors import ConfigError
from hermes_exp.tools.browser import BrowserTool
from hermes_exp.tools.browser_runtime import UrlPolicy


def test_the_shipped_settings_build_as_before() -> None:
    tool = BrowserTool("browser_navigate", {"headless": False, "allowed_urls": ["https://*.example.org/*"],
                                            "action_timeout": 5, "max_snapshot_chars": 100})
    assert tool._launch["headless"] is False and tool._launch["executable_path"] == "/usr/bin/chromium"
    assert tool._policy == {"allowed": ["https://*.example.org/*"], "denied": None, "block_private": True}
    assert tool._session == {"action_timeout": 5.0, "navigation_timeout": 30.0, "max_snapshot_chars": 100}


@pytest.mark.parametrize(("key", "value", "said"), [
    ("headless", "no", "toolsets.browser.settings.headless='no' must be true, false or null"),
    ("block_private", "false", "toolsets.browser.settings.block_private='false' must be true, false or null"),
    ("denied_urls", "https://evil.example/*", "denied_urls='https://evil.example/*' must be a list of strings"),
    ("allowed_urls", [1, 2], "allowed_urls=[1, 2] must be a list of strings"),
    ("action_timeout", 0, "action_timeout=0 must be a positive number"),
    ("navigation_timeout", "slow", "navigation_timeout='slow' must be a positive number"),
    ("max_snapshot_chars", 1.5, "max_snapshot_chars=1.5 must be a positive integer"),
    ("executable_path", "", "executable_path='' must be the path of a Chromium executable"),
    ("headles", True, "toolsets.browser.settings has unknown keys: headles"),
])
def test_a_bad_setting_is_refused_with_its_key(key: str, value: object, said: str) -> None:
    with pytest.raises(ConfigError) as refused:
        BrowserTool("browser_navigate", {key: value})
    assert said in str(refused.value)
    assert refused.value.hint


def test_a_lone_pattern_string_no_longer_denies_by_its_characters() -> None:
    """What the old coercion did with `denied_urls="https://evil.example/x"`: one pattern per character,
    none of which matches a real URL, so the page the user meant to deny was allowed."""
    coerced = UrlPolicy(denied=list("https://evil.example/x"))
    assert coerced.refusal("https://evil.example/x") is None  # the defect the check now prevents
    with pytest.raises(ConfigError):
        BrowserTool("browser_navigate", {"denied_urls": "https://evil.example/x"})


def test_the_cli_refuses_headless_no_before_any_work(tmp_path: Path, mock_server) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "Open a page"}])
    done = run_cli(tmp_path, f"dataset.path={data}", "run_name=bs", "sandbox=local", "distribution=browser_only",
                   f"model.base_url={mock_server.base_url}", "toolsets.browser.settings.headless=no")
    assert done.returncode == 2, done.stderr
    assert "toolsets.browser.settings.headless='no' must be true, false or null" in done.stderr
    assert not (tmp_path / "requests.jsonl").exists() or not (tmp_path / "requests.jsonl").read_text().strip()
