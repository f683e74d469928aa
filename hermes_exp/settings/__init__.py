"""The resolved config: plain values, identity, paths, sections, secrets and redaction.

- canonical: Canonical JSON: the one spelling of a value that identities and task keys hash (sorted keys,
  compact separators, text as it is)
- count_limits: The most a run's counts may be
- file_modes: `outputs.private`: owner-only outputs; every file and directory hermes-exp writes takes the
  privacy of the directory it is written in (0600/0700 in a private run directory)
- instantiation: Building a configured object (`_target_`) from its config node, with errors a user can act on
- paths: Where hermes-exp's own files are: the shipped configs (`conf/`) and the demo dataset, and the
  resolver that names the demo dataset in `conf/config.yaml`
- redact: The run's secret values (API keys read from the environment variables the config names): redacted
  from every error text that is stored or printed, and wiped from the process's own environment block, which a
  tool command could otherwise read through /proc/$PPID/environ
- resolved: The resolved run config as plain data, its identity hash, the prefill messages and the API key it
  names (the start-up checks are in run/checks.py)
- run_options: The run's own keys that other modules read with a bare `bool()`, `int()` or `float()`, checked
  once before any work: `resume.redo_all=no` is the string "no" to Hydra, which `bool()` takes for true (every
  task run again, and paid for again); `seed=abc` would fail every task one by one after the run started
- secrets: Refuse a secret given as a config value, before anything is written. hermes-exp reads keys only
  from environment variables the config names (`api_key_env`), so a key typed as a value is never used, but it
  would be saved: in the config snapshot, the ledger's identity, a sweep's job directory name and
  multirun.yaml
- sections: One reader for a config section (the mapping under one dotted key): unknown keys, numbers, flags
  and choices are checked here, each error naming the key, the bad value, what is valid and the fix
"""
