#!/usr/bin/env bash
# Prepare a fresh Debian 12 machine (as root) for the sandbox tests: bubblewrap, a private dockerd
# (crun registered as a second OCI runtime, for sandbox.runtime=crun), and two tiny busybox test images.
# Idempotent: a second run reuses a dockerd that still answers (as it was started: crun or not).
#
#   .ci/setup-sandboxes.sh [ENVFILE]        install, start dockerd, build images, write `export` lines
#   .ci/setup-sandboxes.sh stop [ENVFILE]   stop the dockerd that ENVFILE's setup started (if it
#                                           found one already running, it is left running)
#
# ENVFILE defaults to $HX_DOCKER_DIR/env; `source` it to get DOCKER_HOST (and the test image names).
set -euo pipefail

# data root, exec root, socket, pid file and log; not under /tmp, where sandboxes glob for leftovers
D="${HX_DOCKER_DIR:-/var/tmp/hermes-exp-dockerd}"
IMAGE1="${HX_TEST_IMAGE:-hermes-exp-test/busybox:latest}"
IMAGE2="${HX_TEST_IMAGE2:-hermes-exp-test/busybox2:latest}"
SOCK="unix://$D/docker.sock"
WAIT_SECONDS="${HX_DOCKERD_WAIT:-60}"
STARTED=no

log() { echo "[setup-sandboxes] $*" >&2; }

engine_up() { DOCKER_HOST="$SOCK" timeout 10 docker info >/dev/null 2>&1; }

stop_engine() {
    if [[ -f "$D/dockerd.pid" ]]; then
        local pid; pid="$(cat "$D/dockerd.pid")"
        if kill -0 "$pid" 2>/dev/null; then
            log "stopping dockerd (pid $pid)"
            kill "$pid"
            for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
            kill -9 "$pid" 2>/dev/null || true
        fi
        rm -f "$D/dockerd.pid"
    else
        log "no dockerd pid file under $D: nothing to stop"
    fi
}

install_packages() {
    local missing=()
    command -v dockerd >/dev/null || missing+=(docker.io)
    command -v crun >/dev/null || missing+=(crun)
    command -v bwrap >/dev/null || missing+=(bubblewrap)
    [[ -x /bin/busybox ]] || missing+=(busybox-static)
    if ((${#missing[@]})); then
        log "installing ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -q
        apt-get install -y -q --no-install-recommends docker.io crun bubblewrap busybox-static
    fi
}

# crun refuses every container on a hybrid cgroup host (v1 controllers, plus a cgroup2 hierarchy at
# /sys/fs/cgroup/unified) while the cgroup2 side holds any controller ("cgroups in hybrid mode not
# supported, drop all controllers from cgroupv2"): seen with hugetlb, which no v1 hierarchy had taken.
# Binding such a controller to a v1 hierarchy of its own takes it off cgroup2 (runc works either way).
free_cgroup2_controllers() {
    local unified=/sys/fs/cgroup/unified
    [[ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" == tmpfs && -r "$unified/cgroup.controllers" ]] || return 0
    local c
    for c in $(cat "$unified/cgroup.controllers"); do
        log "binding the cgroup controller $c to a v1 hierarchy (crun refuses hybrid mode with it on cgroup2)"
        mkdir -p "/sys/fs/cgroup/$c"
        mount -t cgroup -o "$c" cgroup "/sys/fs/cgroup/$c" || log "could not: sandbox.runtime=crun will fail here"
    done
}

start_engine() {
    mkdir -p "$D"
    if engine_up; then log "dockerd already answers on $SOCK"; STARTED=no; return; fi
    stop_engine
    log "starting dockerd (log: $D/log)"
    # setsid + nohup: the engine must outlive this script and the CI step that ran it.
    setsid nohup dockerd --data-root "$D/data" --exec-root "$D/exec" -H "$SOCK" \
        --add-runtime "crun=$(command -v crun)" --pidfile "$D/dockerd.pid" >"$D/log" 2>&1 </dev/null &
    local deadline=$((SECONDS + WAIT_SECONDS))
    until engine_up; do
        if ((SECONDS >= deadline)); then
            log "dockerd did not answer within ${WAIT_SECONDS}s; last log lines:"
            tail -n 30 "$D/log" >&2
            exit 1
        fi
        sleep 0.5
    done
    STARTED=yes
    log "dockerd is up"
}

# A busybox rootfs: one static binary with its applets symlinked, plus the dirs tools expect.
build_image() {
    local name="$1" marker="$2"
    if DOCKER_HOST="$SOCK" docker image inspect "$name" >/dev/null 2>&1; then
        log "image $name already present"; return
    fi
    local root; root="$(mktemp -d)"
    mkdir -p "$root"/{bin,etc,tmp,task,root,proc,sys,dev}
    chmod 1777 "$root/tmp"
    cp /bin/busybox "$root/bin/busybox"
    for applet in $("$root/bin/busybox" --list); do
        [[ -e "$root/bin/$applet" ]] || ln -s busybox "$root/bin/$applet"
    done
    echo "root:x:0:0:root:/root:/bin/sh" >"$root/etc/passwd"
    echo "nobody:x:65534:65534:nobody:/:/bin/sh" >>"$root/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
    [[ -n "$marker" ]] && echo "$name" >"$root/$marker"
    tar -C "$root" -c . | DOCKER_HOST="$SOCK" docker import \
        -c 'CMD ["/bin/sh"]' -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        - "$name" >/dev/null
    rm -rf "$root"
    log "built image $name"
}

write_env() {
    local envfile="$1"
    mkdir -p "$(dirname "$envfile")"
    # `stop ENVFILE` stops the engine only if this setup started it (a shared one keeps running).
    cat >"$envfile" <<ENV
# started-by-this-setup: $STARTED
export DOCKER_HOST=$SOCK
export HX_DOCKER_DIR=$D
export HX_TEST_IMAGE=$IMAGE1
export HX_TEST_IMAGE2=$IMAGE2
ENV
    log "wrote $envfile"
    cat "$envfile"
}

main() {
    if [[ "${1:-}" == "stop" ]]; then
        if [[ -n "${2:-}" && -f "$2" ]]; then  # the engine that ENVFILE points at
            if grep -q '^# started-by-this-setup: no' "$2"; then
                log "dockerd was already running before the setup that wrote $2: leaving it running"
                return
            fi
            local host; host="$(sed -n 's/^export DOCKER_HOST=unix:\/\///p' "$2")"
            [[ -n "$host" ]] && D="$(dirname "$host")"
        fi
        stop_engine
        return
    fi
    [[ "$(id -u)" == 0 ]] || { log "run me as root"; exit 1; }
    local envfile="${1:-$D/env}"
    install_packages
    free_cgroup2_controllers
    start_engine
    build_image "$IMAGE1" ""
    build_image "$IMAGE2" "IMAGE2"
    write_env "$envfile"
}

main "$@"
