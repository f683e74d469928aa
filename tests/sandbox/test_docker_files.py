"""The docker file tools through `docker exec` (docker_file_tools) keep what the archive API did: root's
files, mode 0644, a symlink replaced rather than written through, a read's symlink confined to the workdir,
binary and large content; and fall back to the archive API where the image lacks the scripts' tools."""

from __future__ import annotations

import pytest

from hermes_exp.errors import ToolError

pytestmark = pytest.mark.docker


@pytest.fixture
def sb(make_factory):
    sandbox = make_factory().open("v1:files", {})
    yield sandbox
    sandbox.close()


def shell(sb, command: str) -> str:
    result = sb.exec(command, timeout=20)
    assert result.exit_code == 0, result.output
    return result.output


def test_file_tools_make_no_archive_call(sb, monkeypatch) -> None:
    """One exec each instead of an archive call, which re-executes dockerd in the container's root."""
    def refuse(*args, **kwargs):
        raise AssertionError("an archive call")

    for name in ("get_archive", "put_archive", "head"):
        monkeypatch.setattr(sb._api, name, refuse)
    sb.write_file("a/b.txt", b"x")
    assert sb.read_file("a/b.txt") == b"x"


def test_written_files_are_roots_0644_and_replace_a_symlink(sb) -> None:
    shell(sb, "echo keep > /tmp/target && ln -s /tmp/target link && touch mine && chmod 755 mine "
              "&& chown 65534:65534 mine")
    sb.write_file("link", b"new")
    sb.write_file("mine", b"over")
    sb.write_file("deep/er/f.bin", bytes(range(256)) * 4096)  # 1 MB of every byte value
    listing = shell(sb, "stat -c '%U %a %F %s' link mine deep/er/f.bin; stat -c '%U %a %F' deep/er; cat /tmp/target")
    assert listing.splitlines() == ["root 644 regular file 3", "root 644 regular file 4",
                                    "root 644 regular file 1048576", "root 755 directory", "keep"], listing
    assert sb.read_file("deep/er/f.bin") == bytes(range(256)) * 4096
    assert sb.read_file("deep/er/f.bin", limit=10) == bytes(range(10))


def test_reads_follow_a_symlink_to_inside_the_workdir_only(sb) -> None:
    shell(sb, "echo inside > real.txt && ln -s real.txt rel && ln -s /etc/passwd out && ln -s rel twice "
              "&& ln -s missing dangling")
    assert sb.read_file("rel") == b"inside\n" and sb.read_file("twice") == b"inside\n"
    for path, says in (("out", "outside the working directory"), ("dangling", "no such file: dangling")):
        with pytest.raises(ToolError) as err:
            sb.read_file(path)
        assert says in str(err.value)


def test_an_image_without_head_falls_back_to_the_archive_api(sb) -> None:
    shell(sb, "rm /bin/head")
    sb.write_file("f.txt", b"via the archive")
    assert sb.read_file("f.txt") == b"via the archive"
