"""hermes-exp: a declarative experiment runner for tool-using LLM agents (docs/architecture.md draws the flow).

- agent/: The agent: the turn loop between model and tools, and the control agents (oracle, nop).
- cli/: The `hermes-exp` command: argument handling, the config snapshot, sweeps and error reporting.
- compress/: Compression of trajectories to a token budget (`action=compress`, `outputs.compress=true`)
- dataset/: Rows -> tasks: reading every input format, validating rows, keying tasks, selecting rows.
- errors: The one exception hierarchy of hermes-exp: every error a user can act on carries its fix
- executor/: Where tasks run: joblib's backends (threads, processes, dask, ray).
- launch: The `hermes-exp` command's first step, before any import: the process is started again with glibc's
  per-thread malloc cache off, then the CLI runs
- mock/: The offline mock model server and its stand-in services (`python -m hermes_exp.mock`).
- model/: The OpenAI-compatible model client, used by the agent, the judge, vision and compression alike.
- money/: Money: pricing, the run's budget, the spend journal of calls in flight, and the sweep budget.
- optional: Optional packages (the extras): imported when a run first needs one, else the error that names it
- report/: `hermes-exp-report`: one self-contained HTML page of plots and a trajectory browser for a run or
  sweep
- run/: One invocation, in the parent: checks, planning, dispatch, the actions (export, score, compress, merge) and
  progress.
- sandbox/: Where tool commands run: one fresh sandbox per prompt (local, bwrap, docker)
- secret_guard: Kept for saved config snapshots: `.hydra/config.yaml` files written before December 2026 name
  the sweep guard `hermes_exp.secret_guard.SweepGuard` (it lives in hermes_exp/settings/secrets.py)
- settings/: The resolved config: plain values, identity, paths, sections, secrets and redaction.
- stops: The vocabulary of stops: why a conversation ended (a sample's `stop_reason`, kept in the ledger and
  counted in statistics.json) and why the parent stops a whole run
- store/: The ledger (the run's single source of truth) and everything derived from it: scores, exports,
  statistics.
- tools/: Toolsets the agent can be offered; each tool runs inside the prompt's sandbox
- verify/: Verifiers: did the agent solve its task? One module per kind (`command`, `answer`, `checks`,
  `judge`) behind the `Verifier` protocol in `base.py`; `conf/verifier/*.yaml` chooses one by `_target_`
- worker/: One task, in a worker: draw toolsets, open a sandbox, run the agent, verify -> a TaskResult.
"""
