"""Dataset readers, one per format (jsonl, csv, parquet, hf, harbor), streaming rows.

- base: The reader Protocol and the record it yields; shared by every input format
- choose: Which reader a dataset gets: `dataset.format`, else the path's extension (a folder: Harbor task
  folders, else HF `save_to_disk`)
- csvfile: CSV (and TSV): a header row of column names, then one row per prompt; read row by row
- fields: Row normalisation shared by every format, so a task's content key does not depend on the file
  format: `dataset.fields` renames source columns onto ours (`prompt`, `image`, `cwd`, `expected`, ...), nulls
  count as absent (a columnar file has a null wherever a JSONL row has no such key), and values become plain
  JSON (dates as ISO text)
- harbor: Harbor task folders as a dataset (`dataset.format=harbor`, or a folder of folders with task.toml):
  one task per folder, as Harbor lays it out (harbor-framework/harbor, src/harbor/models/task/paths.py):
  instruction.md (the prompt), task.toml, environment/Dockerfile, tests/test.sh, solution/solve.sh
- harbor_toml: A Harbor `task.toml` read into what hermes-exp applies, and the keys it does not
- hf: A Hugging Face dataset saved with `save_to_disk` (a folder): memory-mapped Arrow, read in batches as
  stored (image and audio columns stay undecoded); `dataset.split` picks a split of a DatasetDict
- jsonl: JSONL: one JSON object per line, read line by line, in binary: a line ends at b"\\n" only (a lone
  carriage return inside a line is JSON whitespace, not a line break), and a line that is not UTF-8 is one
  invalid line, reported with its byte offset, not the end of the whole file
- parquet: Parquet: read in record batches (never the whole table), optionally only some columns
"""
from hermes_exp.dataset.readers.base import Record, Source
from hermes_exp.dataset.readers.choose import FORMATS, dataset_base_dir, open_source

__all__ = ["FORMATS", "Record", "Source", "dataset_base_dir", "open_source"]
