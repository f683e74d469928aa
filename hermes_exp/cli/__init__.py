"""The `hermes-exp` command: argument handling, the config snapshot, sweeps and error reporting.

- added_keys: A key added with `+` that is a typo of one the config has is refused
- app: The `hermes-exp` command: a Hydra app
- command_line: What the `hermes-exp` command answers before Hydra starts: `--help` (the usage, the config
  groups with their options, where the settings are), `--version` (hermes-exp's), and a `run_name=` given a
  value YAML would type (true, 2024, 1e3) read as the text typed
- compose_once: One composition of the config per run invocation instead of Hydra's two
- hydra_errors: Hydra's and OmegaConf's errors as hermes-exp's own: one `error:` line naming the bad override,
  the valid choices and a fix, exit 2
- job_dir: Hydra callback (`hydra.callbacks.job_dir`): a job directory that holds nothing but Hydra's own log
  file holds no run, so it is removed when the job ends
- listing: `hermes-exp --list-distributions [overrides]`: the shipped distributions, and every toolset with
  its tools and whether its backend is configured for the composed config (e.g. with `model=sonnet`)
- snapshot: The run's config snapshot, `<run_dir>/.hydra/` (config.yaml, hydra.yaml, overrides.yaml), written
  by the CLI once an invocation holds the run directory; left as it is when it would be written the same
- sweep: What the `hermes-exp` command does once every job has ended: each job (in whatever process a launcher
  ran it) appends one status line, and the command then knows its exit code (the worst job's) and, after a
  `-m` sweep, writes the sweep summary into the sweep directory
- sweep_dirs: Hydra callback (`hydra.callbacks.sweep_dirs`): a `-m` sweep over a key left out of job directory
  names (so that its jobs would share one directory) is refused before any job starts
"""
