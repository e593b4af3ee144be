#!/usr/bin/env bash
# Install everything and run the whole test suite (unit + real sandbox hosts).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# exit 5 (no tests collected) is a failure too: set -e passes it on.
python3 -m pytest -q "$@"
