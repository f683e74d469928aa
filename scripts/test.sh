#!/usr/bin/env bash
# Install everything the test suite needs on a fresh Debian 12 machine (run as root), then run it.
#   bash scripts/test.sh [pytest args]
# System packages: docker.io, bubblewrap, busybox-static (the sandbox tests), chromium (the report test).
# A private dockerd is started for the run and stopped afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${HX_VENV:-.venv}"
ENVFILE="$(mktemp)"

python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip >/dev/null
"$VENV/bin/pip" install -q -e '.[dev]'

bash .ci/setup-system.sh
bash .ci/setup-sandboxes.sh "$ENVFILE"
# shellcheck disable=SC1090
source "$ENVFILE"
trap 'bash .ci/setup-sandboxes.sh stop "$ENVFILE" || true; rm -f "$ENVFILE"' EXIT

set +e
# two test processes (pytest-xdist; HX_TEST_WORKERS=0 runs them in this one): most tests wait on
# subprocesses, containers and the mock's latency, so two share 2 cores well (25.7 -> 16.3 min here);
# --durations: the slowest tests, to keep CI within its time
"$VENV/bin/python" -m pytest -n "${HX_TEST_WORKERS:-2}" --durations=25 "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "pytest collected no tests: that is a failure" >&2
    rc=1
fi
exit "$rc"
