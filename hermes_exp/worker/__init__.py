"""One task, in a worker: draw toolsets, open a sandbox, run the agent, verify -> a TaskResult.

- environment: preflight=oracle, in a worker: one environment checked before any model call (fixtures,
  reference solution, verifier in a fresh sandbox) -> an EnvCheck verdict (ok, broken, unchecked, failed)
- fixtures: Before the agent's first turn: the row's fixtures
- result: What a worker hands back for one task: the typed TaskResult, with a timing per phase
- task: One task: draw toolsets, open a sandbox, run the agent, close the sandbox -> a TaskResult
- tracing: OpenTelemetry traces (`tracing.*`): the options and their checks, each process's tracer (its own
  OTLP/HTTP exporter, or the program's tracer provider) and each task's span; the SDK only when tracing is on
"""
