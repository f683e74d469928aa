"""A command's output spool (sandbox/process.py): an unlinked private file opened as a bare descriptor,
also where the file system has no O_TMPFILE, and read back in head and tail as the file object was."""

from __future__ import annotations

import errno
import fcntl
import io
import os
import stat
import tempfile

import pytest

from hermes_exp.sandbox.process import FIRST_READ, clean_env, read_bounded, read_spool, run_group, spool


def _check_private_and_unlinked(fd: int) -> None:
    info = os.fstat(fd)
    assert stat.S_ISREG(info.st_mode) and info.st_nlink == 0  # no name anywhere: gone with the last close
    assert stat.S_IMODE(info.st_mode) == 0o600
    assert fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC  # never inherited by another command


@pytest.fixture
def no_tmpfile(monkeypatch):
    real_open = os.open

    def refusing(path, flags, *args, **kwargs):
        if flags & getattr(os, "O_TMPFILE", 0) == getattr(os, "O_TMPFILE", -1):
            raise OSError(errno.EOPNOTSUPP, "O_TMPFILE not supported here")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing)
    # tempfile too finds O_TMPFILE refused, and stops trying it for the rest of the process: restored after
    monkeypatch.setattr(tempfile, "_O_TMPFILE_WORKS", tempfile._O_TMPFILE_WORKS)
    opened = []
    real_dup = os.dup
    monkeypatch.setattr(os, "dup", lambda fd: opened.append(fd) or real_dup(fd))
    return opened


@pytest.mark.parametrize("tmpfile", [True, False], ids=["o_tmpfile", "fallback"])
def test_spool_is_a_private_unlinked_file_and_commands_write_to_it(tmpfile: bool, request, tmp_path) -> None:
    fallback = None if tmpfile else request.getfixturevalue("no_tmpfile")
    fd = spool()
    assert fallback is None or fallback  # the fallback path was taken
    try:
        _check_private_and_unlinked(fd)
    finally:
        os.close(fd)
    result = run_group(["/bin/sh", "-c", "echo one two three | wc -w; echo err >&2"], cwd=str(tmp_path),
                       env=clean_env(str(tmp_path)), timeout=10, output_limit=1000)
    assert result.exit_code == 0 and result.output.split() == ["3", "err"]


@pytest.mark.parametrize("size, limit", [(0, 1000), (10, 1000), (4000, 1000), (4001, 1000), (100_000, 1000),
                                         *((n, 20_000) for n in (0, FIRST_READ - 1, FIRST_READ, FIRST_READ + 1,
                                                                 80_000, 80_001, 300_000))])
def test_read_spool_keeps_head_and_tail_as_read_bounded(size: int, limit: int) -> None:
    """Also past read_spool's first read (FIRST_READ), where it asks the file's size."""
    data = bytes((i * 7) % 26 + 97 for i in range(size)) + "é".encode()
    fd = spool()
    try:
        os.write(fd, data)
        assert read_spool(fd, limit) == read_bounded(io.BytesIO(data), limit)
    finally:
        os.close(fd)
