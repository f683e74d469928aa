"""The run's verifier options (verify/registry.load_options) resolve against only the settings their
interpolations name, and come out exactly as when resolved against all of the settings: the shipped
options, and options whose interpolations are not plain ${key.path} or reach values with their own."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from hermes_exp.settings.paths import config_dir
from hermes_exp.verify.registry import NONE, _reachable, load_options
from test_config import _compose
from hermes_exp.settings.resolved import to_plain


def _against_everything(settings: dict[str, Any], conf: Path) -> dict[str, Any]:
    """What load_options computed before it narrowed the settings: each option under all of them."""
    root = OmegaConf.create({k: v for k, v in settings.items() if k != "verifier"})
    options = {}
    for path in sorted((conf / "verifier").glob("*.yaml")):
        root.verifier = OmegaConf.load(path)
        options[path.stem] = OmegaConf.to_container(root.verifier, resolve=True)
    chosen = settings.get("verifier") or {"kind": NONE}
    options[str(chosen.get("kind", NONE))] = copy.deepcopy(chosen)
    return options


@pytest.mark.parametrize("overrides", [[], ["verifier=judge", "model=sonnet"], ["verifier=answer", "provider=openai"]])
def test_the_shipped_options_are_what_they_were(overrides):
    settings = to_plain(_compose(overrides))
    options = load_options(settings, config_dir())
    assert options == _against_everything(settings, config_dir())
    assert options["judge"]["model"] == settings["model"] and options["judge"]["provider"] == settings["provider"]
    texts = [path.read_text() for path in (config_dir() / "verifier").glob("*.yaml")]
    assert set(_reachable(settings, texts)) == {"model", "provider"}  # the judge's ${model} and ${provider}


OWN = {
    "plain.yaml": "kind: plain\nworkers: ${num_workers}\nname: ${model.name}\n",
    "selected.yaml": "kind: selected\nname: ${oc.select:model.name,none}\n",  # not a plain reference
    "relative.yaml": "kind: relative\na: 1\nb: ${.a}\n",
    "nested.yaml": "kind: nested\nbox: ${sandbox}\n",
}


@pytest.mark.parametrize("names", [["plain.yaml"], ["plain.yaml", "selected.yaml"], ["relative.yaml"],
                                   ["plain.yaml", "nested.yaml"]])
def test_any_interpolation_resolves_as_against_all_settings(tmp_path, names):
    (tmp_path / "verifier").mkdir()
    for name in names:
        (tmp_path / "verifier" / name).write_text(OWN[name])
    settings = {"num_workers": 3, "model": {"name": "m", "extra": {"deep": [1, 2]}}, "verifier": {"kind": "none"},
                "sandbox": {"kind": "local", "note": "${num_workers}"},  # a value that is an interpolation itself
                "other": {"x": 1}}
    assert load_options(settings, tmp_path) == _against_everything(settings, tmp_path)
