"""The OpenAI-compatible model client, used by the agent, the judge, vision and compression alike.

- cache: Anthropic prompt-caching breakpoints (`model.cache_control`): `cache_control` markers on the system
  prompt and the last turns, as content parts, which OpenRouter and Anthropic-compatible endpoints read
- checks: Validation of the model, provider and budget config before any work, without importing the model
  client (so a run with nothing to do never imports openai)
- client: The model client: builds each call, books it against the limiter and the budgets, retries it
- clients: One way to build a model client beside the agent's (the judge, vision, the compression summariser):
  it calls the endpoint the run's own rule gives its model, and books every call as the agent's client does,
  in the run's budget (`budget.max_cost_usd`), the sweep's (`budget.sweep_max_cost_usd`), under the same
  limits and in the same spend journal: whoever makes a call, the run pays for it once, in one place
- encode: A call's request body and its prompt-token estimate from one serialisation, per message
- probe: One cheap reachability check of the model endpoint at start-up, so a wrong `base_url` is one clear
  error instead of a failure per prompt
- ratelimit: One rate limiter shared by every worker of a process: an adaptive concurrency limit (AIMD: cut on
  429, grow back slowly) plus optional requests-per-minute and tokens-per-minute caps
- reasoning: Find the reasoning in an assistant message: native fields or inline tags in the content
- retry: When a failed model call is worth retrying, how long to wait first, when to give up, and the circuit
  that stops a run whose calls keep failing authentication or finding no such model
- tokens: Token IDs and logprobs of each assistant turn (`model.logprobs`, `top_logprobs`, `token_ids`): the
  request fields that ask an endpoint for them (`model.token_fields`, never the model's name) and where its
  answer holds them; off by default, when nothing is asked and nothing kept
- transport: How a model call is sent (the only module that imports `openai`): the openai SDK's own aiohttp
  client on one event loop per process, shared by every client and session thread of the process; each
  attempt bounded as a whole by model.timeout
- wire: The request body that a model and provider config put on the wire: sampling, routing, reasoning, and
  the interop knobs for servers that differ from OpenAI. Pure config -> dict, validated up front, so every
  setting either reaches the wire exactly as configured or stops the run with a ConfigError
"""
