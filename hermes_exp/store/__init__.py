"""The ledger (the run's single source of truth) and everything derived from it: scores, exports, statistics.

- atif: ATIF v1.8 (Harbor's Agent Trajectory Interchange Format): one trajectory per kept sample, from its
  raw result, as one line of `trajectories.atif.jsonl`
- atomic: Atomic file output: write to a temp file beside the target, fsync, rename over it
- batches: batch_N.jsonl: the kept trajectories grouped by the batch each finished in, copied from the bytes
  just written to trajectories.jsonl (each trajectory is built once per export, not once per file)
- environments: preflight=oracle's verdicts in the ledger, keyed by an environment's content key
- export: Export the ledger to trajectories.jsonl, batch_N.jsonl and statistics.json, atomically
- export_reuse: The export's index (`.export-index` in the run dir): per task, a digest of the ledger columns
  its lines were made from, where its ShareGPT, OpenAI and ATIF lines sit in the files that export wrote, the score
  they show and the task's statistics facts; then the settings the lines depend on and the identity (size,
  mtime, ctime, inode) of every file it points into
- export_rows: The export's tasks, one at a time in dataset order: each with its score, statistics facts and
  lines, a line copied from the previous export's files (store/export_reuse.py) when the task's ledger
  columns, its score and the settings are those it was made from, else rendered from the decoded result
- filters: Quality filters: pure functions of a finished task's raw result, applied in the parent
- formats: Extra output formats derived from the ledger: OpenAI messages JSONL and Parquet trajectories
- health: Whether a run directory's ledger can be trusted, and what to say when the disk or the ledger fails
- hermes_prompt: Hermes's function-calling system turn for ShareGPT rows (`outputs.sharegpt.system=hermes`)
- lazydb: The ledger's connection, with sqlite-utils' Database made on first use: reads (SELECT, PRAGMA) run
  on the sqlite3 connection itself, as sqlite-utils would run them, so an invocation that only reads the
  ledger (a settled run's no-op) never imports sqlite-utils, its click and pluggy, nor loads its plugins
  (~0.12 s of CPU)
- lean: sqlite-utils without pandas and numpy
- ledger: The ledger: one SQLite row per task in `<run_dir>/ledger.db`; the parent process is its only writer
- metrics: Metrics a person can compare across models: mean reward with a 95% confidence interval (Wilson's
  when every reward lies in [0, 1], so the interval never leaves it), pass rate with its Wilson interval, the
  unbiased pass@k estimator (Chen et al. 2021) for every k <= samples_per_prompt, pass^k (all k samples pass,
  as in tau-bench), per-prompt pass rates, and the count of failed verifications
- migrations: Ledger schema migrations: small named functions, applied in order, recorded when applied
- planning: Planning against the ledger in SQLite: the scan's tasks go into a temporary table of the ledger's
  connection (temp store: nothing is written to ledger.db), and SQLite joins them with `tasks`, so no key ->
  state map of the whole run is built in Python (~0.3 KB per task at 100k)
- refilter: The ledger's `done`/`filtered` verdicts follow the filters of the invocation that reads them
- rows: A worker's result as its ledger row: the state it settles in (done, filtered or error) and the figures
  the ledger keeps in columns (tokens, cost, stop reason) beside the raw result
- samples: Which kept samples the exports hold: `selection: all | passed | best_of_n` over the samples within
  `samples_per_prompt`, each with its score under the current verifier. best_of_n keeps, per prompt, the
  passing sample with the highest reward (ties: fewer turns, then the lower sample number)
- score_book: Reading scores back at export time: for each finished sample, its score under the verifier that
  the current config gives its row (scores under other verifiers stay in the ledger, unused)
- score_record: The parent's side of a verification: take the score (and workdir archive) out of a worker's
  result, decide the sample's state from it, and store both beside the result in the ledger
- scores: The ledger's `scores` table: one verification per (task key, verifier identity), beside the task's
  raw result (never inside it), so a new verifier re-scores offline and never re-runs an agent
- sharegpt: Convert a task's raw OpenAI-format messages into a Hermes-compatible ShareGPT trajectory row
- stats: statistics.json: computed from the whole ledger (every invocation), never just the last one
- views: Friendly SQL views over the ledger, for `sqlite3 ledger.db` / Datasette users and the report
"""
