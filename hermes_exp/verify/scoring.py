"""Running verifiers in a worker: which verifier a row gets (built once per effective config), the timed, guarded
call that turns its verdict or failure into a Score, and the workdir archive taken before a `command`
verification (kept with `verifier.keep_workdir=true`, or when the verification failed or is suspect, so a
later invocation can verify again in a fresh sandbox without re-running the agent)."""

from __future__ import annotations

import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any

from hermes_exp.dataset.readers import dataset_base_dir
from hermes_exp.dataset.tasks import canonical_json
from hermes_exp.sandbox.base import Sandbox, SandboxFactory
from hermes_exp.verify import registry
from hermes_exp.verify.base import Score, Verifier, VerifierFailed, VerifyContext, clip, reward_problem
from hermes_exp.sandbox.files import archive_workdir, restore_workdir

MB = 1 << 20


@dataclass
class Plan:
    """How one sample is verified: the effective config, its identity and the built verifier."""

    cfg: dict[str, Any]
    vid: str
    verifier: Verifier

    @property
    def kind(self) -> str:
        return str(self.cfg.get("kind", "?"))

    @property
    def needs_sandbox(self) -> bool:
        return bool(getattr(self.verifier, "needs_sandbox", False))

    def archive_policy(self) -> tuple[bool, bool]:
        """(take an archive before verifying, keep it even when the verification succeeds)."""
        keep = bool(self.cfg.get("keep_workdir"))
        return self.needs_sandbox and (keep or bool(self.cfg.get("archive_on_error", True))), keep


class Scorer:
    """Per process and run (held by the worker's Runtime). `settings["invocation"]["verifiers"]` holds
    every conf/verifier option, loaded by the parent (registry.load_options)."""

    def __init__(self, settings: dict[str, Any], runtime: Any = None) -> None:
        self.options = (settings.get("invocation") or {}).get("verifiers") or {}
        self.chosen = str((settings.get("verifier") or {}).get("kind", registry.NONE))
        if self.chosen not in self.options:
            self.options = {**self.options, self.chosen: settings.get("verifier") or {"kind": registry.NONE}}
        self.context = VerifyContext(base_dir=dataset_base_dir(settings.get("dataset")),
                                     in_container=(settings.get("sandbox") or {}).get("kind") == "docker",
                                     runtime=runtime, settings=settings)
        self._built: dict[str, Verifier] = {}
        self._lock = threading.Lock()

    def plan(self, row: dict[str, Any]) -> Plan | None:
        """The row's verification, or None when it is not verified. Raises ConfigError for a bad row."""
        cfg = registry.effective(self.options, self.chosen, row)
        if cfg is None:
            return None
        vid = registry.identity(cfg)
        # cached by the whole config: the identity leaves out keys that change how it runs (its timeout)
        built = canonical_json(cfg)
        with self._lock:
            if built not in self._built:
                self._built[built] = registry.build(cfg, self.context)
            return Plan(cfg, vid, self._built[built])


def score_cost(score: dict[str, Any] | None) -> float:
    """What a verification spent on model calls (a judge's), in USD."""
    return sum(u.get("cost_usd") or 0.0 for u in (score or {}).get("usage") or [])


def run_plan(plan: Plan, sandbox: Sandbox | None, row: dict[str, Any], result: dict[str, Any]) -> Score:
    """Verify one sample; a verifier that raises (or cannot judge) gives a Score with `error` set."""
    started = time.monotonic()
    score = Score(verifier=plan.vid, kind=plan.kind)
    try:
        verdict = plan.verifier.verify(sandbox, row, result)
        problem = reward_problem(float(verdict.reward))
        if problem:  # refused whole: an absurd reward must not pass, nor swamp the run's statistics
            raise VerifierFailed(f"{problem}\n{verdict.details}", list(verdict.usage))
        score.reward, score.details, score.usage = float(verdict.reward), verdict.details, list(verdict.usage)
        score.output = verdict.output or None
        score.passed = score.reward >= float(getattr(plan.verifier, "pass_threshold", 1.0))
        # a pass is the check run to its end; a zero with signs of a broken environment may not be the agent's
        score.suspect = None if score.passed else verdict.suspect
    except VerifierFailed as exc:
        score.error, score.usage = str(exc), list(exc.usage)
    except Exception as exc:  # a verifier's bug fails its own verification, never the task's result
        score.error = clip(f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}")
    score.seconds = round(time.monotonic() - started, 4)
    return score


def verify_in_sandbox(plan: Plan, sandbox: Sandbox, row: dict[str, Any],
                      result: dict[str, Any]) -> tuple[Score, bytes | None, str]:
    """Archive the workdir first when the policy says so, then verify. Returns the score, the archive
    to keep (or None) and a note on why none was kept when one was wanted. Every process the agent
    started is stopped first: one left running could rewrite the reward file the verifier reads."""
    try:
        sandbox.stop_processes()
    except Exception as exc:  # the sample cannot be verified honestly: a verifier error, never a reward
        return Score(verifier=plan.vid, kind=plan.kind, error=f"cannot stop the agent's processes: {exc}"), None, ""
    take, keep = plan.archive_policy()
    packed, note = None, ""
    if take:
        try:
            packed, note = archive_workdir(sandbox, int(float(plan.cfg.get("archive_max_mb", 50)) * MB))
        except Exception as exc:  # an archive is a convenience: it never fails the sample
            note = f"{type(exc).__name__}: {exc}"
    score = run_plan(plan, sandbox, row, result)
    if not keep and score.error is None and score.suspect is None:  # a suspect one is verified again later
        packed = None
    return score, packed, note


class CannotReverify(Exception):
    """A sample cannot be verified again here (no archive, one that cannot be restored): its old score
    stands; the message says why."""


def reverify_sample(scorer: Scorer, sandboxes: SandboxFactory, item: dict[str, Any]) -> Score | None:
    """Verify a finished sample again without its agent: from the ledger alone, or (a `command`
    verifier) in a fresh sandbox of the same kind and image, restored from the workdir archive. Raises
    CannotReverify when that cannot be done (the sample's scores are then left as they are)."""
    row, result = item["row"], item["result"]
    try:
        plan = scorer.plan(row)
    except Exception as exc:
        return Score(verifier="?", kind=str(row.get("verifier") or scorer.chosen), error=str(exc))
    if plan is None:
        return None
    if not plan.needs_sandbox:
        return run_plan(plan, None, row, result)
    if not item.get("archive"):
        raise CannotReverify(
            "no archive of its working directory, so verifier=command cannot run again without the agent; "
            "runs with verifier.keep_workdir=true keep archives (resume.redo_all=true re-runs agents)")
    sandbox = sandboxes.open(item["key"], row)
    try:
        try:
            restore_workdir(sandbox, item["archive"])
        except Exception as exc:
            raise CannotReverify(f"cannot restore the workdir archive: {exc}") from exc
        return run_plan(plan, sandbox, row, result)
    finally:
        sandbox.close()
