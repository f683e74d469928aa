#!/usr/bin/env bash
# Debian packages the tests need besides the sandbox ones (.ci/setup-sandboxes.sh installs those).
set -euo pipefail
need=()
command -v chromium >/dev/null || need+=(chromium)
dpkg -s fonts-dejavu-core >/dev/null 2>&1 || need+=(fonts-dejavu-core)
# the docker sandbox on Podman (rootful, and rootless: uidmap) and under gVisor (tests/sandbox/engines.py)
command -v podman >/dev/null || need+=(podman)
command -v newuidmap >/dev/null || need+=(uidmap)
command -v runsc >/dev/null || need+=(runsc)
if ((${#need[@]})); then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${need[@]}"
fi
