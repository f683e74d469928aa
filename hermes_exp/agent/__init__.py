"""The agent: the turn loop between model and tools, and the control agents (oracle, nop).

- control: Control agents for task authors, chosen by `conf/agent/`: `oracle` runs the row's `solution` in the
  sandbox instead of a model (0 model calls), `nop` does nothing; both are then verified as usual, and
  statistics list the tasks whose oracle fails or whose nop passes as broken
- limits: Per-task limits (`limits.task_seconds`, `limits.task_tokens`) and the context-overflow stop: a
  sample that reaches one ends settled with its stop reason (never an error retried forever)
- spans: The spans of one task's conversation when the run traces: one per model call and per tool call, with
  the GenAI semantic conventions' attributes (content only with `tracing.content=true`)
- loop: The turn loop: model and tools take turns until a final answer or `max_turns` model calls
"""
