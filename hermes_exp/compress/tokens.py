"""Token counts for compression: a Hugging Face `tokenizers` tokenizer.json, or a tiktoken encoding
that is already available on this machine (`compress.tokenizer`)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from hermes_exp.errors import ConfigError
from hermes_exp.optional import require

Counter = Callable[[list[str]], list[int]]
_KEY = "compress.tokenizer"


def load_counter(spec: str | None) -> tuple[Counter, str]:
    """(a function counting the tokens of each text, the tokenizer's identity for the ledger)."""
    if not spec:
        raise ConfigError(f"{_KEY} is not set: compression counts tokens with the tokenizer of the model "
                          "you will fine-tune", f"set {_KEY}=path/to/tokenizer.json (a Hugging Face tokenizers "
                          f"file) or {_KEY}=tiktoken:<encoding> (e.g. tiktoken:cl100k_base, if cached locally)")
    if spec.startswith("tiktoken:"):
        return _tiktoken(spec.removeprefix("tiktoken:"))
    return _tokenizers(Path(spec).expanduser())


def _tokenizers(path: Path) -> tuple[Counter, str]:
    if not path.is_file():
        raise ConfigError(f"{_KEY}={str(path)!r}: no such file",
                          f"point {_KEY} at a tokenizer.json (e.g. from the model's Hugging Face repository)")
    Tokenizer = require("tokenizers", ConfigError("compression needs the `tokenizers` package, which is not "
                                                  "installed", "pip install 'hermes-exp[compress]'")).Tokenizer
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception for a malformed file
        raise ConfigError(f"{_KEY}={str(path)!r} is not a tokenizers file ({exc})",
                          f"point {_KEY} at a tokenizer.json saved by the Hugging Face tokenizers library") from exc

    def count(texts: list[str]) -> list[int]:
        return [len(e.ids) for e in tokenizer.encode_batch(texts, add_special_tokens=False)]

    return count, "tokenizers:b2:" + hashlib.blake2b(path.read_bytes(), digest_size=12).hexdigest()


def _tiktoken(encoding: str) -> tuple[Counter, str]:
    tiktoken = require("tiktoken", ConfigError(
        f"{_KEY}=tiktoken:{encoding} needs the `tiktoken` package, which is not installed",
        f"pip install tiktoken, or set {_KEY}=path/to/tokenizer.json"))
    try:
        enc = tiktoken.get_encoding(encoding)
    except Exception as exc:  # unknown name, or its file cannot be downloaded here
        raise ConfigError(f"{_KEY}=tiktoken:{encoding}: the encoding is not available locally ({exc})",
                          f"use a cached encoding, or set {_KEY}=path/to/tokenizer.json") from exc

    def count(texts: list[str]) -> list[int]:
        return [len(ids) for ids in enc.encode_ordinary_batch(texts)]

    return count, f"tiktoken:{encoding}"
