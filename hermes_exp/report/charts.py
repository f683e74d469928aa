"""The report's plots, made with plotly: one trace per run, so a sweep's runs stand side by side.

Each function returns a chart's HTML fragment (a div and its script; plotly.js itself is inlined
once by the page), or None when there is nothing to plot."""

from __future__ import annotations

from collections.abc import Callable
from html import escape
from typing import Any

import plotly.graph_objects as go

from hermes_exp.report.data import RunData

STATE_COLORS = {"done": "#2e9d5b", "filtered": "#d9a21b", "error": "#c9433a", "running": "#7a7f87"}
STATE_NAMES = {"done": "kept", "filtered": "filtered", "error": "failed", "running": "running"}


def _html(fig: go.Figure, title: str, y_title: str, height: int = 340) -> str:
    fig.update_layout(title={"text": title, "x": 0.01}, template="plotly_white", height=height,
                      margin={"l": 60, "r": 20, "t": 50, "b": 50}, barmode=fig.layout.barmode or "group",
                      legend={"orientation": "h", "y": -0.2}, yaxis_title=y_title)
    # Counts, rates and money are never negative: an axis of zeros would otherwise run from -1 to 1.
    fig.update_yaxes(rangemode="tozero")
    if not any(y for trace in fig.data for y in (trace.y or ()) if y is not None):
        fig.update_yaxes(range=[0, 1])
    return fig.to_html(full_html=False, include_plotlyjs=False,
                       config={"displaylogo": False, "responsive": True})


def _figure(title: str, items: list[tuple[str, str]]) -> str:
    """A chart of one bar says no more than its number: the number, in words, instead."""
    body = " &middot; ".join(f"<strong>{escape(value)}</strong> {escape(label)}" for value, label in items)
    return f'<h3>{escape(title)}</h3><p class="figure">{body}</p>'


def _count(v: float) -> str:
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,}"


def _grouped(runs: list[RunData], values: list[dict[str, float]], title: str, y_title: str,
             percent: bool = False, fmt: Callable[[float], str] | None = None,
             order: Callable[[str], Any] | None = None) -> str | None:
    """Bars per category (x), one trace per run; categories in order of first appearance. A run without
    a category has no bar there (not a zero): a tool it never called has no success rate."""
    categories = list(dict.fromkeys(k for v in values for k in v))
    if not categories:
        return None
    fmt = fmt or ((lambda v: f"{v:.1f}%") if percent else _count)
    if order is not None:
        categories = sorted(categories, key=order)
    bars = [(run, c, v[c]) for run, v in zip(runs, values) for c in categories if v.get(c) is not None]
    if len(bars) == 1 or not any(value for _, _, value in bars):  # one bar, or bars of zero height
        return _figure(title, [(fmt(value), category + (f" ({run.label})" if len(runs) > 1 else ""))
                               for run, category, value in bars])
    fig = go.Figure([go.Bar(name=run.label, x=categories, y=[v.get(c) for c in categories],
                            texttemplate="%{y:.0f}%" if percent else "%{y}", textposition="outside",
                            textfont_size=10, cliponaxis=False)
                     for run, v in zip(runs, values)])
    if percent:
        fig.update_yaxes(range=[0, 110])
    return _html(fig, title, y_title)


def outcomes(runs: list[RunData]) -> str | None:
    """Kept / filtered / failed per run, stacked; a single run's as numbers (one bar would be its total)."""
    if len(runs) == 1:
        run = runs[0]
        items = [(str(run.states.get(s, 0)), STATE_NAMES[s]) for s in STATE_COLORS
                 if s != "running" or run.states.get(s)]
        return _figure("Outcome of every task", items + [(str(run.total), "tasks in all")]) if run.total else None
    labels = [run.label for run in runs]
    fig = go.Figure([go.Bar(name=STATE_NAMES[s], x=labels, y=[run.states.get(s, 0) for run in runs],
                            marker_color=STATE_COLORS[s], text=[run.states.get(s, 0) or "" for run in runs])
                     for s in STATE_COLORS if any(run.states.get(s) for run in runs)])
    fig.update_layout(barmode="stack")
    return _html(fig, "Outcome of every task", "tasks") if fig.data else None


def tool_calls(runs: list[RunData]) -> str | None:
    return _grouped(runs, [{t["tool"]: t["calls"] for t in run.tools} for run in runs],
                    "Tool calls per tool (kept tasks)", "calls")


def tool_success(runs: list[RunData]) -> str | None:
    return _grouped(runs, [{t["tool"]: t["success_rate"] for t in run.tools if t["calls"]} for run in runs],
                    "Success rate per tool (kept tasks)", "% of calls", percent=True)


def turns(runs: list[RunData]) -> str | None:
    return _grouped(runs, [{str(k): v for k, v in run.turns.items()} for run in runs],
                    "Assistant turns per trajectory (kept and filtered)", "trajectories", order=int)


def reasoning(runs: list[RunData]) -> str | None:
    if not any(run.reasoning[1] for run in runs):
        return None
    return _grouped(runs, [{"of assistant turns carry reasoning (kept tasks)": run.coverage} for run in runs],
                    "Reasoning coverage", "% of assistant turns", percent=True)


def filter_reasons(runs: list[RunData]) -> str | None:
    return _grouped(runs, [run.reasons for run in runs], "Why tasks were filtered", "tasks")


def errors(runs: list[RunData]) -> str | None:
    return _grouped(runs, [run.errors for run in runs], "Failed tasks by error class", "tasks")


def tokens(runs: list[RunData]) -> str | None:
    names = {"prompt": "prompt", "completion": "completion", "reasoning": "reasoning (part of completion)"}
    return _grouped(runs, [{names[k]: v for k, v in run.tokens.items() if v} for run in runs], "Tokens", "tokens")


def cost(runs: list[RunData]) -> str | None:
    if all(run.cost is None for run in runs):
        return None
    return _grouped(runs, [{"in all": round(run.cost or 0.0, 4)} for run in runs], "Cost", "USD",
                    fmt=lambda v: f"{v:.4f} USD")


def pass_rates(runs: list[RunData]) -> str | None:
    """Pass rate (a share of the samples) and pass@k / pass^k (estimates over the prompts) per run."""
    values = []
    for run in runs:
        v = run.verification or {}
        row = {"pass rate (of samples)": 100 * v["pass_rate"]} if v.get("pass_rate") is not None else {}
        if v.get("suspect") and v.get("pass_rate_without_suspect") is not None:  # zeros that may be infrastructure's
            row["pass rate without verifier_suspect samples"] = 100 * v["pass_rate_without_suspect"]
        row.update({f"pass@{k} (of prompts)": 100 * p for k, p in (v.get("pass_at_k") or {}).items() if k != "1"})
        row.update({f"pass^{k} (of prompts)": 100 * p for k, p in (v.get("pass_hat_k") or {}).items() if k != "1"})
        values.append(row)
    return _grouped(runs, values, "Verified: pass rate, pass@k and pass^k", "%", percent=True)


def all_charts(runs: list[RunData]) -> list[dict[str, Any]]:
    """Every chart in page order: id, title, HTML (None when empty) and what to say when empty."""
    sections = [
        ("outcomes", outcomes, "Outcome of every task", "No tasks in the ledger."),
        ("verified", pass_rates, "Verified: pass rate, pass@k and pass^k", "No sample was verified."),
        ("tool-calls", tool_calls, "Tool calls per tool (kept tasks)", "No tool calls."),
        ("tool-success", tool_success, "Success rate per tool", "No tool calls."),
        ("turns", turns, "Assistant turns per trajectory", "No finished trajectories."),
        ("reasoning", reasoning, "Reasoning coverage", "No assistant turns."),
        ("filters", filter_reasons, "Why tasks were filtered", "No task was filtered."),
        ("errors", errors, "Failed tasks by error class", "No task failed."),
        ("tokens", tokens, "Tokens", "No token usage recorded."),
        ("cost", cost, "Cost", "No cost recorded: the provider reported none."),
    ]
    return [{"id": i, "html": fn(runs), "title": title, "empty": empty} for i, fn, title, empty in sections]
