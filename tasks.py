"""Invoke entry point: `invoke provision --host trt-l40s-01`, `invoke --list`."""
from bringup.cli import ns  # noqa: F401  (Invoke finds the `ns` collection)
