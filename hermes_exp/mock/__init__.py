"""The offline mock model server and its stand-in services (`python -m hermes_exp.mock`).

- cache: The mock server's prompt cache, as Anthropic's works: a request's prefix up to a `cache_control`
  breakpoint is written to the cache, and a later request with the same prefix reads it
- faults: Fault injection for the mock server: what real providers do to a client
- followups: The mock model's turns for tools whose arguments come from an earlier result: a background
  process (started, then waited for by its session_id) and the browser (a page opened, then its form filled in
  and submitted by the element references of its snapshot)
- judge: The mock model as a judge: a request holding <rubric> and <transcript> is graded deterministically
- model: The offline mock model's behaviour: a deterministic plan that really uses the tools it is offered
  (prompt directives RUN:/WRITE:/READ:/SEARCH:/EXTRACT:/IMAGINE:/LOOK:/LOOP, else a default plan that calls
  every offered tool once; ANSWER: sets the final answer), answers from the tool results, describes images it
  is shown (the vision tool's requests), and reports reasoning and usage
- pages: The mock server's pages for the browser toolset (under /browser/): a sign-up form whose POST answers
  with a greeting, so the offline demo fills in and submits a real form in a real Chromium
- server: Deterministic offline OpenAI-compatible chat-completions server that really calls the tools it is
  offered
- services: What the mock server answers besides chat completions, so the offline demo can use every toolset:
  a SearXNG-compatible search (`GET /search?q=...&format=json`), an OpenAI-compatible images endpoint (`POST
  /v1/images/generations`) and a small web site under `/site/` (pages, an image, a form) that web_extract and
  the browser can read
- tokens: The mock model's token IDs and logprobs, in vLLM's shape, when a request asks (`logprobs`,
  `top_logprobs`, `return_token_ids`); its tokens join back into the text the turn stands for
"""
