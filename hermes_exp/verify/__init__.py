"""Verifiers: did the agent solve its task? One module per kind (`command`, `answer`, `checks`, `judge`)
behind the `Verifier` protocol in `base.py`; `conf/verifier/*.yaml` chooses one by `_target_`."""
