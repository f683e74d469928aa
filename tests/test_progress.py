"""Progress: plain periodic lines in a log, a rich live bar on a real pseudo-terminal, and log lines
that come out whole above the bar while it is live."""

from __future__ import annotations

import io
import logging
import os
import pty
import re
import select
import time

from rich.file_proxy import FileProxy

from hermes_exp.run.progress import Progress

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_log_lines_when_not_a_terminal() -> None:
    out = io.StringIO()
    progress = Progress(total=4, already=2, stream=out, every=3600)
    progress.note(tokens=1500, cost=0.25, concurrency=8, rate_limited=2)
    for state in ("done", "filtered", "error", "done"):
        progress.update(state)
    progress.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 2  # the first finished task, then the last: nothing redrawn in between
    assert lines[0].startswith("hermes-exp [######------------------] 1/4  done 1  filtered 0  failed 0")
    last = lines[-1]
    for part in ("4/4", "done 2", "filtered 1", "failed 1", "running 0", "1.5k tokens", "$0.2500",
                 "concurrency 8", "429s 2 in last 60s", "2 finished earlier", "took "):
        assert part in last, part
    assert "\x1b" not in out.getvalue() and "\r" not in out.getvalue()


def test_line_shows_running_and_eta() -> None:
    progress = Progress(total=10, stream=io.StringIO())
    progress.note(concurrency=4)
    progress.update("done")
    line = progress.line()
    assert "running 4" in line and "eta " in line and "1/10" in line
    progress.note(rate_limited=5)  # the 429s a worker's rate limiter saw since its last result
    for _ in range(7):
        progress.update("done")
    assert "running 2" in progress.line() and "429s 5 in last 60s" in progress.line()  # 2 tasks are left


def read_all(fd: int, seconds: float = 0.5) -> str:
    chunks, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            try:
                chunks.append(os.read(fd, 65536))
            except OSError:
                break
    return b"".join(chunks).decode("utf-8", "replace")


def test_live_bar_on_a_terminal_keeps_log_lines_whole() -> None:
    master, slave = pty.openpty()
    stream = os.fdopen(slave, "w", encoding="utf-8")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
    logger = logging.getLogger("hx-test-worker")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        progress = Progress(total=3, stream=stream)
        assert progress.tty and isinstance(handler.stream, FileProxy)  # routed through rich while live
        for i in range(3):
            logger.info("worker %d finished its sandbox cleanly", i)
            progress.note(tokens=100, concurrency=2)
            progress.update("done")
            time.sleep(0.3)  # let the live display redraw between log lines
        progress.close()
        assert handler.stream is stream  # given back
        text = ANSI.sub("", read_all(master).replace("\r", ""))
    finally:
        logger.removeHandler(handler)
        stream.close()
        os.close(master)
    for i in range(3):
        assert f"[hx-test-worker] worker {i} finished its sandbox cleanly\n" in text
    assert "3/3" in text and "done 3" in text and "hermes-exp" in text and "━" in text


def test_projected_cost_from_the_tasks_finished_so_far() -> None:
    out = io.StringIO()
    progress = Progress(total=10, stream=out, every=3600, spent_before=1.0)
    assert progress.projection() is None
    for cost in (0.1, 0.5, 0.1):
        progress.task_cost(cost)
        progress.update("done")
    mean, p90 = progress.projection()
    assert abs(mean - (1.0 + 0.7 + 7 * 0.7 / 3)) < 1e-9 and abs(p90 - (1.0 + 0.7 + 7 * 0.5)) < 1e-9
    assert f"projected ${mean:.4f} (p90 ${p90:.4f})" in progress.line()
    assert "projected $" in out.getvalue().splitlines()[0]  # the first log line already shows it
    assert re.search(r"eta \S+ \(~\d\d:\d\d\)", progress.line())
    free = Progress(total=3, stream=io.StringIO())
    free.task_cost(0.0)
    free.update("done")
    assert free.projection() is None and "projected" not in free.line()
