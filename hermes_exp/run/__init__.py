"""One invocation, in the parent: checks, planning, dispatch, the actions (export, score, compress, merge) and progress.

- checks: Every start-up check of an invocation, in one place: `check_all(settings) -> Checked`, one frozen
  value (the action, the resume intent, the samples, the export selection and formats, the pilot, the
  distribution) that later code reads instead of validating the settings again
- dispatch: The dispatch, in the parent alone: hand the pending tasks to the executor, commit each result to
  the ledger as it comes back, re-verify failed verifications, and close whatever the workers left open
- environments: preflight=oracle: each distinct environment of the tasks to run checked once before any
  model call; broken tasks recorded as error class `broken`, never sent to the model; verdicts kept by content key
- export_action: `action=export` (and `action=compress`): re-apply the current filters to every finished task
  and rewrite the outputs from the ledger, without a single model call
- export_scope: Which tasks an export covers: the invocation's own dataset selection and samples_per_prompt,
  brought into the ledger (task count, selected keys) as a run's plan does, with nothing run
- guard: The parent's run-wide stops: the budget is reached, or calls keep failing authentication or finding
  no such model (404)
- invocation: One run: check the settings, plan pending tasks, dispatch them, commit each result to the
  ledger, export
- ledger_open: The run's ledger, opened under the run lock: claimed by this experiment (an earlier one
  archived when `resume.new_identity` asks), refused when it is damaged or belongs to another experiment
- lock: One invocation per run directory at a time: an exclusive flock, released by the OS on any exit
- merge_action: `action=merge`: the ledgers of a run's shards (`dataset.shard=I/N`, each in its own run
  directory) joined into this run directory's ledger, then exported as one run
- pilot: Know the cost before paying it: `pilot=K` runs K tasks spread evenly over the selected dataset and
  projects the whole run (every task, every sample) from what they cost and how long they took; the same
  command without `pilot` then runs the rest (the K are done, so they are not run again)
- plan: Which tasks an invocation runs: the dataset's keys minus what the ledger says is settled, according to
  the user's resume intent (continue, retry error classes, redo filtered, redo all)
- prepare: What a run derives from its settings before it claims the run directory (the identity, the dataset,
  the selection, the pilot size, the verifier options, the scan cache), each computed once, and whether the
  invocation is a settled no-op: the ledger's last plan found nothing to run from this very cached scan and
  selection, and no task row was written since (plan.settled_verdict's rule)
- progress: Live progress on stderr: a rich bar redrawn in place on a terminal, periodic plain lines otherwise
- rescore: Verification without the agent: re-verify samples whose verification failed (every invocation
  does), and `action=score`, which applies the current verifier to every finished sample
- scan_cache: The last scan's task keys, kept in `<run_dir>/.scan-cache`, so an invocation over an unchanged
  dataset file plans without re-reading and re-hashing every row (a settled 100k run: most of a no-op)
- score_action: `action=score`: apply the current verifier to every finished sample of a run, without running
  an agent, then re-apply the filters and rewrite the outputs
- signals: SIGINT and SIGTERM stop a run once: the first raises KeyboardInterrupt (no new tasks; finished work
  is committed, sandboxes closed), every later one only hurries that shutdown along
- summary: What an invocation prints when it ends (the counts, the files, how to resume or retry) and the exit
  codes
"""
