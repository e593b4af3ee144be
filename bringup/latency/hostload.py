"""What else ran on the measuring machine during a measurement, where this machine can see it.

A shared machine explains most spreads (issue 35): so each point records the client machine's load while its
windows ran, the CPUs' busy share from ``/proc/stat`` (and how much of it the client processes took), the
1-minute load average, and, where ``nvidia-smi`` answers here (Triton on this machine, as on the H200 proof),
the GPUs' utilization and the compute processes on them other than Triton's.  Nothing is read on a remote
host: a Triton elsewhere is seen only through the client's side.

:func:`cpu_busy` and :func:`gpu_util` are pure parsers; :class:`Watch` reads them before and after.
"""
from __future__ import annotations

import os
import shutil

from ..child import capture

__all__ = ["cpu_busy", "gpu_util", "gpu_processes", "local_name", "Watch", "describe", "busy_share", "load_text"]

#: Triton's own processes on a GPU (its server, its Python backend's stubs): not "another process".
TRITON = ("tritonserver", "triton_python_backend_stub")

NVIDIA_SMI_TIMEOUT_S = 5.0
#: Bytes of its answer read at most (more: unreadable, as a failed run).
NVIDIA_SMI_CAP = 4 << 20


def cpu_busy(stat_text: str) -> tuple[int, int] | None:
    """``(busy, total)`` jiffies of all CPUs from ``/proc/stat``'s ``cpu`` line; None when it is not there or
    not numbers (the share is then left out, never guessed)."""
    for ln in stat_text.splitlines():
        f = ln.split()
        if f and f[0] == "cpu":
            try:
                v = [int(x) for x in f[1:]]
            except ValueError:
                return None
            if len(v) < 4:
                return None
            idle = v[3] + (v[4] if len(v) > 4 else 0)          # idle + iowait
            total = sum(v[:8])                                  # guest time is already in user
            return total - idle, total
    return None


def busy_share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """The CPUs' busy share between two :func:`cpu_busy` reads (0..1), None when either is missing."""
    if not before or not after or after[1] <= before[1]:
        return None
    return max(0.0, min(1.0, (after[0] - before[0]) / (after[1] - before[1])))


def gpu_util(text: str) -> list[int | None]:
    """``nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits`` → one % per GPU, in its place: None
    for ``[N/A]`` or anything but a whole number 0..100 (``²``, 5,000 digits, 250), so that no GPU's reading moves
    into another's column and no value raises.  Before, a non-number was left out (the next GPU's figure took its
    place) and a Unicode digit or 5,000 digits raised ValueError in the polling thread (a traceback mid-bench)."""
    out: list[int | None] = []
    for ln in text.splitlines():
        if not ln.strip():
            continue
        t = ln.strip().rstrip("%").strip()
        out.append(int(t) if t.isascii() and t.isdigit() and len(t) <= 3 and int(t) <= 100 else None)
    return out


def gpu_processes(text: str, name_of=None) -> list[str]:
    """``nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader`` → ``"name (pid N)"`` of each
    compute process that is not Triton's ("No running processes found" and other lines without a pid: none).
    A process nvidia-smi cannot name (``[No data]``, ``[Not Found]``: a VM, a pid namespace) is named by
    ``name_of(pid)`` (:func:`local_name`: this machine's /proc, where nvidia-smi ran) before it is judged."""
    import csv

    out = []
    for row in csv.reader(text.splitlines(), skipinitialspace=True):
        if len(row) < 2 or not row[0].strip().isdigit():
            continue
        pid, name = row[0].strip(), row[1].strip()
        if (not name or name.startswith("[")) and name_of is not None:
            name = name_of(pid) or name
        if not any(t in name for t in TRITON):
            out.append(f"{name} (pid {pid})")
    return out


def local_name(pid: str) -> str:
    """The command of process ``pid`` on this machine (its argv[0]'s base name, else its comm), "" when gone."""
    args = _read(f"/proc/{pid}/cmdline").split("\0")
    first = args[0].rsplit("/", 1)[-1] if args and args[0] else ""
    if first.startswith("python") and len(args) > 1 and args[1]:
        first = f"{first} {args[1].rsplit('/', 1)[-1]}"
    return first or _read(f"/proc/{pid}/comm").strip()


def _nvidia_smi(*args: str) -> str | None:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        cp = capture([exe, *args], timeout=NVIDIA_SMI_TIMEOUT_S, cap=NVIDIA_SMI_CAP)
    except OSError:
        return None
    return cp.out.decode("utf-8", "replace") if cp.rc == 0 else None


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


#: Seconds between two reads of nvidia-smi while a point runs (each read is a short process on the client).
GPU_POLL_S = 2.0


class Watch:
    """Reads before (:meth:`start`) and after (:meth:`stop`) a point's windows; while they run, nvidia-smi every
    :data:`GPU_POLL_S` where it answers (a utilization read after the load would see the GPU idle)."""

    def __init__(self, *, gpu: bool = True, poll_s: float = GPU_POLL_S):
        import threading

        self.gpu = gpu and shutil.which("nvidia-smi") is not None
        self.poll_s = poll_s
        self._cpu = None
        self._util: list[list[int]] = []
        self._others: dict[str, None] = {}
        self._apps_read = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True) if self.gpu else None

    def _poll(self) -> None:
        while True:
            util = _nvidia_smi("--query-gpu=utilization.gpu", "--format=csv,noheader,nounits")
            apps = _nvidia_smi("--query-compute-apps=pid,process_name", "--format=csv,noheader")
            if util is not None:
                self._util.append(gpu_util(util))
            if apps is not None:
                self._apps_read = True
                self._others.update(dict.fromkeys(gpu_processes(apps, local_name)))
            if self._stop.wait(self.poll_s):
                return

    def start(self) -> None:
        self._cpu = cpu_busy(_read("/proc/stat"))
        if self._thread is not None:
            self._thread.start()

    def stop(self, client_cpu: float | None = None) -> dict:
        """The load seen: ``client_cpu`` is the CPUs the client processes used (a sum of shares of one CPU)."""
        share = busy_share(self._cpu, cpu_busy(_read("/proc/stat")))
        n = os.cpu_count() or 1
        out: dict = {"cpus": n, "cpu_busy_pct": None if share is None else round(share * 100, 1)}
        if share is not None and client_cpu is not None:
            out["client_cpu_pct"] = round(min(share, client_cpu / n) * 100, 1)
            out["other_cpu_pct"] = round(max(0.0, share - client_cpu / n) * 100, 1)
        try:
            out["loadavg_1m"] = round(os.getloadavg()[0], 2)
        except OSError:
            pass
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=NVIDIA_SMI_TIMEOUT_S * 2 + 1)
            # Per GPU, the mean of the reads taken while the point ran; reads that list another number of GPUs than
            # the most do are left out (a GPU gone from one read must not shift the others' columns); a GPU without
            # one readable figure is None.
            n = max((len(u) for u in self._util), default=0)
            reads = [u for u in self._util if len(u) == n and any(x is not None for x in u)]
            if reads:
                cols = [[x for x in col if x is not None] for col in zip(*reads)]
                out["gpu_util_pct"] = [round(sum(c) / len(c)) if c else None for c in cols]
            if self._apps_read:
                out["gpu_other_processes"] = list(self._others)
        return out


def describe(load: dict | None) -> str:
    """One clause for the note on a result: what ran beside the measurement (empty when nothing was read)."""
    if not load:
        return ""
    parts = []
    if load.get("cpu_busy_pct") is not None:
        cpu = f"client machine's CPUs {load['cpu_busy_pct']:.0f} % busy"
        if load.get("other_cpu_pct") is not None:
            cpu += f" ({load['other_cpu_pct']:.0f} % by other processes than the load generator's)"
        parts.append(cpu)
    if load.get("loadavg_1m") is not None:
        parts.append(f"load average {load['loadavg_1m']:g} on {load.get('cpus', '?')} CPU(s)")
    if load.get("gpu_util_pct"):
        parts.append("GPU utilization " + "/".join("- %" if u is None else f"{u} %" for u in load["gpu_util_pct"])
                     + " (mean while measured)")
    others = load.get("gpu_other_processes")
    if others:
        parts.append(f"{len(others)} other process(es) on the GPUs: {', '.join(others[:3])}"
                     + (" ..." if len(others) > 3 else ""))
    elif others == []:
        parts.append("no other process on the GPUs")
    return "; ".join(parts)


def load_text(doc: dict, rows: list[dict] | None = None) -> str:
    """What else ran during the measurement: the busiest point's reading of a result's points (``rows``, else
    all of ``doc``'s), said once by :func:`describe`."""
    loads = [r.get("host_load") for r in (rows if rows is not None else doc.get("points", [])) if r.get("host_load")]
    if not loads:
        return ""
    worst = max(loads, key=lambda h: (h.get("other_cpu_pct") or 0, h.get("loadavg_1m") or 0,
                                      len(h.get("gpu_other_processes") or [])))
    others = sorted({p for h in loads for p in (h.get("gpu_other_processes") or [])})
    if others:
        worst = {**worst, "gpu_other_processes": others}
    return describe(worst)
