"""`hermes-exp-report`: one self-contained HTML page of plots and a trajectory browser for a run or sweep.

- charts: The report's plots, made with plotly: one trace per run, so a sweep's runs stand side by side
- cli: The `hermes-exp-report PATH` command: argument handling and error reporting only
- data: What a report shows, read from run directories: aggregates from the ledger (through the SQL views, on
  a read-only connection) and a capped sample of trajectories for the browser
- render: Render runs into one self-contained HTML page: Jinja2 template, inlined CSS, JS and plotly.js
- segments: Split ShareGPT turn values into typed parts (text, reasoning, tool call, tool response) for the
  browser
- summary: The sweep summary: one row per job of a folder of runs (the overrides that tell the jobs apart,
  task counts, kept %, pass rate and pass@k with intervals when a verifier ran, tool success, turns, model
  calls, tokens, cost, wall time), as a terminal table, summary.json and summary.csv
"""
