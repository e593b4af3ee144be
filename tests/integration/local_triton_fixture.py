"""The local Triton of the latency tests as a context: skipped (with why) where it cannot run here."""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

CPUS = sorted(os.sched_getaffinity(0))


def require_local_triton():
    """:mod:`.local_triton`, once its server can run here; else the test is skipped, saying why."""
    from harness.doubles import local_triton as lt

    try:
        why = lt.usable()
    except Exception as e:  # noqa: BLE001 - no wheel (pip offline): nothing to run against
        pytest.skip(f"local Triton unavailable: {e}")
    if why:
        pytest.skip(why)
    return lt


@contextlib.contextmanager
def local_server(d: Path, models: dict[str, dict], args: tuple[str, ...] = ()):
    """``tritonserver`` serving ``models`` (``{name: write_model kwargs}``) from ``d/repo``, pinned to the
    last CPU so that clients can run on the others."""
    lt = require_local_triton()
    for name, kw in models.items():
        lt.write_model(d / "repo", name, **kw)
    server_cpus = CPUS[-1:] if len(CPUS) > 1 else None
    with lt.LocalTriton(d / "repo", d / "triton.log", cpus=server_cpus, args=args) as t:
        yield t
