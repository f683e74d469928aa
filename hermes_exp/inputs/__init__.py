"""Dataset readers, one module per input format, behind one small Protocol: a `Source` yields
`Record`s (row number, where it came from, the mapped row or what is wrong with it), streamed."""

from hermes_exp.inputs.base import Record, Source
from hermes_exp.inputs.choose import FORMATS, dataset_base_dir, open_source

__all__ = ["FORMATS", "Record", "Source", "dataset_base_dir", "open_source"]
