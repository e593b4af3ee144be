"""Rolling runs over a live rack: batches (``--serial``), a failure threshold, drain/undrain hooks, retry files.

    rollout(hosts, roles, role_vars, opts, templates, serial="1,25%", max_fail_percentage=0)

``--serial`` is Ansible's: a list of batch sizes, counts or percentages of the
selected hosts (rounded down, at least 1), the last one repeating.  Each batch
converges before the next starts.  After a batch, the rollout stops when its
failed and unreachable hosts are more than ``--max-fail-percentage`` of it
(Ansible's test: ``failed / batch > N / 100``); without a threshold it stops
only when every host of a batch failed, as Ansible does.  Hosts of the later
batches are then ``not started``, never connected to.

Around each host's run, the inventory may name two commands run on the
control machine (argv lists, never a shell string), with the host's name and
address appended: ``drain_command`` before anything touches the host (it
failing fails the host, untouched), ``undrain_command`` after its run and
health gate succeeded.  A host that failed stays drained.
"""
from __future__ import annotations

import re
import subprocess
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from .. import child
from ..errors import InputError, said
from ..inventory.hosts import Host
from ..outfile import write_atomic
from .roles import Role
from .rollout_input import HOOK_TIMEOUT, HOOKS, batch_sizes, drains_first, exceeds, hook_timeout
from .results import HostResult, ResourceResult
from .runner import Options, Progress, run_host, run_hosts
from ..ssh.stop import Stop
from .templates import Templates

__all__ = ["run_hook", "rollout", "Rollout", "write_retry", "RETRY_FILE"]

#: The retry file a later ``--limit @reports/last.retry`` reads.
RETRY_FILE = "last.retry"


#: What is kept of a hook's stdout and of its stderr: the first and the last this many bytes of each (a hook
#: printing without end until its timeout does not fill the control machine's memory; said() needs far less).
HOOK_OUTPUT_KEEP = 64 * 1024


def _keep_ends(pipe: Any, into: list[bytes]) -> None:
    """Read ``pipe`` to its end, keeping its first and last :data:`HOOK_OUTPUT_KEEP` bytes (joined)."""
    head, tail = bytearray(), bytearray()
    for chunk in iter(lambda: pipe.read1(65536), b""):
        room = HOOK_OUTPUT_KEEP - len(head)
        head += chunk[:room]
        tail += chunk[room:] if room > 0 else chunk
        if len(tail) > 2 * HOOK_OUTPUT_KEEP:
            del tail[:-HOOK_OUTPUT_KEEP]
    into.append(bytes(head) + (b"\n" if len(tail) > HOOK_OUTPUT_KEEP else b"") + bytes(tail[-HOOK_OUTPUT_KEEP:]))


#: The environment variable each hook run carries (a token of its own), and everything it starts inherits: past the
#: timeout, a process that left the hook's process group (``setsid``, a daemonizing tool) is found by it.
HOOK_RUN_ENV = "BRINGUP_HOOK_RUN"


def run_hook(var: str, host: Host) -> str | None:
    """Run ``host``'s hook ``var`` with the host's name and address appended; None when it succeeded,
    else why it failed (one line).  Its own session: a Ctrl-C meant for bringup does not cut it short;
    past its timeout the hook is ended with what it started: its session's process group, and any process
    that left it but carries the run's :data:`HOOK_RUN_ENV` token (a ``setsid`` daemon)."""
    argv = [*host.vars[var], host.name, host.address]
    timeout = hook_timeout(host)
    try:
        hook = child.start(argv, stdout=child.PIPE, stderr=child.PIPE, tag=HOOK_RUN_ENV)
    except OSError as e:
        return f"{var} could not start {argv[0]}: {e.strerror}"
    proc = hook.proc
    out: list[bytes] = []
    err: list[bytes] = []
    readers = [threading.Thread(target=_keep_ends, args=(proc.stdout, out), daemon=True),
               threading.Thread(target=_keep_ends, args=(proc.stderr, err), daemon=True)]
    for th in readers:
        th.start()
    deadline = time.monotonic() + timeout
    for th in readers:  # until both pipes are closed: by the hook, and by anything it started
        th.join(max(0.0, deadline - time.monotonic()))
    if any(th.is_alive() for th in readers) or _waits(proc, deadline):
        hook.kill()  # its group (a child's sleep too), then what left it carrying the token
        for th in readers:  # everything that held the pipes is gone: they close
            th.join(2.0)
        return f"{var} did not finish within {timeout:g} s ({HOOK_TIMEOUT})"
    proc.stdout.close()
    proc.stderr.close()
    if proc.returncode != 0:
        words = said((b"".join(err) or b"".join(out)).decode("utf-8", "replace"), 400)
        return f"{var} {child.how_ended(proc.returncode)}" + (f": {words}" if words else "")
    return None


def _waits(proc: "subprocess.Popen", deadline: float) -> bool:
    """Whether ``proc`` is still running at ``deadline`` (its pipes may close before it ends)."""
    try:
        proc.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return True
    return False


def _hooked(rolling: bool) -> Callable[..., HostResult]:
    """The per-host run of a rollout: drain, converge (with the health gate when rolling or hooked), undrain."""

    def one(host: Host, roles: list[Role], vars: dict[str, Any], opts: Options, templates: Templates,
            progress: Progress, stop: Stop | None) -> HostResult:
        hooks = not opts.check and not (stop is not None and stop.requested)
        drain = hooks and drains_first(host, opts.check)
        gate = rolling or any(host.vars.get(v) is not None for v in HOOKS)
        if drain:
            progress(host.name, "drain_command")
            err = run_hook("drain_command", host)
            if err:
                progress(host.name, "failed")
                return HostResult(host.name, status="failed", message=f"{err}; the host was not touched",
                                  resources=[ResourceResult("rollout", "drain_command", "failed", error=err)])
        result = run_host(host, roles, vars, replace(opts, health_gate=gate), templates, progress, stop)
        if drain:
            result.resources.insert(0, ResourceResult("rollout", "drain_command", "ok", reason="drained"))
        if not hooks or host.vars.get("undrain_command") is None:
            return result
        if drain and result.status == "not started":
            # A signal came while the drain ran: the host was drained, then nothing touched it, so it goes
            # back in service; the console and the report say the same (it is no longer "not started").
            result.status = "interrupted"
            result.message = (f"interrupted by {stop.name if stop else 'a signal'} after drain_command: "
                              "nothing else ran on it")
            err = run_hook("undrain_command", host)
            if err:
                result.message += f"; {err}: the host stays drained"
                result.resources.append(ResourceResult("rollout", "undrain_command", "failed", error=err))
            else:
                result.message += "; undrain_command ran: back in service"
                result.resources.append(ResourceResult("rollout", "undrain_command", "ok", reason="back in service"))
            progress(host.name, result.status)
            return result
        if result.status != "ok":
            result.message = (result.message + "; " if result.message else "") + \
                "undrain_command not run: the host stays drained"
            return result
        progress(host.name, "undrain_command")
        err = run_hook("undrain_command", host)
        if err:
            result.status, result.message = "failed", f"{err}; the host converged but stays drained"
            result.resources.append(ResourceResult("rollout", "undrain_command", "failed", error=err))
        else:
            result.resources.append(ResourceResult("rollout", "undrain_command", "ok", reason="back in service"))
        return result

    return one


@dataclass
class Rollout:
    """What a rollout did: every host's result (in host order), its batches, and why it stopped (or None)."""

    results: list[HostResult]
    batches: list[list[str]] = field(default_factory=list)
    stopped: str | None = None

    @property
    def never_started(self) -> list[str]:
        return [r.host for r in self.results if r.status == "not started"]


_BAD = ("failed", "unreachable")


def rollout(hosts: list[Host], roles: list[Role], role_vars: dict[str, dict[str, Any]], opts: Options,
            templates: Templates, progress: Progress = lambda h, s: None,
            on_result: Callable[[HostResult], None] = lambda r: None, stop: Stop | None = None, *,
            serial: list[int | str] | None = None, max_fail_percentage: float | None = None) -> Rollout:
    """Run ``hosts`` batch by batch (:func:`batch_sizes`); see the module's docstring.

    The health gate (each selected role's ``health`` hook, after the host's
    run) is on in a rolling run (``serial``) and on hosts with hooks.
    """
    stop = stop or Stop()
    sizes = batch_sizes(serial, len(hosts))
    groups, at = [], 0
    for n in sizes:
        groups.append(hosts[at:at + n])
        at += n
    out = Rollout([], [[h.name for h in g] for g in groups])
    done: dict[str, HostResult] = {}
    for k, batch in enumerate(groups, 1):
        for r in run_hosts(batch, roles, role_vars, opts, templates, progress, on_result, stop,
                           run=_hooked(rolling=bool(serial))):
            done[r.host] = r
        bad = sum(1 for h in batch if done[h.name].status in _BAD)
        if k < len(groups) and not stop.requested and exceeds(bad, len(batch), max_fail_percentage):
            why = ("every host of it failed" if max_fail_percentage is None else
                   f"{bad} of {len(batch)} host(s) failed, above --max-fail-percentage {max_fail_percentage:g}")
            out.stopped = f"after batch {k} of {len(groups)}: {why}"
            for h in hosts[sum(sizes[:k]):]:
                r = HostResult(h.name, status="not started", message=f"not started: the rollout stopped {out.stopped}")
                done[h.name] = r
                progress(h.name, r.status)
                on_result(r)
            break
    out.results = [done[h.name] for h in hosts]
    return out


def write_retry(directory: Path, results: list[HostResult], run_name: str) -> Path | None:
    """The hosts to run again (every host that did not end ``ok``) as ``<run_name>.retry`` and ``last.retry``.

    A run where every host ended ok writes nothing, and takes its hosts out of
    an existing ``last.retry`` (removed once empty: bringup wrote it).
    Written through a temporary file and renamed: never half a list.
    Returns the ``last.retry`` written, or None.
    """
    from ..inventory.patterns import retry_line, retry_names

    bad = [r.host for r in results if r.status != "ok"]
    last = directory / RETRY_FILE
    if bad:
        text = (f"# {run_name}: hosts that failed, were unreachable, interrupted or never started\n"
                f"# run them again with --limit @{last}\n" + "".join(f"{retry_line(h)}\n" for h in bad))
        for path in (directory / f"{run_name}.retry", last):
            _write(path, text)
        _prune_retries(directory)
        return last
    if last.is_file() and not last.is_symlink():
        ok = {r.host for r in results}
        from ..userfile import read_capped

        # The retry file is bringup's own, but a saved file is no more trusted than its folder: bounded, and never
        # read through a link (bringup writes it by a rename: a link there is none of its own, left as it is; one
        # to a file only root may read, holding a host's name, had the rest of that file rewritten here, 0644).
        # Read as --limit @ reads it (retry_names): the same names, the same lines.
        text = read_capped(last, RETRY_MAX, InputError, missing=f"{last}: gone", unreadable=f"{last}: ",
                           too_large=f"{last}: larger than {RETRY_MAX >> 20} MiB: no retry file; remove it",
                           not_regular=f"{last}: not a regular file; remove it", follow=False
                           ).decode("utf-8", "replace")
        names = retry_names(text)
        gone = {n for n, name in names if name in ok}
        if len(gone) == len(names):
            last.unlink()
        elif gone:
            _write(last, "\n".join(ln for n, ln in enumerate(text.split("\n"), 1) if n not in gone))
    return None


#: Per-run retry files kept (the newest); ``last.retry`` is always the latest run's.
RETRY_KEEP = 10
#: A per-run retry file's name as bringup writes it (``<stamp>-<command>.retry``): only these are pruned.
_RUN_RETRY = re.compile(r"^\d{8}T\d{6}-[a-z-]+(?:-\d+)?\.retry$")


def _prune_retries(directory: Path, keep: int = RETRY_KEEP) -> None:
    """Remove all but the newest ``keep`` per-run retry files bringup wrote (a file named otherwise stays)."""
    mine = sorted(p for p in directory.iterdir() if p.is_file() and not p.is_symlink() and _RUN_RETRY.match(p.name))
    for p in mine[:-keep] if keep else mine:
        try:
            p.unlink()
        except OSError:
            pass


#: The largest retry file read back (a host name a line).
RETRY_MAX = 16 << 20


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text)
