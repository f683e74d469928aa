#!/usr/bin/env bash
# Debian packages the tests need besides the sandbox ones (.ci/setup-sandboxes.sh installs those).
set -euo pipefail
need=()
command -v chromium >/dev/null || need+=(chromium)
dpkg -s fonts-dejavu-core >/dev/null 2>&1 || need+=(fonts-dejavu-core)
if ((${#need[@]})); then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${need[@]}"
fi
