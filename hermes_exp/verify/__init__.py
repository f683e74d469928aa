"""Verifiers: did the agent solve its task? One module per kind (`command`, `answer`, `checks`, `judge`) behind
the `Verifier` protocol in `base.py`; `conf/verifier/*.yaml` chooses one by `_target_`.

- answer: `verifier=answer`: the row's `expected` against the final answer (the last assistant message's text
  without its reasoning), compared by `match`: exact, contains, regex, numeric or choice
- base: The Verifier protocol, the Score every verification produces, and what verifiers read of a result
- checks: `verifier=checks`: deterministic checks of the trajectory, from the row's `checks` object, all of
  which must hold
- command: `verifier=command`: after the agent's last turn, copy the row's `tests` into the same sandbox (only
  now, so the agent never saw them) and run the row's `verify` command there
- explain: The part of a verify command's output that explains its score, within a size: the end and pytest's
  failure section, never the head of build noise (the whole output is kept in the run's archives/)
- judge: `verifier=judge`: an LLM judge, called through the same model client as the agent (retries, rate
  limit, pricing) with its own model config (`verifier.model`, `verifier.provider`)
- options: The verifier options every kind reads with a bare `bool()` / `float()` / `int()`, checked before a
  verifier is built (config_section)
- preset: `verifier.preset`: the judge's model from a model preset (conf/model/<name>.yaml, with the provider
  that preset selects), composed by Hydra exactly as `hermes-exp model=<name> <verifier.preset_overrides>`
  would compose the run's own model and provider
- registry: Which verifier judges a sample: the run's `verifier` config, unless the dataset row names its own
  (`"verifier": "answer"` or `{"kind": "answer", "match": "numeric"}`), which wins
- rows: Up-front checks of the dataset fields verification uses, so a bad row is reported with its line number
  before any model call (not discovered by a worker hours later), and the run's verifier options loaded once
  for the workers
- scoring: Running verifiers in a worker: which verifier a row gets (cached per identity), the timed, guarded
  call that turns its verdict or failure into a Score, and the workdir archive taken before a `command`
  verification (kept with `verifier.keep_workdir=true`, or when the verification failed or is suspect, so a
  later invocation can verify again in a fresh sandbox without re-running the agent)
- suspect: `verifier_suspect`: a verification that gave a reward, but whose output or exit status shows the
  environment failed, so its zero may not be the agent's (`verifier.infra_patterns`, `verifier.infra_exit_codes`)
"""
