#!/bin/sh
# Machine setup for the integration tests on a fresh Debian 12, as root.
#
# Idempotent: installs only what is missing and starts dockerd only when no
# daemon answers, so it is safe at the top of every CI job.
#
#   sudo scripts/ci-setup.sh
set -eu

# prometheus: its promtool unit-tests the monitoring role's alert rules.
# gcc: builds the libcuda test double (harness/doubles/fake_libcuda.c) of the acceptance tests.
PACKAGES="chromium docker.io debootstrap debian-archive-keyring gcc openssh-client prometheus"
ROOT=$(cd "$(dirname "$0")/.." && pwd)

if [ "$(id -u)" -ne 0 ]; then
    echo "ci-setup: run as root (apt-get, dockerd)" >&2
    exit 1
fi

missing=""
for pkg in $PACKAGES; do
    # dpkg-query says "install ok installed" only for fully installed packages.
    if [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" != "install ok installed" ]; then
        missing="$missing $pkg"
    fi
done
if [ -n "$missing" ]; then
    echo "ci-setup: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    # No recommends: docker.io's pull in needrestart, git and more we do not use.
    apt-get install -y -q --no-install-recommends $missing
else
    echo "ci-setup: packages present:$(printf ' %s' $PACKAGES)"
fi

if docker info >/dev/null 2>&1; then
    echo "ci-setup: docker daemon answers"
    exit 0
fi

# Same logic as the test fixtures when the harness (harness/, next to bringup/) imports
# (it logs to .sandbox/dockerd.log and reports a daemon that dies).
if (cd "$ROOT" && python3 -c 'import harness') >/dev/null 2>&1; then
    cd "$ROOT"
    exec python3 -c 'from harness import ensure_docker; ensure_docker()'
fi

# No CI container init starts services: run the daemon in the background.
# A daemon still starting has written its pid file: wait for it instead of
# starting a second one.
log=/var/log/dockerd.log
if [ -s /var/run/docker.pid ] && kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
    echo "ci-setup: dockerd (pid $(cat /var/run/docker.pid)) is running; waiting for it"
else
    echo "ci-setup: starting dockerd (log $log)"
    nohup dockerd >>"$log" 2>&1 </dev/null &
fi
i=0
until docker info >/dev/null 2>&1; do
    i=$((i + 1))
    if [ "$i" -ge 120 ]; then
        echo "ci-setup: docker daemon did not answer within 60s; see $log" >&2
        tail -n 5 "$log" >&2 2>/dev/null || true
        exit 1
    fi
    sleep 0.5
done
echo "ci-setup: docker daemon answers"
