"""Rows -> tasks: reading every input format, validating rows, keying tasks, selecting rows.

- readers/: Dataset readers, one per format (jsonl, csv, parquet, hf, harbor), streaming rows.
- selection: Which rows of the dataset a run covers: `dataset.where` (field=value), `dataset.ids_file` (with
  `dataset.id_field`), then `dataset.shuffle` (a seeded order) and `dataset.slice` ("start:stop")
- slots: A scan's tasks and spool positions, packed: ~32 bytes per task (row index, sample, the key's 16-byte
  digest) instead of a Slot tuple, its key string, its ints and a list entry (~0.18 KB), and two integers per
  row instead of a dict entry (~0.1 KB)
- tasks: Validate a dataset's rows (any format, streamed from hermes_exp.dataset.readers) and compute each
  task key
"""
