"""Opening and reading a current ledger needs no sqlite-utils (store/lazydb.py): a settled run's no-op
never imports it (nor click, pluggy, its plugins); the first write goes through sqlite-utils as before.
Each check runs in a fresh interpreter, on a real ledger file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hermes_exp.store.ledger import Ledger
from hermes_exp.store.rows import ledger_row
from hermes_exp.worker.result import TaskResult

IDENTITY_CONFIG = {"model": {"name": "m"}}

READER = """
import json, sys
from pathlib import Path
from hermes_exp.store.ledger import Ledger
ledger = Ledger(Path(sys.argv[1]))
ledger.claim_identity("id-1", {"model": {"name": "m"}})
seen = {"totals": list(ledger.totals()), "spent": ledger.spent_usd(), "derived": ledger.derived("x"),
        "fingerprint": bool(ledger.fingerprint()), "meta": ledger.meta("identity"),
        "recursive_triggers": ledger.db.execute("PRAGMA recursive_triggers").fetchone()[0],
        "changes": ledger.db.conn.total_changes}
seen["sqlite_utils_after_reads"] = "sqlite_utils" in sys.modules
if len(sys.argv) > 2:
    ledger.set_meta({"written": sys.argv[2]})
    seen["sqlite_utils_after_write"] = "sqlite_utils" in sys.modules
ledger.close()
print(json.dumps(seen))
"""


def _ledger(path: Path) -> None:
    ledger = Ledger(path)
    try:
        ledger.claim_identity("id-1", IDENTITY_CONFIG)
        ledger.mark_running("k1", 0, "p")
        ledger.record(ledger_row(TaskResult.from_dict({"key": "k1", "index": 0, "row": {"prompt": "p"}, "messages": [], "spent_usd": 0.5,
                                  "started_at": 1.0, "finished_at": 2.0, "state": "done"}), []), 10)
        ledger.set_derived("x", {"n": 1})
        ledger.fingerprint()  # the export keeps the totals, as a run's last step does
    finally:
        ledger.close()


def _read(path: Path, *write: str) -> dict:
    out = subprocess.run([sys.executable, "-c", READER, str(path), *write], capture_output=True, text=True,
                         timeout=60, check=True)
    return json.loads(out.stdout)


def test_reading_a_current_ledger_imports_no_sqlite_utils_and_writes_nothing(tmp_path: Path) -> None:
    _ledger(tmp_path / "ledger.db")
    seen = _read(tmp_path / "ledger.db")
    assert seen["sqlite_utils_after_reads"] is False
    assert seen["totals"][0] == 1 and seen["spent"] == 0.5 and seen["derived"] == {"n": 1} and seen["fingerprint"]
    assert seen["meta"] == "id-1" and seen["changes"] == 0  # the same identity is not written again
    assert seen["recursive_triggers"] == 1  # as sqlite-utils sets it on its connections


def test_the_first_write_goes_through_sqlite_utils(tmp_path: Path) -> None:
    _ledger(tmp_path / "ledger.db")
    seen = _read(tmp_path / "ledger.db", "yes")
    assert seen["sqlite_utils_after_reads"] is False and seen["sqlite_utils_after_write"] is True
    ledger = Ledger(tmp_path / "ledger.db")
    try:
        assert ledger.meta("written") == "yes"
    finally:
        ledger.close()


def test_another_identity_config_under_the_same_identity_is_written_again(tmp_path: Path) -> None:
    _ledger(tmp_path / "ledger.db")
    ledger = Ledger(tmp_path / "ledger.db")
    try:
        ledger.claim_identity("id-1", {"model": {"name": "m"}, "older": "form"})
        assert json.loads(ledger.meta("identity_config")) == {"model": {"name": "m"}, "older": "form"}
    finally:
        ledger.close()


def test_a_new_ledger_is_migrated_and_a_migrated_one_is_left_alone(tmp_path: Path) -> None:
    from hermes_exp.store import migrations

    ledger = Ledger(tmp_path / "ledger.db")
    try:
        names = [row[0] for row in ledger.db.execute("SELECT name FROM _migrations ORDER BY name")]
        assert sorted(name for name, _ in migrations.MIGRATIONS) == names
        assert migrations.apply(ledger.db) == []
    finally:
        ledger.close()
