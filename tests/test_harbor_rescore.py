"""Harbor tasks scored as their authors wrote them, through the real CLI and a real Docker engine:
a task whose solution changes files outside the working directory re-scores in a fresh container to
the same reward (`action=score`); [agent].user and [verifier].user run the solution and test.sh; a
task image is built again when the image behind its FROM changed, or with sandbox.rebuild=true; the
stored verifier output keeps pytest's failure section and the end, the whole output beside it."""

from __future__ import annotations

import io
import json
import sqlite3
import tarfile
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli

from tests.sandbox.conftest import IMAGE, IMAGE2
from tests.test_harbor import built_by, engine, ledger, nonce  # noqa: F401 (fixtures)

USERS = ("RUN echo 'agent:x:1000:1000::/home/agent:/bin/sh' >> /etc/passwd && echo 'agent:x:1000:' >> /etc/group "
         "&& echo 'tester:x:1001:1001::/tmp:/bin/sh' >> /etc/passwd && echo 'tester:x:1001:' >> /etc/group "
         "&& mkdir -p /home/agent /app && chown agent /home/agent /app && echo old > /etc/motd-gone\n")
TOML = '[verifier]\ntimeout_sec = 60.0\n{verifier}\n[agent]\ntimeout_sec = 120.0\n{agent}\n[environment]\ncpus = 1\n'
# Root's solution: a file in /etc, a tool in /usr/local/bin, a file of the image deleted.
OUTSIDE_SOLVE = ("#!/bin/sh\necho 42 > /etc/answer\nmkdir -p /usr/local/bin\nprintf '#!/bin/sh\\necho tool-ok\\n' > /usr/local/bin/tool\n"
                 "chmod +x /usr/local/bin/tool\nrm /etc/motd-gone\necho done > /app/out.txt\n")
OUTSIDE_TEST = ('#!/bin/sh\nok=1\n[ "$(cat /etc/answer)" = 42 ] || ok=0\n[ "$(tool)" = tool-ok ] || ok=0\n'
                '[ -e /etc/motd-gone ] && ok=0\n[ "$(cat /app/out.txt)" = done ] || ok=0\n'
                'echo $ok > /logs/verifier/reward.txt\n')
USERS_SOLVE = "#!/bin/sh\nid -un > /app/agent_was\necho mine > /home/agent/note\n"
USERS_TEST = ('#!/bin/sh\nok=1\n[ "$(id -un)" = tester ] || ok=0\n[ "$(cat /app/agent_was)" = agent ] || ok=0\n'
              '[ "$(stat -c %U /home/agent/note)" = agent ] || ok=0\necho "verifier=$(id -un) ok=$ok"\n'
              'echo $ok > /logs/verifier/reward.txt\n')
NOISY_TEST = ('#!/bin/sh\ni=0\nwhile [ $i -lt 400 ]; do echo "installing build-noise-$i"; i=$((i+1)); done\n'
              'echo "=================== FAILURES ==================="\necho "E   assert 41 == 42 (the-real-reason)"\n'
              'i=0\nwhile [ $i -lt 60 ]; do echo "traceback line $i"; i=$((i+1)); done\n'
              'echo "=========== 1 failed in 0.12s ==========="\necho 0 > /logs/verifier/reward.txt\n')


def _task(root: Path, name: str, dockerfile: str, test: str, solve: str | None, toml: str) -> None:
    task = root / name
    for sub in ("environment", "tests") + (("solution",) if solve else ()):
        (task / sub).mkdir(parents=True, exist_ok=True)
    (task / "instruction.md").write_text("Do the task.\n")
    (task / "task.toml").write_text(toml)
    (task / "environment" / "Dockerfile").write_text(dockerfile)
    (task / "tests" / "test.sh").write_text(test)
    if solve:
        (task / "solution" / "solve.sh").write_text(solve)


def _args(data: Path, run_name: str, base_url: str, *extra: str) -> list[str]:
    return [f"dataset.path={data}", f"run_name={run_name}", "sandbox=docker", f"sandbox.image={IMAGE}",
            "filters=none", "num_workers=3", f"model.base_url={base_url}", "agent=oracle", *extra]


@pytest.mark.docker
@pytest.mark.slow
def test_rescore_restores_changes_outside_the_workdir_and_users(tmp_path: Path, mock_server, engine: Any,
                                                                 nonce: str) -> None:
    data = tmp_path / "tasks"
    dockerfile = f"FROM {IMAGE}\nLABEL hx.test.nonce={nonce}\n{USERS}WORKDIR /app\n"
    plain = TOML.format(verifier="", agent="")
    _task(data, "outside", dockerfile, OUTSIDE_TEST, OUTSIDE_SOLVE, plain)
    _task(data, "users", dockerfile, USERS_TEST, USERS_SOLVE,
          TOML.format(verifier='user = "tester"', agent='user = "agent"'))
    _task(data, "noisy", dockerfile, NOISY_TEST, None, plain)
    keep = ("verifier=command", "verifier.keep_workdir=true")
    first = run_cli(tmp_path, *_args(data, "o", mock_server.base_url, *keep), timeout=300)
    assert first.returncode == 0, first.stderr
    assert "not applied" not in first.stderr, first.stderr  # [agent].user and [verifier].user are
    run_dir = tmp_path / "outputs" / "o"
    tasks = ledger(run_dir)
    assert tasks["outside"]["reward"] == 1.0 and tasks["users"]["reward"] == 1.0, tasks
    assert tasks["noisy"]["reward"] == 0.0, tasks
    _check_noisy_details(run_dir, tasks["noisy"]["key"])

    again = run_cli(tmp_path, *_args(data, "o", mock_server.base_url, *keep, "action=score", "resume.redo_all=true"),
                    timeout=300)
    assert again.returncode == 0, again.stderr
    assert "3 sample(s) verified without the agent (done 3)" in again.stderr, again.stderr
    rescored = ledger(run_dir)
    assert {k: t["reward"] for k, t in rescored.items()} == {"outside": 1.0, "users": 1.0, "noisy": 0.0}, rescored
    with sqlite3.connect(run_dir / "ledger.db") as db:
        details = dict(db.execute("SELECT key, details FROM scores"))
    assert "verifier=tester ok=1" in details[tasks["users"]["key"]]


def _check_noisy_details(run_dir: Path, key: str) -> None:
    """The ledger keeps the failure section and the end; the archives/ file keeps it all."""
    with sqlite3.connect(run_dir / "ledger.db") as db:
        details = db.execute("SELECT details FROM scores WHERE key = ?", [key]).fetchone()[0]
    assert "(the-real-reason)" in details and "1 failed in 0.12s" in details, details
    assert "build-noise-0\n" not in details and "characters dropped" in details, details
    whole = (run_dir / "archives" / f"{key.split(':')[-1]}.verifier.txt").read_text()
    assert "installing build-noise-0\n" in whole and "(the-real-reason)" in whole


@pytest.mark.docker
@pytest.mark.slow
def test_image_rebuilt_when_its_base_changes_or_on_request(tmp_path: Path, mock_server, engine: Any,
                                                           nonce: str) -> None:
    base = f"hermes-exp-test/harbor-base-{nonce[:12]}:1"
    engine.images.get(IMAGE).tag(base)
    try:
        data = tmp_path / "tasks"
        test = "#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n"
        _task(data, "t", f"FROM {base}\nLABEL hx.test.nonce={nonce}\n", test, "#!/bin/sh\ntrue\n",
              TOML.format(verifier="", agent=""))
        assert run_cli(tmp_path, *_args(data, "a", mock_server.base_url), timeout=300).returncode == 0
        first = {i.id for i in built_by(engine, nonce)}
        assert run_cli(tmp_path, *_args(data, "b", mock_server.base_url), timeout=300).returncode == 0
        assert {i.id for i in built_by(engine, nonce)} == first  # nothing changed: reused
        engine.images.get(IMAGE2).tag(base)  # the base behind FROM is now another image
        assert run_cli(tmp_path, *_args(data, "c", mock_server.base_url), timeout=300).returncode == 0
        second = {i.id for i in built_by(engine, nonce)}
        assert len(second) == 2 and first < second, second  # built again on the new base
        rebuilt = run_cli(tmp_path, *_args(data, "d", mock_server.base_url, "sandbox.rebuild=true"), timeout=300)
        assert rebuilt.returncode == 0, rebuilt.stderr
        newest = {i.id for i in built_by(engine, nonce)}
        assert len(newest - second) == 1, newest  # sandbox.rebuild=true: built once more, without the cache
    finally:
        engine.images.remove(base, force=True)


def test_changed_paths_of_a_container() -> None:
    from hermes_exp.sandbox.docker_changes import ADDED, DELETED, MODIFIED, changed_paths

    entries = [("/etc", MODIFIED), ("/etc/answer", ADDED), ("/etc/hosts", MODIFIED), ("/etc/passwd", MODIFIED),
               ("/usr", MODIFIED), ("/usr/local", MODIFIED), ("/usr/local/bin", MODIFIED),
               ("/usr/local/bin/tool", ADDED), ("/opt", MODIFIED), ("/opt/new", ADDED), ("/opt/new/f", ADDED),
               ("/etc/motd", DELETED), ("/srv", DELETED), ("/srv/x", DELETED), ("/app", MODIFIED),
               ("/app/out", ADDED), ("/app/gone", DELETED)]
    copy, deleted = changed_paths([{"Path": p, "Kind": k} for p, k in entries], "/app")
    assert copy == ["/etc/answer", "/etc/passwd", "/opt/new", "/usr/local/bin/tool"]
    assert deleted == ["/app/gone", "/etc/motd", "/srv"]  # the workdir's deletions too: its archive only adds
    everything, _ = changed_paths([{"Path": p, "Kind": k} for p, k in entries], None)
    assert "/app/out" in everything


def test_archive_with_changes_splits_back() -> None:
    from hermes_exp.sandbox.files import _split, _with_changes

    def tar(files: dict[str, bytes]) -> bytes:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as out:
            for name, data in files.items():
                info = tarfile.TarInfo(name)
                info.size, info.uid = len(data), 1000
                out.addfile(info, io.BytesIO(data))
        return buf.getvalue()

    workdir, outside = tar({"out.txt": b"done"}), tar({"etc/answer": b"42"})
    assert _with_changes(workdir, tar({}), []) == workdir  # nothing changed outside: the archive as before
    raw, root, deleted = _split(_with_changes(workdir, outside, ["/etc/motd"]))
    assert deleted == ["/etc/motd"]
    with tarfile.open(fileobj=io.BytesIO(raw)) as w, tarfile.open(fileobj=io.BytesIO(root)) as r:
        assert w.getnames() == ["out.txt"] and r.getnames() == ["etc/answer"]
        assert r.getmember("etc/answer").uid == 1000 and r.extractfile("etc/answer").read() == b"42"
    assert _split(workdir)[1:] == (None, [])  # an archive made before: the workdir alone


def test_verifier_output_keeps_what_explains_the_score() -> None:
    from hermes_exp.verify.explain import explaining

    noise = "".join(f"installing build-noise-{i}\n" for i in range(300))
    text = noise + "==== FAILURES ====\nE   assert 41 == 42\n" + "frame\n" * 200 + "==== 1 failed ====\n"
    kept = explaining(text, 600)
    assert len(kept) < 700 and "assert 41 == 42" in kept and kept.endswith("==== 1 failed ====\n")
    assert "build-noise-0\n" not in kept
    plain = explaining(noise, 300)
    assert plain.endswith("build-noise-299\n") and "build-noise-0\n" not in plain
    assert explaining("short", 300) == "short"


def test_base_images_of_a_dockerfile(tmp_path: Path) -> None:
    from hermes_exp.sandbox.dockerfile import base_images

    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("ARG BASE=python:3.11-slim\n# comment\nFROM --platform=linux/amd64 ${BASE} AS build\n"
                          "RUN make \\\n  && make install\nFROM build\nFROM scratch\nFROM ubuntu:24.04 as two\n"
                          "from $BASE\n")
    assert base_images(dockerfile) == ["python:3.11-slim", "ubuntu:24.04"]
    assert base_images(tmp_path / "missing") == []


def test_users_are_applied_and_rebuild_is_not_identity(tmp_path: Path) -> None:
    from hermes_exp.dataset.readers.harbor import HarborSource
    from hermes_exp.dataset.readers.harbor_toml import read_task_toml
    from hermes_exp.settings.resolved import identity_hash

    _task(tmp_path, "u", "FROM x\n", "#!/bin/sh\n", None, TOML.format(verifier='user = "tester"', agent="user = 1000"))
    parsed = read_task_toml(tmp_path / "u" / "task.toml")
    assert (parsed.agent_user, parsed.verifier_user, parsed.ignored) == ("1000", "tester", [])
    row = next(iter(HarborSource(tmp_path).rows())).row
    assert row["container"]["user"] == "1000" and row["verifier"]["user"] == "tester"
    base = {"sandbox": {"kind": "docker", "image": "x"}, "model": {"name": "m"}, "seed": 0}
    assert identity_hash(base) == identity_hash({**base, "sandbox": {**base["sandbox"], "rebuild": True}})
    assert json.loads(json.dumps(row))  # plain data
