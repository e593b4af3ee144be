"""Benchmark: wall time and remote round trips of the sysctl role, apply and no-op.

    python3 bench/bench_sysctl.py [--runs 5]

Starts one sandbox host; for each run it resets the host through `docker exec`
(original live values back, persisted file removed), times an apply, then
times a no-op re-run.  Prints the median and spread of each.  A benchmark,
not a test: the machines are shared and noisy, so no threshold is asserted.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bringup.inventory.hosts import load_inventory  # noqa: E402
from bringup.project import content_root  # noqa: E402
from bringup.engine.roles import load_roles, select_roles  # noqa: E402
from bringup.engine.runner import Options, prepare, run_hosts  # noqa: E402
from bringup.engine.templates import Templates  # noqa: E402
from harness import build_image, ensure_docker, start_host, SANDBOX_VARS, write_inventory  # noqa: E402
from roles.sysctl import PERSIST_FILE, PROFILES  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    work = REPO / ".sandbox" / "bench"
    ensure_docker()
    build_image()
    host = start_host("bench-sysctl", workdir=work, restart="no")
    try:
        write_inventory(work / "hosts", [host], extra_vars=SANDBOX_VARS)
        inv = load_inventory(work / "hosts")
        hosts = inv.select(host=host.name)
        root = content_root(REPO)
        order, roles = load_roles(root)
        selected = select_roles(order, roles, "sysctl")
        role_vars = prepare(hosts, selected)
        templates = Templates(root / "templates")
        keys = [k for k in PROFILES["network-latency"] if k.startswith("net.")]
        reset = "; ".join(f"cat /proc/sys/{k.replace('.', '/')} 2>/dev/null | sed 's/^/{k}=/'" for k in keys)
        original = [l for l in host.exec(["sh", "-c", reset]).stdout.splitlines() if "=" in l]
        restore = "; ".join(f"echo '{l.split('=', 1)[1]}' > /proc/sys/{l.split('=', 1)[0].replace('.', '/')}"
                            for l in original) + f"; rm -f {PERSIST_FILE} {PERSIST_FILE}.*.bak"

        def timed() -> tuple[float, int, int, int]:
            t0 = time.perf_counter()
            r = run_hosts(hosts, selected, role_vars, Options(), templates)[0]
            assert r.status == "ok", r
            return time.perf_counter() - t0, r.round_trips, r.recap["changed"], len(r.resources)

        apply_, noop = [], []
        for _ in range(args.runs):
            host.exec(["sh", "-c", restore])
            apply_.append(timed())
            noop.append(timed())
        for name, rows in (("apply", apply_), ("no-op", noop)):
            secs = [r[0] for r in rows]
            print(f"{name:6} median {statistics.median(secs) * 1000:7.1f} ms  "
                  f"(min {min(secs) * 1000:.1f}, max {max(secs) * 1000:.1f}, n={len(secs)})  "
                  f"round trips {rows[0][1]}  changed {rows[0][2]}  resources {rows[0][3]}")
    finally:
        host.remove()


if __name__ == "__main__":
    main()
