"""The NVIDIA driver the running kernel has loaded, as ``nvidia-smi`` reports it."""
from __future__ import annotations

import fnmatch

from ..facts.base import UntrustedOutput
from ..facts.nvidia_csv import _QUERY_FIELDS, parse_query_gpu_csv
from .base import Plan, Resource

__all__ = ["NvidiaDriverLoaded", "upstream_version"]


def upstream_version(package_version: str) -> str:
    """``550.144.03-0ubuntu0.24.04.1`` / ``3:550.54.15-1.el9`` → ``550.144.03`` / ``550.54.15``."""
    v = package_version.split(":", 1)[-1]
    return v.split("-", 1)[0]


class NvidiaDriverLoaded(Resource):
    """The loaded driver is on ``branch`` (and at ``version``), and sees the expected GPUs.

    Nothing to apply: a driver installed on disk takes effect at the next
    boot, so a mismatch plans a reboot (``Plan.reboot``), which the engine
    performs when allowed and reports otherwise.  After the reboot this is
    the verification: still not loaded is an error.  ``note`` opens the
    reboot's reason (``downgrade 580 -> 550 (...)``): why this branch.
    """

    kind = "nvidia-driver"
    read_alongside = True

    def __init__(self, branch: str, *, version: str | None = None, expected_gpus: int | None = None,
                 note: str | None = None):
        super().__init__(f"loaded {branch}" + (f" {version}" if version else ""))
        self.branch, self.version, self.expected_gpus, self.note = str(branch), version, expected_gpus, note

    def read(self) -> str:
        return ("if command -v nvidia-smi >/dev/null 2>&1; then\n"
                f"  nvidia-smi --query-gpu={_QUERY_FIELDS} --format=csv 2>&1; echo \"smi_rc=$?\"\n"
                "else echo smi=missing; fi")

    def plan(self, current: str) -> Plan:
        want = f"branch {self.branch}" + (f" ({upstream_version(self.version)})" if self.version else "")
        if "smi=missing" in current:
            return Plan(reason="nvidia-smi is not installed yet", reboot=f"driver {want} not loaded: no nvidia-smi yet")
        lines = current.splitlines(keepends=True)
        if lines and lines[-1].startswith("smi_rc="):  # the read's own trailer, not a row of the CSV
            lines.pop()
        try:
            gpus = parse_query_gpu_csv("".join(lines))
        except UntrustedOutput as e:
            return Plan.fail(f"{e}: which driver is loaded cannot be read; run `nvidia-smi` on the host")
        if not gpus:
            msg = next((l.strip() for l in current.splitlines() if l.strip() and not l.startswith("smi_rc=")),
                       "no output")
            return Plan(reason=f"nvidia-smi: {msg}", reboot=f"driver {want} not loaded (nvidia-smi: {msg})")
        loaded = str(gpus[0].get("driver_version") or "")
        names = ", ".join(sorted({str(g.get("name")) for g in gpus}))
        if not loaded.startswith(self.branch + ".") or (
                self.version and not fnmatch.fnmatchcase(loaded, upstream_version(self.version))):
            return Plan(reason=f"loaded driver {loaded or '?'}",
                        reboot=(f"{self.note}: " if self.note else "")
                        + f"driver {loaded or '?'} is loaded, {want} is wanted")
        if self.expected_gpus is not None and len(gpus) != self.expected_gpus:
            return Plan.fail(f"driver {loaded} is loaded but nvidia-smi sees {len(gpus)} GPU(s) ({names}), "
                             f"expected {self.expected_gpus}: check the GPUs' PCIe links and `nvidia-smi -q`")
        return Plan.noop((f"{self.note}: " if self.note else "")
                         + f"driver {loaded} loaded, nvidia-smi sees {len(gpus)} GPU(s): {names}")


