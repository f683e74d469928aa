"""Every input format gives the same tasks: JSONL, CSV, Parquet and a Hugging Face save_to_disk folder,
written with the real libraries, read through the real CLI."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from conftest import request_count, run_cli, write_dataset

from hermes_exp.dataset.tasks import open_dataset, scan
from hermes_exp.errors import ConfigError, DatasetError

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
IDENTITY = "id1:test"


def _rows(n: int = 50) -> list[dict]:
    rows = [{"prompt": f"Task {i}: count the words", "topic": f"t{i % 3}", "level": i % 4} for i in range(n)]
    rows[3]["prompt"] = 'A prompt with "quotes", commas,\nand a second line'
    del rows[7]["topic"]  # absent in JSONL, null in Parquet, an empty cell in CSV
    rows[9] = dict(rows[8])  # a duplicate stays a separate task
    return rows


def _as_text(rows: list[dict]) -> list[dict]:
    """CSV holds text only: the same rows with text values."""
    return [{k: str(v) for k, v in row.items()} for row in rows]


def write_all(tmp: Path, rows: list[dict]) -> dict[str, Path]:
    """The same rows in all four formats (CSV and its siblings with text values)."""
    import datasets

    text = _as_text(rows)
    paths = {"jsonl": write_dataset(tmp / "p.jsonl", text), "parquet": tmp / "p.parquet",
             "csv": tmp / "p.csv", "hf": tmp / "p_hf"}
    pq.write_table(pa.Table.from_pylist(text), paths["parquet"])
    with paths["csv"].open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=["prompt", "topic", "level"])
        writer.writeheader()
        writer.writerows(text)
    datasets.DatasetDict({"train": datasets.Dataset.from_list(text[:5]),
                          "test": datasets.Dataset.from_list(text)}).save_to_disk(str(paths["hf"]))
    return paths


def _keys(dataset: dict) -> list[tuple[int, str]]:
    return scan(open_dataset(dataset), IDENTITY, False, None).indexed


def test_the_same_rows_in_every_format_are_the_same_tasks(tmp_path: Path) -> None:
    paths = write_all(tmp_path, _rows())
    expected = _keys({"path": str(paths["jsonl"])})
    assert len(expected) == 50 and len({k for _, k, *_ in expected}) == 50
    assert [i for i, *_ in expected] == list(range(50))
    assert _keys({"path": str(paths["parquet"])}) == expected
    assert _keys({"path": str(paths["csv"])}) == expected
    assert _keys({"path": str(paths["hf"]), "split": "test"}) == expected


def test_typed_parquet_matches_typed_jsonl_and_fields_map_columns(tmp_path: Path) -> None:
    rows = _rows(10)
    jsonl = write_dataset(tmp_path / "typed.jsonl", rows)
    renamed = [{("question" if k == "prompt" else k): v for k, v in r.items()} for r in rows]
    pq.write_table(pa.Table.from_pylist(renamed), tmp_path / "q.parquet")
    mapped = {"path": str(tmp_path / "q.parquet"), "fields": {"prompt": "question"}}
    assert _keys(mapped) == _keys({"path": str(jsonl)})
    task_rows = [r.row for r in open_dataset(mapped).rows()]
    assert task_rows[7] == {k: v for k, v in rows[7].items()} and "question" not in task_rows[0]
    with pytest.raises(DatasetError, match="missing the required \"prompt\" field"):
        _keys({"path": str(tmp_path / "q.parquet")})
    with pytest.raises(ConfigError, match="dataset.fields"):
        open_dataset({"path": str(jsonl), "fields": {"prompt": "", "x": 3}})


def test_a_run_on_parquet_resumed_from_csv_hf_and_jsonl_runs_nothing(tmp_path: Path, mock_server) -> None:
    paths = write_all(tmp_path, _rows())
    common = ["run_name=formats", f"model.base_url={mock_server.base_url}", "num_workers=8"]
    first = run_cli(tmp_path, f"dataset.path={paths['parquet']}", *common)
    assert first.returncode == 0, first.stderr
    calls = request_count(tmp_path / "requests.jsonl")
    assert calls >= 50
    for args in ([f"dataset.path={paths['csv']}"], [f"dataset.path={paths['hf']}", "dataset.split=test"],
                 [f"dataset.path={paths['jsonl']}"]):
        again = run_cli(tmp_path, *args, *common)
        assert again.returncode == 0, again.stderr
        assert "nothing to run: all 50 tasks of this run are settled" in again.stderr
    assert request_count(tmp_path / "requests.jsonl") == calls
    stats = json.loads((tmp_path / "outputs" / "formats" / "statistics.json").read_text())
    assert stats["kept"] == 50 and stats["total_prompts"] == 50


def test_bad_rows_are_named_by_file_and_line_or_row(tmp_path: Path) -> None:
    data = tmp_path / "bad.csv"
    data.write_text('prompt,topic\n"two\nlines",a\n,b\nfine,c\nx,y,z\n', encoding="utf-8")
    with pytest.raises(DatasetError) as err:
        _keys({"path": str(data)})
    message = str(err.value)
    assert "2 invalid line(s)" in message
    assert f"{data}:4: missing the required \"prompt\" field" in message
    assert f"{data}:6: 3 cells where the header has 2 columns" in message
    assert "dataset.skip_invalid=true" in message
    assert [i for i, *_ in scan(open_dataset(str(data)), IDENTITY, True, None).indexed] == [0, 2]

    pq.write_table(pa.Table.from_pylist([{"prompt": "ok"}, {"prompt": None}, {"prompt": "   "}]), tmp_path / "b.parquet")
    with pytest.raises(DatasetError) as err:
        _keys({"path": str(tmp_path / "b.parquet")})
    assert f"{tmp_path / 'b.parquet'}: row 2: missing the required" in str(err.value)
    assert f"{tmp_path / 'b.parquet'}: row 3: \"prompt\" is empty" in str(err.value)
    pq.write_table(pa.Table.from_pylist([{"prompt": "ok", "blob": b"\x00"}]), tmp_path / "bin.parquet")
    with pytest.raises(DatasetError, match="(?s)binary data.*dataset.columns"):
        _keys({"path": str(tmp_path / "bin.parquet")})
    assert len(_keys({"path": str(tmp_path / "bin.parquet"), "columns": ["prompt"]})) == 1


def test_a_jsonl_file_that_starts_with_a_byte_order_mark_reads_as_without_it(tmp_path: Path) -> None:
    """Notepad and PowerShell's Out-File write a UTF-8 BOM first: the first row was an invalid line."""
    rows = b'{"prompt": "first"}\n{"prompt": "second"}\n'
    plain, marked, inner = tmp_path / "plain.jsonl", tmp_path / "bom.jsonl", tmp_path / "inner.jsonl"
    plain.write_bytes(rows)
    marked.write_bytes(b"\xef\xbb\xbf" + rows)
    assert _keys({"path": str(marked)}) == _keys({"path": str(plain)}) and len(_keys({"path": str(plain)})) == 2
    inner.write_bytes(b'{"prompt": "first"}\n\xef\xbb\xbf{"prompt": "second"}\n')  # only the file's start
    with pytest.raises(DatasetError, match=f"{inner}:2: not valid JSON"):
        _keys({"path": str(inner)})


@pytest.mark.parametrize("broken, says", [
    ('"never closed,1\nrow4,2\nrow5,3\n', "unexpected end of data"),  # would swallow every later line
    ('"closed"then more,1\nrow4,2\n', "',' expected after '\"'"),   # would become "closedthen more"
])
def test_a_quote_that_breaks_the_csv_is_refused_at_its_line(tmp_path: Path, broken: str, says: str) -> None:
    """A quoted cell never closed made the rest of the file one cell (one giant prompt: every later row
    lost, silently). Now the file is refused at the line the broken cell starts, even with skip_invalid."""
    data = tmp_path / "q.csv"
    data.write_text('prompt,level\n"two\nlines",0\n' + broken, encoding="utf-8")
    for skip in (False, True):
        with pytest.raises(DatasetError) as err:
            scan(open_dataset(str(data)), IDENTITY, skip, None)
        assert f"{data}:4: not readable as CSV from this line on ({says})" in str(err.value)
        assert "close the quoted cell" in err.value.hint


def test_source_level_errors_say_what_to_do(tmp_path: Path) -> None:
    paths = write_all(tmp_path, _rows(12))
    with pytest.raises(DatasetError, match=r"(?s)splits \['train', 'test'\].*dataset.split=valid.*one of: train, test"):
        _keys({"path": str(paths["hf"]), "split": "valid"})
    with pytest.raises(DatasetError, match=r"splits \['train', 'test'\]; dataset.split is not set"):
        _keys({"path": str(paths["hf"])})
    with pytest.raises(ConfigError, match="(?s)dataset.format='xls'.*jsonl, csv, parquet, hf"):
        open_dataset({"path": str(paths["csv"]), "format": "xls"})
    with pytest.raises(DatasetError, match="not a readable Parquet file"):
        _keys({"path": str(paths["csv"]), "format": "parquet"})
    with pytest.raises(DatasetError, match="not one written by save_to_disk"):
        open_dataset(str(tmp_path))
    with pytest.raises(DatasetError, match="(?s)columns.*'nope'.*choose from: prompt, topic, level"):
        _keys({"path": str(paths["parquet"]), "columns": ["prompt", "nope"]})
    result = run_cli(tmp_path, f"dataset.path={paths['hf']}", "dataset.split=valid")
    assert result.returncode == 2 and "Traceback" not in result.stderr and "dataset.split" in result.stderr
