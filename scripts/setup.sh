#!/usr/bin/env bash
# Set up a fresh Debian 12 machine (as root) for bringup: Docker and
# debootstrap for the sandbox hosts, then bringup itself with its test extras.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ci-setup.sh
python3 -m pip install -q --disable-pip-version-check -e '.[test]'
# An editable install leaves the checkout's own code uncompiled (pip compiles what it copies, not a
# checkout), so every run compiled bringup and the roles again (~100 ms each): compile them once here.
# Then the roles' manifest (bringup/engine/roles.py), so a run with --roles imports only those from the first.
python3 -m compileall -q -j 0 bringup roles harness tasks.py
python3 -c 'from pathlib import Path; from bringup.engine.roles import load_roles; load_roles(Path("."))'
