#!/usr/bin/env bash
# Install everything and run the whole test suite (unit + real sandbox hosts).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# exit 5 (no tests collected) is a failure too: set -e passes it on.  The test folders are named (the ones
# pyproject's testpaths names) so that tests/conftest.py's options, such as --reliability-out, are known when
# pytest reads the command line.
python3 -m pytest -q tests/unit tests/integration "$@"
