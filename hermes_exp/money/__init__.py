"""Money: pricing, the run's budget, the spend journal of calls in flight, and the sweep budget.

- booking: A model call's booking in one process: its worst case reserved against the budgets and written
  to the spend journal before it is sent, settled at what it cost
- broker: One budget for every process and host: the parent serves its booking to the run's worker
  processes and cluster nodes over an authenticated socket (multiprocessing.connection)
- budget: Spending limits: the run's budget (`budget.max_cost_usd`, counted over every invocation of the run)
  and a per-task cap (`budget.max_task_cost_usd`)
- cost: Tokens and dollars of a model call: usage normalised across providers; cost from the provider's own
  accounting (`usage.cost`, as OpenRouter reports it) or else from the model's per-million-token prices
- journal: What model calls in flight may have cost, on disk before a call is sent: so a kill -9 of the whole
  run cannot make the next invocation forget money it spent
- sweep_book: The sweep budget's book: one append-only file per process and job generation in
  `<sweep dir>/sweep_budget/`, read by every other process before it books a call (no locks, no WAL)
- sweep_budget: One budget for a whole sweep (`budget.sweep_max_cost_usd`): every job of a `-m` sweep, on
  whatever host a launcher runs it, and every worker process of a job, books its calls in the sweep
  directory's book
"""
