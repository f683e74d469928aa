"""Dataset readers, one module per input format, behind one small Protocol: a `Source` yields
`Record`s (row number, where it came from, the mapped row or what is wrong with it), streamed."""

from hermes_exp.inputs.base import Record, Source
from hermes_exp.inputs.choose import FORMATS, open_source

__all__ = ["FORMATS", "Record", "Source", "open_source"]
