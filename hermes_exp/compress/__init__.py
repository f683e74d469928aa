"""Compression of trajectories to a token budget (`action=compress`, `outputs.compress=true`)."""

from hermes_exp.compress.run import check, compress, describe, wanted

__all__ = ["check", "compress", "describe", "wanted"]
