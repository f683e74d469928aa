"""Toolsets the agent can be offered; each tool runs inside the prompt's sandbox.

- aloop: One asyncio event loop in a daemon thread, for async-only clients (Playwright, the MCP SDK) that the
  thread-pool workers call synchronously
- base: What every tool is (a Protocol with an explicit JSON schema) and what a call gets: the ToolContext,
  with the prompt's sandbox, the process's shared resources and the task's own resources
- browser: Toolset `browser`: Hermes's browser tools on a Playwright page
- browser_runtime: The browser a worker process shares across its tasks: one headless Chromium (the system's,
  through Playwright's `executable_path`: nothing is downloaded), launched on first use on its own event loop
  and launched again if it died; and the URL policy every page request of every task is checked against
- browser_schemas: The browser tools' JSON schemas: Hermes's names and arguments (tools/browser_tool.py), so
  trajectories made here train the same tool calls
- browser_settings: The browser toolset's one `settings` block (conf/toolset/browser.yaml), checked key by key
- browser_vision: `browser_vision`: a screenshot of the task's page (with numbered labels on its interactive
  elements when `annotate`, each [N] the element @eN of the snapshot), kept in the prompt's sandbox and sent
  with the model's question to the vision model through the run's model client, as `vision_analyze` does
- distribution: The seeded toolset draw: each toolset included independently with its probability
- fetch: HTTP for tools (web_extract, vision, image_gen), on the runner's side of the sandbox
- files: Toolset `file`: read, write, patch and search files, confined to the sandbox's working directory
- image_gen: Toolset `image_gen`: `image_generate` against an OpenAI-images-compatible endpoint; the image is
  saved in the prompt's sandbox working directory and its path returned
- mcp: MCP servers as toolsets: each server under `mcp.servers.<name>` becomes the toolset `<name>`, whose
  tools (`mcp_<name>_<tool>`, Hermes's naming) are discovered once at start-up
- mcp_client: A live session with one MCP server (tools/mcp_spec.py: what config says of it) through the
  official `mcp` SDK, kept open on a LoopThread until stopped
- mcp_spec: One MCP server as config says (`mcp.servers.<name>`): a stdio `command` + `args` + `env` (values
  are the NAMES of environment variables), or a streamable-HTTP `url` + `headers` (+ `headers_env`, names
  again)
- names: Tool names (`tools.names`): the one map from a tool's own name to the name a run offers it under
  (`hermes`, or Hermes's renamed set `hermes-2026-09`), read by the registry and the `checks` verifier
- process: Hermes's `process` tool (toolset `terminal`): manage commands started with
  terminal(background=true) in the prompt's sandbox: list, poll new output, read the log, wait, kill,
  write/submit stdin, close it
- readiness: Which of a distribution's toolsets a run can draw: every drawable toolset must be defined and its
  backend configured, said at start-up in one message, never found after hundreds of failed calls
- registry: The registry of a run's toolsets and tools, built from config: schemas offered to the model, and
  dispatch of a call
- search: Search backends for `web_search`, each one request/response shape, chosen in conf/toolset/web.yaml
- terminal: Toolset `terminal`: run a shell command in the prompt's sandbox
- timeouts: The one rule for a timeout a model asks for: within the configured limit, or the limit
- toolbox: One task's tools: the run's registry bound to the task's sandbox, model client and resources
- vision: Toolset `vision`: `vision_analyze` sends an image (an http(s) URL, fetched on the runner's side, or
  a file from the prompt's sandbox), base64-encoded, and a question to a vision-capable model, through the
  run's model client: each call is retried, rate-limited, priced, counted in the run's budget and the task's
  cap, and its usage is kept with the sample (`tool_model_calls`)
- web: Toolset `web`: `web_search` (a pluggable backend, tools/search.py) and `web_extract` (pages fetched
  with httpx and turned into markdown by trafilatura)
"""
