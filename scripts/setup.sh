#!/usr/bin/env bash
# Set up a fresh Debian 12 machine (as root) for bringup: Docker and
# debootstrap for the sandbox hosts, then bringup itself with its test extras.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ci-setup.sh
python3 -m pip install -q --disable-pip-version-check -e '.[test]'
