"""A missing extra is reported by the error that names the package and the install command, in the caller's
own error type, never as a bare ImportError (sys.modules[name] = None makes `import name` fail as if the
package were not installed)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hermes_exp.errors import ConfigError, DatasetError, HermesExpError


def _parquet_reader(tmp: Path) -> Any:
    from hermes_exp.dataset.readers.parquet import pyarrow_module

    return pyarrow_module()


def _parquet_output(tmp: Path) -> Any:
    from hermes_exp.store.formats import _pyarrow

    return _pyarrow()


def _hf_reader(tmp: Path) -> Any:
    from hermes_exp.dataset.readers.hf import HfDiskSource

    return list(HfDiskSource(tmp, {}, None, None).rows())


def _tokenizer(tmp: Path) -> Any:
    from hermes_exp.compress.tokens import load_counter

    (tmp / "tokenizer.json").write_text("{}")
    return load_counter(str(tmp / "tokenizer.json"))


def _tiktoken(tmp: Path) -> Any:
    from hermes_exp.compress.tokens import load_counter

    return load_counter("tiktoken:cl100k_base")


def _dask(tmp: Path) -> Any:
    from hermes_exp.executor.backends import DaskExecutor

    return DaskExecutor().cluster()


def _playwright(tmp: Path) -> Any:
    from hermes_exp.tools.browser_runtime import _playwright

    return _playwright()


def _tracing(tmp: Path) -> Any:
    from hermes_exp.worker.tracing import check

    return check({"tracing": {"otlp_endpoint": "http://127.0.0.1:4318"}})


CASES = [
    (_parquet_reader, ("pyarrow", "pyarrow.parquet"), DatasetError, "hermes-exp[parquet]"),
    (_parquet_output, ("pyarrow", "pyarrow.parquet"), ConfigError, "drop parquet from outputs.formats"),
    (_hf_reader, ("datasets",), DatasetError, "hermes-exp[hf]"),
    (_tokenizer, ("tokenizers",), ConfigError, "hermes-exp[compress]"),
    (_tiktoken, ("tiktoken",), ConfigError, "pip install tiktoken"),
    (_dask, ("dask", "dask.distributed"), ConfigError, "hermes-exp[dask]"),
    (_playwright, ("playwright", "playwright.async_api"), ConfigError, "hermes-exp[browser]"),
    (_tracing, ("opentelemetry.sdk.trace.export", "opentelemetry.exporter.otlp.proto.http.trace_exporter"),
     ConfigError, "hermes-exp[tracing]"),
]


@pytest.mark.parametrize("reach, modules, error, hint", CASES, ids=[c[0].__name__.strip("_") for c in CASES])
def test_a_missing_extra_names_its_install(reach: Callable[[Path], Any], modules: tuple[str, ...],
                                           error: type[HermesExpError], hint: str, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    for name in modules:
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(error) as raised:
        reach(tmp_path)
    assert hint in raised.value.hint
    assert isinstance(raised.value.__cause__, ImportError)
