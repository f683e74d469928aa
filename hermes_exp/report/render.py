"""Render runs into one self-contained HTML page: Jinja2 template, inlined CSS, JS and plotly.js."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hermes_exp.errors import HermesExpError
from hermes_exp.settings.file_modes import is_private
from hermes_exp.store.atomic import atomic_writer

DEFAULT_MAX_TRAJECTORIES = 2000
INSTALL_HINT = "pip install 'hermes-exp[report]'"


def _require() -> None:
    """The report's libraries are an optional extra: say how to get them when they are missing."""
    missing = []
    for module in ("jinja2", "plotly"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise HermesExpError(f"hermes-exp-report needs {' and '.join(missing)}, which "
                             f"{'is' if len(missing) == 1 else 'are'} not installed", INSTALL_HINT)


def _json_for_script(value: Any) -> str:
    """JSON safe inside a <script> element: no `</script>` or `<!--` can appear in it."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")


def render(runs: list[Any], source: str, max_trajectories: int) -> str:
    """The page's HTML for these runs (RunData, from hermes_exp.report.data)."""
    import jinja2
    import plotly.offline

    from hermes_exp.report.charts import all_charts
    from hermes_exp.worker.result import PHASES

    env = jinja2.Environment(loader=jinja2.PackageLoader("hermes_exp.report", "templates"),
                             autoescape=jinja2.select_autoescape(["html.j2"]), undefined=jinja2.StrictUndefined)
    entries = [e for run in runs for e in run.entries]
    total = sum(run.total - run.states.get("running", 0) for run in runs)
    return env.get_template("report.html.j2").render(
        title=f"hermes-exp report: {Path(source).name}", source=source, runs=runs, charts=all_charts(runs),
        generated=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        plotly_js=plotly.offline.get_plotlyjs(), data_json=_json_for_script({"entries": entries}),
        embedded=len(entries), total_tasks=total, capped=len(entries) < total, max_trajectories=max_trajectories,
        verified=any(run.verification for run in runs), phases=PHASES, timed=any(run.phases for run in runs))


def build_report(path: Path, out: Path | None = None,
                 max_trajectories: int = DEFAULT_MAX_TRAJECTORIES) -> Path:
    """Write the report for a run or sweep directory; return the file written."""
    _require()
    from hermes_exp.report.data import load

    path = path.resolve()
    if not path.is_dir():
        raise HermesExpError(f"{path} is not a directory", "pass a run directory such as outputs/demo")
    out = (out or path / "report.html").resolve()
    html = render(load(path, max_trajectories), str(path), max_trajectories)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_writer(out) as fh:
        fh.write(html)
    if not is_private(out.parent):  # a private run's report stays owner-only (outputs.private)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(out, 0o666 & ~umask)  # a page to share: the temp file's private mode is not wanted
    return out
