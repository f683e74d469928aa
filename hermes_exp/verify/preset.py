"""`verifier.preset`: the judge's model from a model preset (conf/model/<name>.yaml, with the provider that
preset selects), composed by Hydra exactly as `hermes-exp model=<name> <verifier.preset_overrides>` would
compose the run's own model and provider. So `verifier=judge verifier.preset=gpt4o` judges with GPT-4o
through OpenAI while the agent runs on another model and provider; `verifier.preset_overrides` are Hydra
overrides of that composition, e.g. `'verifier.preset_overrides=["provider=openrouter","model.name=openai/gpt-4o"]'`.

A preset that Hydra cannot compose, or overrides it cannot parse, is a ConfigError naming the key, before
any work. Resolved in the parent (verify/registry.load_options), so workers receive plain settings."""

from __future__ import annotations

from typing import Any

from hermes_exp.errors import ConfigError

KEYS = ("preset", "preset_overrides")  # not part of a verifier's identity: the model and provider they give are


def resolve(option: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    """`option` (one judge config) with `model` and `provider` from its preset; unchanged without one."""
    preset, extra = option.get("preset"), option.get("preset_overrides") or []
    if preset is None or preset == "":
        if extra:
            raise ConfigError(f"verifier.preset_overrides={extra!r} is set but verifier.preset is not",
                              "name the judge's model preset too, e.g. verifier.preset=gpt4o")
        return option
    if not isinstance(preset, str):
        raise ConfigError(f"verifier.preset must be a model preset name, got {preset!r}", _choices())
    if not isinstance(extra, list) or not all(isinstance(item, str) for item in extra):
        raise ConfigError(f"verifier.preset_overrides must be a list of overrides, got {extra!r}",
                          "e.g. 'verifier.preset_overrides=[\"provider=openrouter\",\"model.name=openai/gpt-4o\"]'")
    if option.get("model") != settings.get("model") or option.get("provider") != settings.get("provider"):
        raise ConfigError(f"verifier.preset={preset!r} and verifier.model / verifier.provider are both given",
                          "give the judge's model one way: the preset (with verifier.preset_overrides for its keys), "
                          "or verifier.model and verifier.provider whole")
    model, provider = _compose([f"model={preset}", *extra], preset)
    return {**option, "model": model, "provider": provider}


def _compose(overrides: list[str], preset: str) -> tuple[dict[str, Any], dict[str, Any]]:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException, MissingConfigException
    from omegaconf.errors import OmegaConfBaseException

    from hermes_exp.settings.paths import config_dir
    from hermes_exp.settings.resolved import to_plain

    try:
        if GlobalHydra.instance().is_initialized():  # inside the run's own Hydra app: its search path
            cfg = compose(config_name="config", overrides=overrides)
        else:  # the run called as a library (tests, notebooks)
            with initialize_config_dir(config_dir=str(config_dir()), version_base=None):
                cfg = compose(config_name="config", overrides=overrides)
        plain = to_plain(cfg.model), to_plain(cfg.provider)
    except (HydraException, OmegaConfBaseException) as exc:
        unknown = isinstance(exc, MissingConfigException) and f"model/{preset}" in str(exc)
        raise ConfigError(f"verifier.preset={preset!r} with verifier.preset_overrides={overrides[1:]!r} does not "
                          f"compose: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
                          _choices() if unknown else "check each of verifier.preset_overrides: Hydra overrides such "
                          "as \"model.name=x\" or \"provider=openrouter\" (every model key: "
                          "conf/model_defaults/common.yaml)") from exc
    return plain


def _choices() -> str:
    from hermes_exp.settings.paths import config_dir

    names = sorted(path.stem for path in (config_dir() / "model").glob("*.yaml"))
    return f"choose a model preset: {', '.join(names)} (conf/model/), or your own in a config dir on Hydra's search path"
