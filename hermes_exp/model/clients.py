"""One way to build a model client beside the agent's (the judge, vision, the compression summariser):
it calls the endpoint the run's own rule gives its model, and books every call as the agent's client
does, in the run's budget (`budget.max_cost_usd`), the sweep's (`budget.sweep_max_cost_usd`), under the
same limits and in the same spend journal: whoever makes a call, the run pays for it once, in one place."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # openai is imported only when a client is built
    from hermes_exp.model.client import ModelClient


def endpoint(model: dict[str, Any], provider: dict[str, Any], running: str | None) -> str | None:
    """The base URL to call for `model`: its own `base_url`; for the mock model, the mock the run already
    serves (`running`); else the provider's, else the run's. None: the mock must still be started."""
    if model.get("base_url"):
        return str(model["base_url"])
    if model.get("mock_server"):
        return running
    return provider.get("base_url") or running


@contextmanager
def model_endpoint(settings: dict[str, Any]) -> Iterator[str]:
    """The base URL to call: the model's, else the provider's, else a mock server started for the run."""
    model = settings["model"]
    url = endpoint(model, settings["provider"], None)  # the rule every client's endpoint follows
    if url:
        yield url
        return
    from hermes_exp.mock.server import MockServer

    with MockServer(**(model.get("mock_server") or {})) as server:
        yield server.base_url


def second_client(settings: dict[str, Any], model: dict[str, Any], provider: dict[str, Any],
                  shared: ModelClient | None = None, base_url: str | None = None) -> ModelClient:
    """A client for `model` on `provider`. `shared`: the process's agent client, whose booking (the run's
    and the sweep's budgets and the spend journal, or the parent's broker) it books in; without one (the
    parent process) it is built from `settings` exactly as the agent's is (ModelClient.from_settings). The limits are the run's
    `budget.*`, with this model's prices. `base_url` wins over the endpoint rule (a mock just started)."""
    from hermes_exp.model.client import ModelClient
    from hermes_exp.money.budget import BudgetLimits
    from hermes_exp.model.tokens import without_token_data
    from hermes_exp.settings.resolved import api_key

    model = without_token_data(model)  # only the agent's turns are training data
    invocation = settings.get("invocation") or {}
    url = base_url or endpoint(model, provider, invocation.get("base_url"))
    if url is None:
        raise RuntimeError(f"no endpoint for model {model.get('name')!r}: the run's mock server is not running")
    scoped = {**settings, "model": model, "provider": provider, "invocation": {**invocation, "base_url": url}}
    key = api_key(scoped)
    if shared is None:
        return ModelClient.from_settings(scoped, key)
    return ModelClient(model, provider, url, key, workers=int(settings.get("num_workers") or 4),
                       limits=BudgetLimits.from_settings(scoped), booking=shared.booking,
                       processes=int(invocation.get("processes") or 1))
