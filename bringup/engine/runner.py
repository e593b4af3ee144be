"""Run roles on hosts: facts, batched reads, plans, one write script per role.

Round trips per host: one for the facts, one reading every resource of every
role; then, per role that changes something, one write script, one re-read to
confirm, and one for its handlers (:mod:`bringup.engine.rolerun`).  A no-op run is two
round trips whatever the number of resources (one when the roles declare no
facts: ``FACTS = ()``).  The results are :mod:`bringup.engine.results`'; a stop on a
signal is :mod:`bringup.ssh.stop`'s.
"""
from __future__ import annotations

import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from ..ssh.command import sh
from ..ssh.connection import Transport, connect
from ..ssh.reconnect import wait_for_ssh
from ..errors import BringupError, Unreachable, said
from ..facts.gather import ahead_key, gather, lock_and_gather
from ..inventory.hosts import Host
from .pending import PendingHandlers
from .results import HostResult, ResourceResult
from .rolerun import RoleRun, read
from .roles import FactView, HostContext, Role, fact_keys, merged_defaults, wanted_facts
from ..ssh.runlock import LockLost, who
from ..ssh.stop import Interrupted, Stop, as_completed_awake

if TYPE_CHECKING:
    from .ahead import Ahead, Dial
    from ..resources.base import Resource
    from .templates import Templates

__all__ = ["Options", "HostRun", "Progress", "run_hosts", "run_host", "prepare"]


@dataclass
class Options:
    """How to run: check mode, diffs, parallelism, host keys."""

    check: bool = False
    diff: bool = False
    forks: int = 10
    accept_new_host_keys: bool = False
    #: Reboot a host when a role's state needs it (``--allow-reboot``), then carry on.
    allow_reboot: bool = False
    #: After a host converged, each selected role's ``health`` hook must pass (a rolling run's gate).
    health_gate: bool = False
    #: Connections and facts opened while the run prepared (:mod:`bringup.engine.ahead`): a host takes its own.
    ahead: Ahead | None = None


#: A run's progress line: ``progress(host, what it is doing now)``.
Progress = Callable[[str, str], None]


def prepare(hosts: list[Host], roles: list[Role], every_role: list[Role] | None = None
            ) -> dict[str, dict[str, Any]]:
    """Each host's variables, merged once for the whole run, and validated by every selected role.

    Precedence, lowest first: the defaults of every role (``every_role``; the
    selected ones when not given) < the inventory < ``--set`` (already in the
    host's variables).  Every role sees the same values, so a role run alone
    reads what a full run gives it.  Bad input is refused here, before any
    command runs on a host (a run's connections may be opening: bringup.engine.ahead),
    so nothing is half-written on any host.
    """
    defaults = merged_defaults(every_role or roles)
    merged: dict[str, dict[str, Any]] = {}
    for h in hosts:
        v = {**defaults, **h.vars}
        for role in roles:
            try:
                # A role's variable holding a {{ template }} bringup does not render: one line, not a literal.
                h.refuse_unrendered({*role.defaults, *getattr(role.model, "model_fields", {})})
                role.validate(v)
            except BringupError as e:
                raise type(e)(f"host {h.name}, role {role.name}: {e}") from None
        merged[h.name] = v
    return merged


class HostRun:
    """One host in one run: its connection, its facts, its variables, and the roles' plans.

    ``provision``, ``plan``, ``checklist`` and ``audit`` all go through it: the
    facts are gathered once, and only those the selected roles declare
    (``FACTS`` of a role module; left out, or ``EVERY_FACT``: all of them)
    plus what the caller asks for (``extra_facts``: the checklist's own).
    Each role runs as a :class:`~bringup.engine.rolerun.RoleRun`; the reboot path
    is :meth:`_reboot_path`, the reboot itself :meth:`reboot`.

        run = HostRun(host, roles, vars, Options(check=True), templates)
        result = run.converge()        # the check-mode plan, with run.facts and run.vars kept
    """

    def __init__(self, host: Host, roles: list[Role], vars: dict[str, Any], opts: Options, templates: Templates,
                 progress: Progress = lambda h, s: None, extra_facts: tuple[str, ...] = (), stop: Stop | None = None):
        self.host, self.roles, self.vars, self.opts, self.templates = host, roles, vars, opts, templates
        self.progress = progress
        self.stop = stop or Stop()
        self.transport: Transport | None = None
        self.facts_wanted = wanted_facts(roles, extra_facts)
        #: The facts read in part, and which keys (the sysctl role's keys of system.sysctl, not ``sysctl -a``).
        self.fact_keys = fact_keys(roles, vars, extra_facts)
        #: What names this run's state read kept on the host, for the next run to read ahead with its facts.
        self.ahead_key = ahead_key([r.name for r in roles], self.facts_wanted, self.fact_keys)
        self.facts: dict[str, Any] = {}
        self._early: Dial | None = None  # the Dial taken from opts.ahead, until its facts are used
        self._dialled: float | None = None  # when that Dial started connecting (time.monotonic)
        #: The facts gathered by the run lock's holder as it took the lock (one round trip), until used.
        self._locked_facts: tuple[dict[str, Any], dict[str, str]] | None = None
        self.fact_errors: dict[str, str] = {}
        self.result = HostResult(host.name)
        self._reboot_pending: str | None = None  # a reboot this run needs and did not make
        self._first_pass: dict[str, list[ResourceResult]] = {}  # role -> its results before the reboot

    # -- connection and facts ---------------------------------------------------------------

    def open(self) -> Transport:
        if self.transport is None:
            self.progress(self.host.name, "connecting")
            ahead = self.opts.ahead
            self._early = ahead.take(self.host) if ahead is not None else None
            if self._early is not None:
                self._dialled = self._early.started
            self.transport = self._early.transport if self._early is not None else \
                connect(self.host, accept_new_host_keys=self.opts.accept_new_host_keys,
                        jumps=ahead.jumps if ahead is not None else None,
                        routes=ahead.routes if ahead is not None else None)
            self.stop.track(self.transport)
            if self._early is not None:
                self._early.done.wait()  # its thread may still be taking the lock on it (and gathering)
                if self._early.lock_error is not None:
                    raise self._early.lock_error
            if not self.opts.check and not self.transport.holds_run_lock:
                # Two runs that write never interleave on one host: the second waits, then names the first.  The
                # holder gathers the facts once it holds the lock: one round trip for both (none gathered ahead).
                self._locked_facts = lock_and_gather(self.transport, who(),
                                                     self.facts_wanted if self._early is None else [],
                                                     self.fact_keys, self.ahead_key)
        return self.transport

    def gather(self) -> dict[str, Any]:
        """Gather the wanted facts in one round trip (again after a reboot; the first may come from ahead, or
        from the run lock's holder)."""
        self.progress(self.host.name, "gathering facts")
        t = self.open()
        early, self._early = self._early, None
        got = early.facts_for(self.facts_wanted, self.fact_keys) if early is not None else None
        if got is None:
            got, self._locked_facts = self._locked_facts, None
        self.facts, self.fact_errors = got if got is not None else gather(t, self.facts_wanted, self.fact_keys)
        self.result.fact_errors = self.fact_errors
        return self.facts

    def close(self) -> None:
        if self.transport is not None:
            self.result.round_trips = self.transport.round_trips
            self.stop.untrack(self.transport)
            self.transport.close()

    def context(self, role: Role) -> HostContext:
        """What ``role`` sees of this host: the run's variables, and the facts it declared."""
        return HostContext(self.host.name, self.vars, FactView(self.facts, role.facts, role.name, self.fact_errors),
                           self.templates.render)

    def declare(self, role: Role) -> tuple[Role, HostContext, list[Resource]]:
        ctx = self.context(role)
        try:
            return role, ctx, role.resources(ctx)
        except BringupError as e:
            raise BringupError(f"role {role.name}: {e}") from None

    # -- the run ----------------------------------------------------------------------------

    def converge(self) -> HostResult:
        """Converge (or, in check mode, plan) the roles; the result also stays on ``self.result``."""
        started = time.monotonic()
        result = self.result
        try:
            self.stop.check("before connecting")
            self.gather()
            self._roles()
            if self.opts.health_gate and not self.opts.check and not result.count("failed"):
                self._health()
        except Interrupted as e:
            result.status, result.message = "interrupted", str(e)
        except LockLost as e:
            result.status, result.message = "failed", str(e)
        except Unreachable as e:
            result.status, result.message = "unreachable", str(e)
        except BringupError as e:
            result.status, result.message = "failed", str(e)
        finally:
            self.close()
            # A connection opened ahead counts from its dialling: the host's time, not the worker's.
            result.seconds = round(time.monotonic() - min(started, self._dialled or started), 3)
        if result.status == "ok" and result.count("failed"):
            result.status = "failed"
        if self.host.name in self.stop.silent:
            # The watchdog closed its connection after the first signal: whatever failed then failed for that.
            result.status, result.message = "interrupted", self.stop.silent[self.host.name]
        elif result.status != "interrupted" and (self.host.name in self.stop.closed
                                                  if getattr(self.stop, "at_once", False) else self.stop.abandoned):
            # Its connection was closed under it: whatever failed then failed for that reason.  (A read's stop
            # closes the connections at its first signal; a host whose connection it never closed, still being
            # dialled, ended by itself, and says its own result.)
            again = "" if getattr(self.stop, "at_once", False) else "a second "
            result.status, result.message = "interrupted", f"abandoned by {again}{self.stop.name} " + (
                f"({result.message})" if result.message else "in the middle of a step")
        self.progress(self.host.name, result.status)
        return result

    def _roles(self) -> None:
        """Run the roles in order, each a :class:`~bringup.engine.rolerun.RoleRun`, from one batched read of them all.

        A role whose plans say the host must reboot takes the reboot path (:meth:`_reboot_path`); a role whose
        changes made facts stale (``Plan.invalidates``) has them gathered again (:meth:`_regather`).  Either way
        the roles after it are declared and read afresh.
        """
        host, result = self.host, self.result
        declared = [self.declare(role) for role in self.roles]
        self.progress(host.name, "reading state")
        everything = [r for _, _, rs in declared for r in rs]
        # Handlers an earlier run owed are read with the state, in the same round trip.
        owed = PendingHandlers()
        # Kept for the next run's read ahead where the transport's holder reads ahead (a run that holds the lock).
        outputs = iter(read(self.transport, [*everything, owed], keep=self.ahead_key))
        reads: list[list[str | None] | None] = [[next(outputs) for _ in rs] for _, _, rs in declared]
        owed.load(next(outputs))
        stale = False
        i = 0
        while i < len(declared):
            role, ctx, resources = declared[i]
            self.stop.check(f"before role {role.name} (not run: "
                            f"{', '.join(dict.fromkeys(r.name for r, _, _ in declared[i:]))})")
            if self._reboot_pending and role.waits_for_reboot:
                for r in resources:
                    result.resources.append(ResourceResult(
                        role.name, r.id, "skipped",
                        reason=f"not run: the host must reboot first ({self._reboot_pending}); rerun with "
                               "--allow-reboot"))
                i += 1
                continue
            current = reads[i] if not stale and reads[i] is not None else read(self.transport, resources)
            start = len(result.resources)
            run = RoleRun(role, ctx, resources, self.transport, result, owed, check=self.opts.check,
                          progress=self.progress)
            stop = run.run(current)
            stale = stale or run.wrote
            if role.name in self._first_pass:
                _merge_passes(result, start, self._first_pass[role.name])
            if stop:
                return
            step = self._reboot_path(role, run.reboot, start) if run.reboot else "next"
            if step == "stop":
                return
            if step == "next":
                i += 1
                if not (run.invalidates and self._regather(run.invalidates)):
                    continue
            # Rebooted: this role and the ones after it, else the ones after it (facts gathered again), are
            # declared and read afresh from the facts as they are now.
            for j in range(i, len(declared)):
                declared[j] = self.declare(declared[j][0])
                reads[j] = None
            stale = True

    def _reboot_path(self, role: Role, reason: str, start: int) -> str:
        """``role``'s plans say the host must reboot (``reason``); its results start at ``start``.  Returns what
        the role loop does next: ``"next"``, the reboot recorded as required (check mode, no ``--allow-reboot``;
        roles that wait for it are then skipped); ``"again"``, rebooted and the facts gathered again: the role
        runs a second pass, its first pass's changes kept; ``"stop"``, the role still needs a reboot after one.
        """
        host, opts, result = self.host, self.opts, self.result
        if role.name in self._first_pass:
            result.resources.append(ResourceResult(role.name, "reboot:verify", "failed",
                                                   error=f"still after the reboot: {reason}"))
            return "stop"
        if opts.check or not opts.allow_reboot:
            result.reboot_required, result.reboot_reason = True, reason
            if not opts.check:
                self._reboot_pending = reason
            return "next"
        self.progress(host.name, f"{role.name}: rebooting ({reason})")
        self.reboot()
        result.rebooted, result.reboot_reason = True, reason
        self._first_pass[role.name] = result.resources[start:] + [
            ResourceResult(role.name, f"reboot:{host.name}", "changed", reason=f"rebooted: {reason}")]
        del result.resources[start:]
        self.progress(host.name, "gathering facts after the reboot")
        self.gather()
        return "again"

    def _regather(self, names: tuple[str, ...]) -> bool:
        """Gather again, in one round trip, the facts a role's changes made stale (``Plan.invalidates``) that
        this run gathered; returns whether there were any."""
        wanted = [f for f in self.facts_wanted if f.name in names]
        if not wanted:
            return False
        self.progress(self.host.name, f"gathering {', '.join(f.name for f in wanted)} again")
        facts, errors = gather(self.open(), wanted, self.fact_keys)
        self.facts.update(facts)
        for f in wanted:
            self.fact_errors.pop(f.name, None)
        self.fact_errors.update(errors)
        return True

    def _health(self) -> None:
        """The health gate: each selected role's ``health(host, transport)`` hook, over this connection.

        A hook returns a line (recorded as ``health:<role>``, ok), None when the
        host runs nothing of the role to check, or raises: the host failed.
        """
        for role in self.roles:
            if not role.has_health:
                continue
            self.progress(self.host.name, f"{role.name}: health gate")
            try:
                note = role.health(self.context(role), self.transport)
            except BringupError as e:
                self.result.resources.append(ResourceResult(role.name, f"health:{role.name}", "failed",
                                                            error=f"health gate: {e}"))
                continue
            if note:
                self.result.resources.append(ResourceResult(role.name, f"health:{role.name}", "ok", reason=note))

    def reboot(self) -> None:
        """Reboot the host, wait for SSH to come back from a new boot; the run goes on with the new connection.

        The new boot is told apart by a marker file in /run (a tmpfs), not by
        the boot id: containers share their machine's.
        """
        host, t = self.host, self.open()
        if host.connection.ansible_connection == "local":
            raise BringupError("a reboot is needed but this host is the control machine itself "
                               "(ansible_connection: local); reboot it by hand and run again")
        marker = f"/run/bringup-reboot-{secrets.token_hex(6)}"
        res = t.run_script(sh("touch -- %s && (sleep 1; systemctl reboot || reboot) >/dev/null 2>&1 </dev/null &",
                              marker))
        if res.rc != 0:
            raise BringupError(f"reboot failed (exit {res.rc}): {said(res.stderr, 300)}")
        trips = t.round_trips
        self.stop.untrack(t)
        t.close()
        timeout = float(host.vars.get("reboot_timeout", 600))
        time.sleep(2)
        # Tracked by the run's stop from its login on; the marker's absence tells the new boot from the old one
        # still on its way down.
        t = wait_for_ssh(host, timeout=timeout, stop=self.stop, probe=sh("[ ! -e %s ]", marker),
                         not_yet="still the boot before the reboot",
                         routes=self.opts.ahead.routes if self.opts.ahead is not None else None)
        t.round_trips += trips
        self.transport = t
        # The lock went with the old boot (and its /run): taken again before anything more is written.
        t.hold_run_lock(who())


def run_host(host: Host, roles: list[Role], vars: dict[str, Any], opts: Options, templates: Templates,
             progress: Progress = lambda h, s: None, stop: Stop | None = None) -> HostResult:
    """Converge (or, in check mode, plan) ``roles`` on one host; after a stop request it does not start."""
    if stop is not None and stop.requested:
        return HostResult(host.name, status="not started",
                          message=f"not started: the run was interrupted by {stop.name}")
    return HostRun(host, roles, vars, opts, templates, progress, stop=stop).converge()


def _merge_passes(result: HostResult, start: int, first: list[ResourceResult]) -> None:
    """After a reboot a role ran twice: what the first pass changed stays reported as changed."""
    second = result.resources[start:]
    del result.resources[start:]
    before = {r.id: r for r in first}
    merged = [before[r.id] if r.status == "ok" and r.id in before and before[r.id].status == "changed" else r
              for r in second]
    seen = {r.id for r in merged}
    merged += [r for r in first if r.id not in seen]
    result.resources.extend(merged)


def run_hosts(hosts: list[Host], roles: list[Role], role_vars, opts: Options, templates: Templates,
              progress: Progress = lambda h, s: None,
              on_result: Callable[[HostResult], None] = lambda r: None, stop: Stop | None = None,
              run: Callable[..., HostResult] = run_host) -> list[HostResult]:
    """Run on every host in parallel (``opts.forks`` at a time); one host's failure spares the others.

    ``on_result`` gets each host's result as soon as that host is done (to print
    and record it while slower hosts go on); the list returned is in host order.
    Once ``stop`` is requested, the hosts still queued end at once as ``not started``.
    ``run`` runs one host (:func:`run_host`'s arguments; a rollout wraps it in its hooks).
    """
    if not hosts:
        return []
    by_future = {}
    results: dict[str, HostResult] = {}
    with ThreadPoolExecutor(max_workers=max(1, min(opts.forks, len(hosts)))) as pool:
        for h in hosts:
            by_future[pool.submit(run, h, roles, role_vars[h.name], opts, templates, progress, stop)] = h
        # Never one unbounded wait: blocked until a host ended, a second signal that the kernel handed to
        # another thread waited out the very step it was sent to abandon.
        for f in as_completed_awake(by_future):
            h = by_future[f]
            try:
                r = f.result()
            except Exception as e:  # noqa: BLE001 - a bug on one host must not hide the others' results
                r = HostResult(h.name, status="failed", message=f"internal error: {type(e).__name__}: {e}")
            results[h.name] = r
            on_result(r)
    return [results[h.name] for h in hosts]
