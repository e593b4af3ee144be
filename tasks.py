"""Invoke entry point: `invoke provision --host trt-l40s-01`, `invoke --list`."""
from bringup.process import freeze_at_exit, keep_bytecode

# The program's start.  Invoke turned bytecode writing off before it imported this file: what the tasks import
# keeps its bytecode cache (bringup.process.keep_bytecode), and the run's objects are frozen at exit.
keep_bytecode()
freeze_at_exit()

from bringup.cli import ns  # noqa: E402,F401 - imported under the setting above (Invoke finds the `ns` collection)
