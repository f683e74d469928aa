"""Where tool commands run: one fresh sandbox per prompt (local, bwrap, docker).

- auto: `sandbox=auto`: bubblewrap where it works on this machine, otherwise the local sandbox
- background: Background processes of one sandbox (what the `process` tool drives): started by `spawn`, their
  new output read, their stdin fed, killed on request, and killed with their sandbox whatever happens
- base: The Sandbox protocol every backend implements, and helpers they share
- bwrap: `sandbox=bwrap`: each prompt's commands run under bubblewrap, with a read-only system, no network, a
  private uid 1000, a per-task directory bound at /task, and rlimit/cgroup limits
- docker: `sandbox=docker`: one long-lived container per prompt, commands run through `docker exec`
- docker_background: Background processes inside a docker sandbox: a `docker exec` with an attached stdin
  socket whose output frames a thread copies to disk
- docker_compat: Engines behind the Docker API that are not Docker's dockerd (Podman's service), and runtimes
  that are not runc (gVisor's runsc): what each needs, learned from the engine once before any container
- docker_changes: What a task changed in its container outside the working directory (the engine's list of
  changed paths read into a tar and a list of deletions), so a fresh container can be put back in that state
  before a re-score
- docker_engine: The Docker engine as `sandbox=docker` sees it: the SDK (imported lazily, with an install
  hint), the errors that mean "the engine failed", one client per factory, the labels a run's containers carry
  and the removal of a run's containers (its leftovers at start, all of them at shutdown)
- docker_exec: One command in a running container through `docker exec`: its output streamed to a spool file
  on the host (a flood costs disk, not memory), the clock and the command watched, and what it left killed
- docker_file_tools: The file tools' read and write in a running container through one `docker exec` each: a
  small shell script, the data on its stdin or its stdout
- docker_files: Files in and out of a running container through the engine's archive API (no command in the
  container): the file tools' read and write, and whole-folder tars for fixtures, verifiers and archives
- docker_images: Which images a docker factory can start: each distinct image is looked up once (pulled within
  `pull_timeout` if missing) and the answer, good or bad, is kept for the run
- docker_lifecycle: Creating and starting one task container: its limits, its labels, its keeper process
- docker_pool: The warm pool (`sandbox.warm_pool`): containers of the run's default image created and started
  ahead, so a task's open does not wait for the engine
- docker_remover: Removing closed task containers in the background (`sandbox.remove_in_background`): a task's
  close() queues its container and returns, so the session and its slot are free at once while a few remover
  threads do the engine's work
- docker_sandbox: `DockerSandbox`: one task's running container
- dockerfile: The base images a Dockerfile builds on (its FROM lines, ARG defaults substituted): part of a
  built image's tag, so a changed base image means a new build
- files: Files into and out of a sandbox: a row's `files` / `tests` / `solution_files` (a map path -> content,
  or a local folder) copied in as one tar, and the working directory archived (gzip, size-capped) and
  restored, so a `command` verifier can re-run in a fresh sandbox (`action=score`)
- grouplog: The reaper's records of running tool commands (reaper.py): one append-only file per process, a
  line when a command starts ("+PID TICKS") and one when it has been reaped ("-PID"), instead of a file
  created and removed per command and a read of /proc/PID/stat for its start time (~0.25 ms of every command)
- images: Images built from a build context (a Harbor task's `environment/` with its Dockerfile) through the
  Docker SDK. The tag is a hash of the context's content, so each distinct context is built once per engine
  and reused across runs and tasks; a failed build is a SandboxError naming the task and ending with the build
  log's last lines, remembered for the rest of the run so the task's other samples fail at once (the next
  invocation builds again: class `sandbox` is retried)
- local: `sandbox=local`: a fresh temporary directory per prompt and a clean environment; no namespaces
- options: The sandbox section's values, read by one reader for every backend: each bad value is refused with
  its key (sandbox.<key>), the value, what is valid and the fix
- process: Run one command as a process group with a timeout, bounded output, and no inherited environment
- reaper: Processes of a run that must not outlive it: tool commands in their own sessions (sandbox=local) and
  executor worker processes
- spawn: Start a tool command as run_group needs it, with glibc's posix_spawn: what subprocess.Popen(argv,
  cwd=..., env=..., stdin=DEVNULL, stdout=out, stderr=STDOUT, start_new_session=True, close_fds=True) does,
  for a fraction of its per-call Python (~0.2 ms of the runner's CPU per command, most of a tool call's cost)
- startrate: A cap on how fast a factory starts sandboxes (`sandbox.max_starts_per_second`): a burst of
  container creates and starts, one per session at a run's start, queues in the engine and slows every start;
  spacing them keeps each one quick. 0 (or less) means no cap
- stop: Stopping what the agent started before its sample is verified, so no process it left running can
  rewrite the reward file
- taskdirs: Per-task host directories, shared by the local and bwrap backends: named after the run so a killed
  run's leftovers (and only those) are found, and tracked while open so shutdown closes them
"""
