"""pyinfra deploy: the sysctl role's file and keys (read from $BENCH_SYSCTL_JSON, written by bench/compare.py)."""
import io
import json
import os

from pyinfra.operations import files, server

spec = json.load(open(os.environ["BENCH_SYSCTL_JSON"]))
for key, value in spec["keys"].items():
    words = value.split()
    server.sysctl(name=key, key=key, value=[int(w) for w in words] if len(words) > 1 else int(value), persist=False)
files.put(name="sysctl file", src=io.StringIO(spec["content"]), dest=spec["path"], mode="644")
