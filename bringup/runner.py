"""Run roles on hosts: facts, batched reads, plans, one write script per role.

Round trips per host: one for the facts, one reading every resource of every
role; then, per role that changes something, one write script, one re-read to
confirm, and one for its handlers.  A no-op run is two round trips whatever
the number of resources (one when the roles declare no facts: ``FACTS = ()``).
"""
from __future__ import annotations

import os
import secrets
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable

from .command import sh
from .connection import RUN_LOCK, RUN_LOCK_WAIT_S, RunResult, Transport, connect, wait_for_ssh
from .errors import BringupError, Unreachable, said
from .facts.gather import gather
from .inventory import Host
from .pending import PendingHandlers
from .resources.base import Plan, Resource
from .roles import FactView, HostContext, Role, merged_defaults, wanted_facts
from .script import READ_LANES, Section, batch, split

if TYPE_CHECKING:
    from .ahead import Ahead, Dial
    from .templates import Templates

__all__ = ["Options", "ResourceResult", "HostResult", "HostRun", "Stop", "run_hosts", "run_host", "prepare"]


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
    #: Connections and facts opened while the run prepared (:mod:`bringup.ahead`): a host takes its own.
    ahead: Ahead | None = None


@dataclass
class ResourceResult:
    """The outcome of one resource on one host."""

    role: str
    id: str
    status: str  # ok | changed | failed | skipped
    changes: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None
    diff: str | None = None
    error: str | None = None


@dataclass
class HostResult:
    """The outcome on one host, with Ansible's recap counters."""

    host: str
    status: str = "ok"  # ok | failed | unreachable | interrupted | not started
    message: str | None = None
    resources: list[ResourceResult] = field(default_factory=list)
    handlers: list[str] = field(default_factory=list)
    round_trips: int = 0
    seconds: float = 0.0
    fact_errors: dict[str, str] = field(default_factory=dict)
    reboot_required: bool = False
    #: Why the host must reboot (when it did not), or why it rebooted.
    reboot_reason: str | None = None
    rebooted: bool = False

    def count(self, status: str) -> int:
        return sum(1 for r in self.resources if r.status == status)

    @property
    def recap(self) -> dict[str, int]:
        ok = self.count("ok") + self.count("changed")
        return {
            "ok": ok,
            "changed": self.count("changed"),
            "failed": self.count("failed") + (1 if self.status == "failed" and not self.count("failed") else 0),
            "skipped": self.count("skipped"),
            "unreachable": 1 if self.status == "unreachable" else 0,
        }


Progress = Callable[[str, str], None]


class Interrupted(Exception):
    """The run was asked to stop (a signal) before this host's next step."""


class Stop:
    """A run asked to stop by a signal, shared by every host of the run.

    After the first :meth:`request` no host starts and no role starts (the
    role in progress finishes: its writes, handlers and checks); after a
    second, the connections are closed, which wakes every round trip in
    flight, and the hosts end at once (:attr:`abandoned`).  Handlers a cut-off
    role owed stay recorded on the host for the next run.
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        self.abandoned = False
        self._lock = threading.Lock()
        self._open: set[Transport] = set()

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum else ""

    @property
    def exit_code(self) -> int:
        """The shell's code for a death by this signal: 130 for SIGINT, 143 for SIGTERM."""
        return 128 + (self.signum or 0)

    def request(self, signum: int) -> bool:
        """Stop starting work (True), or, asked again, abandon what is in flight (False)."""
        if self.signum is None:
            self.signum = signum
            return True
        self.abandoned = True
        # Not in the signal handler itself: closing takes locks a worker may hold.
        threading.Thread(target=self._close_all, daemon=True).start()
        return False

    def check(self, where: str) -> None:
        """Raise :class:`Interrupted` when a stop was requested (called before a host's next step)."""
        if self.signum is not None:
            raise Interrupted(f"interrupted by {self.name} {where}")

    def track(self, t: Transport | None) -> None:
        if t is not None:
            with self._lock:
                self._open.add(t)
            if self.abandoned:
                self._close_all()

    def untrack(self, t: Transport | None) -> None:
        with self._lock:
            self._open.discard(t)

    def _close_all(self) -> None:
        with self._lock:
            open_ = list(self._open)
        for t in open_:
            try:
                t.close()
            except Exception:  # noqa: BLE001 - a connection already gone is what we want
                pass


def prepare(hosts: list[Host], roles: list[Role], every_role: list[Role] | None = None
            ) -> dict[str, dict[str, Any]]:
    """Each host's variables, merged once for the whole run, and validated by every selected role.

    Precedence, lowest first: the defaults of every role (``every_role``; the
    selected ones when not given) < the inventory < ``--set`` (already in the
    host's variables).  Every role sees the same values, so a role run alone
    reads what a full run gives it.  Bad input is refused here, before any
    command runs on a host (a run's connections may be opening: bringup.ahead),
    so nothing is half-written on any host.
    """
    defaults = merged_defaults(every_role or roles)
    merged: dict[str, dict[str, Any]] = {}
    for h in hosts:
        v = {**defaults, **h.vars}
        for role in roles:
            try:
                role.validate(v)
            except BringupError as e:
                raise type(e)(f"host {h.name}, role {role.name}: {e}") from None
        merged[h.name] = v
    return merged


def _read(t: Transport, resources: list[Resource]) -> list[str | None]:
    """Read the current state of ``resources`` in one round trip."""
    if not resources:
        return []
    script, token = batch([(r.id, r.read()) for r in resources], lanes=READ_LANES,
                          in_shell={i for i, r in enumerate(resources) if not r.read_alongside})
    res = t.run_script(script)
    secs = split(res.stdout, token, [r.id for r in resources])
    return [s.output if s.rc is not None else None for s in secs]


def _plan(r: Resource, out: str | None) -> Plan:
    if out is None:
        return Plan.fail("its state could not be read (the read script stopped early)")
    try:
        return r.plan(out)
    except BringupError as e:
        return Plan.fail(str(e))


class HostRun:
    """One host in one run: its connection, its facts, its variables, and the roles' plans.

    ``provision``, ``plan``, ``checklist`` and ``audit`` all go through it: the
    facts are gathered once, and only those the selected roles declare
    (``FACTS`` of a role module; a role without it gets them all) plus what
    the caller asks for (``extra_facts``: the checklist's own).

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
        self.facts: dict[str, Any] = {}
        self._early: Dial | None = None  # the Dial taken from opts.ahead, until its facts are used
        self._dialled: float | None = None  # when that Dial started connecting (time.monotonic)
        self.fact_errors: dict[str, str] = {}
        self.result = HostResult(host.name)

    # -- connection and facts ---------------------------------------------------------------

    def open(self) -> Transport:
        if self.transport is None:
            self.progress(self.host.name, "connecting")
            ahead = self.opts.ahead
            self._early = ahead.take(self.host) if ahead is not None else None
            if self._early is not None:
                self._dialled = self._early.started
            self.transport = self._early.transport if self._early is not None else \
                connect(self.host, accept_new_host_keys=self.opts.accept_new_host_keys)
            self.stop.track(self.transport)
            if not self.opts.check:
                # Two runs that write never interleave on one host: the second waits, then names the first.
                holder = self.transport.hold_run_lock(_who())
                if holder is not None:
                    raise BringupError(f"another bringup run holds this host ({RUN_LOCK}): {holder}; waited "
                                       f"{RUN_LOCK_WAIT_S} s for it; run again once it has ended")
        return self.transport

    def gather(self) -> dict[str, Any]:
        """Gather the wanted facts in one round trip (again after a reboot; the first may come from ahead)."""
        self.progress(self.host.name, "gathering facts")
        t = self.open()
        early, self._early = self._early, None
        got = early.facts_for(self.facts_wanted) if early is not None else None
        self.facts, self.fact_errors = got if got is not None else gather(t, self.facts_wanted)
        self.result.fact_errors = self.fact_errors
        return self.facts

    def close(self) -> None:
        if self.transport is not None:
            self.result.round_trips = self.transport.round_trips
            self.stop.untrack(self.transport)
            self.transport.close()

    def context(self, role: Role) -> HostContext:
        """What ``role`` sees of this host: the run's variables, and the facts it declared."""
        return HostContext(self.host.name, self.vars, FactView(self.facts, role.facts, role.name),
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
        if self.stop.abandoned and result.status != "interrupted":
            # Its connection was closed under it: whatever failed then failed for that reason.
            result.status, result.message = "interrupted", f"abandoned by a second {self.stop.name} " + (
                f"({result.message})" if result.message else "in the middle of a step")
        self.progress(self.host.name, result.status)
        return result

    def _roles(self) -> None:
        host, opts, result = self.host, self.opts, self.result
        plans_of = [self.declare(role) for role in self.roles]
        self.progress(host.name, "reading state")
        everything = [r for _, _, rs in plans_of for r in rs]
        # Handlers an earlier run owed are read with the state, in the same round trip.
        owed = PendingHandlers()
        outputs = iter(_read(self.transport, [*everything, owed]))
        reads: list[list[str | None] | None] = [[next(outputs) for _ in rs] for _, _, rs in plans_of]
        owed.load(next(outputs))
        stale = False
        pending: str | None = None  # a reboot this run did not make
        rebooted_for: dict[str, list[ResourceResult]] = {}  # role -> its results before the reboot
        i = 0
        while i < len(plans_of):
            role, ctx, resources = plans_of[i]
            self.stop.check(f"before role {role.name} (not run: "
                            f"{', '.join(dict.fromkeys(r.name for r, _, _ in plans_of[i:]))})")
            if pending and role.waits_for_reboot:
                for r in resources:
                    result.resources.append(ResourceResult(
                        role.name, r.id, "skipped",
                        reason=f"not run: the host must reboot first ({pending}); rerun with --allow-reboot"))
                i += 1
                continue
            t = self.transport
            current = reads[i] if not stale and reads[i] is not None else _read(t, resources)
            start = len(result.resources)
            stop, plans, changed = _run_role(host, role, ctx, resources, current, opts, self.progress, t, result,
                                             owed)
            stale = stale or changed
            if role.name in rebooted_for:
                _merge_passes(result, start, rebooted_for[role.name])
            if stop:
                return
            reasons = list(dict.fromkeys(p.reboot for p in plans if p.reboot))
            if not reasons:
                i += 1
                continue
            reason = "; ".join(reasons)
            if role.name in rebooted_for:
                result.resources.append(ResourceResult(role.name, "reboot:verify", "failed",
                                                       error=f"still after the reboot: {reason}"))
                return
            if opts.check or not opts.allow_reboot:
                result.reboot_required, result.reboot_reason = True, reason
                if not opts.check:
                    pending = reason
                i += 1
                continue
            self.progress(host.name, f"{role.name}: rebooting ({reason})")
            self.reboot()
            result.rebooted, result.reboot_reason = True, reason
            rebooted_for[role.name] = result.resources[start:] + [
                ResourceResult(role.name, f"reboot:{host.name}", "changed", reason=f"rebooted: {reason}")]
            del result.resources[start:]
            self.progress(host.name, "gathering facts after the reboot")
            self.gather()
            # This role and the ones after it are declared and read afresh, from the new boot's facts.
            for j in range(i, len(plans_of)):
                plans_of[j] = self.declare(plans_of[j][0])
                reads[j] = None
            stale = True

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
        t.close()
        timeout = float(host.vars.get("reboot_timeout", 600))
        deadline = time.monotonic() + timeout
        time.sleep(2)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Unreachable(f"{host.name} did not come back from the reboot within {timeout:g} s")
            self.stop.check("while waiting for the host to come back from its reboot")
            t = wait_for_ssh(host, timeout=left)
            if t.run_script(sh("[ -e %s ] && echo old-boot || echo new-boot", marker)).stdout.strip() == "new-boot":
                t.round_trips += trips
                self.transport = t
                self.stop.track(t)
                return
            t.close()  # still the old boot, on its way down
            time.sleep(1)


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


def _apply(t: Transport, keys: list[str], plans: list[Plan]) -> tuple[list[Section], RunResult]:
    """Run the plans' commands in order as one script, cut where a plan streams data (its own round trip).

    The first failing step stops the rest (their sections have ``rc`` None).
    """
    secs: list[Section | None] = [None] * len(plans)
    last = RunResult(0, "", "")
    j = 0
    while j < len(plans):
        if plans[j].upload is None:
            k = j
            while k < len(plans) and plans[k].upload is None:
                k += 1
            idx = list(range(j, k))
            script, token = batch([(keys[x], "\n".join(plans[x].commands)) for x in idx],
                                  stop_on_error=True, stderr="merge")
            last = t.run_script(script)
            for x, sec in zip(idx, split(last.stdout, token, [keys[x] for x in idx])):
                secs[x] = sec
            ok = all(secs[x].rc == 0 for x in idx)  # type: ignore[union-attr]
            j = k
        else:
            p = plans[j]
            res = t.run_stream(p.upload.remote, p.upload.local)
            rc, out = res.rc, (res.stdout + res.stderr).strip()
            if rc == 0 and p.commands:
                script, token = batch([(keys[j], "\n".join(p.commands))], stop_on_error=True, stderr="merge")
                last = t.run_script(script)
                sec = split(last.stdout, token, [keys[j]])[0]
                rc, out = sec.rc, out + "\n" + sec.output
            secs[j] = Section(keys[j], rc, out)
            ok = rc == 0
            j += 1
        if not ok:
            break
    return [s or Section(keys[x], None, "") for x, s in enumerate(secs)], last


def _run_role(host, role, ctx, resources, current, opts, progress, t, result, owed: PendingHandlers
              ) -> tuple[bool, list[Plan], bool]:
    """Plan and apply one role; returns (stop the host, the plans, whether anything was applied).

    Handlers an earlier run owed (``owed``) run even when nothing changes;
    before writing, the handlers the writes will owe are recorded on the host.
    """
    plans = [_plan(r, out) for r, out in zip(resources, current)]
    done: dict[int, ResourceResult] = {}  # by resource index: reported in the role's order
    if any(p.error for p in plans):
        # Nothing of a role with an unplannable resource is applied.
        for i, (r, p) in enumerate(zip(resources, plans)):
            done[i] = ResourceResult(role.name, r.id, "failed", error=p.error) if p.error else \
                ResourceResult(role.name, r.id, "skipped", reason="not run: another resource of the role failed")
        _record(result, done)
        # Check mode writes nothing, so later roles cannot depend on this one: plan them too.
        return not opts.check, plans, False
    todo = [i for i, p in enumerate(plans) if p.changed and not p.skipped]
    for i, (r, p) in enumerate(zip(resources, plans)):
        if i not in todo:
            done[i] = ResourceResult(role.name, r.id, "skipped" if p.skipped else "ok", reason=p.reason)
    if opts.check or not todo:
        for i in todo:
            done[i] = ResourceResult(role.name, resources[i].id, "changed", changes=_jsonable(plans[i].changes),
                                     diff=plans[i].diff, reason="check mode: would change")
        _record(result, done)
        if owed.earlier(role.name):
            if opts.check:
                result.resources.extend(ResourceResult(role.name, f"handler:{n}", "changed",
                                                       reason=f"check mode: would run, {_OWED}")
                                        for n in owed.earlier(role.name))
            else:
                _run_handlers(role, ctx, [], t, result, owed)
        return False, plans, False
    progress(host.name, f"{role.name}: applying {len(todo)} change(s)")
    secs, res = _apply(t, [resources[i].id for i in todo], _owing(role, [resources[i] for i in todo],
                                                                   [plans[i] for i in todo], owed))
    step_failed = any(sec.rc not in (0, None) for sec in secs)
    applied: list[int] = []
    for i, sec in zip(todo, secs):
        r, p = resources[i], plans[i]
        if sec.rc == 0:
            applied.append(i)
        elif sec.rc is None and step_failed:
            done[i] = ResourceResult(role.name, r.id, "skipped", reason="not run: an earlier step of the role failed")
        elif sec.rc is None:
            done[i] = ResourceResult(role.name, r.id, "failed",
                                     error=f"the write script stopped (exit {res.rc}): {said(res.stderr, 300)}")
        else:
            done[i] = ResourceResult(role.name, r.id, "failed", changes=_jsonable(p.changes),
                                     error=f"exit {sec.rc}: {said(sec.output)}")
    # Re-read what was applied: a resource that still wants changes did not converge.
    progress(host.name, f"{role.name}: verifying")
    notified: list[str] = []
    for i, out in zip(applied, _read(t, [resources[i] for i in applied])):
        r, p = resources[i], plans[i]
        again = _plan(r, out)
        if again.error or (again.changed and not again.skipped):
            done[i] = ResourceResult(role.name, r.id, "failed", changes=_jsonable(p.changes),
                                     error=again.error or f"did not converge: still wants {_jsonable(again.changes)}")
            continue
        if again.skipped:  # applying showed it cannot apply here (a refusal the write recorded)
            done[i] = ResourceResult(role.name, r.id, "skipped", reason=again.reason)
            continue
        done[i] = ResourceResult(role.name, r.id, "changed", changes=_jsonable(p.changes), diff=p.diff)
        if p.notifies:
            notified.extend(n for n in r.notify if n not in notified)
    _record(result, done)
    if notified or owed.earlier(role.name):
        _run_handlers(role, ctx, notified, t, result, owed)
    if role.has_verify:
        _verify(role, ctx, t, result)
    return any(x.status == "failed" for x in result.resources), plans, True


def _who() -> str:
    """This run, as the host's run lock names it to a second run."""
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()} pid {os.getpid()}, since {time.strftime('%Y-%m-%d %H:%M:%S %z')}"


def _record(result: HostResult, done: dict[int, ResourceResult]) -> None:
    result.resources.extend(done[i] for i in sorted(done))


#: Why a handler runs that nothing in this run notified.
_OWED = "pending from an interrupted run"


def _owing(role: Role, resources: list[Resource], plans: list[Plan], owed: PendingHandlers) -> list[Plan]:
    """``plans`` with the handlers they will owe recorded on the host before the first write that notifies."""
    names = list(dict.fromkeys(n for r, p in zip(resources, plans) if p.notifies for n in r.notify))
    first = next((i for i, (r, p) in enumerate(zip(resources, plans)) if r.notify and p.notifies), None)
    record = owed.owe(role.name, names) if names else ""
    if not record or first is None:
        return plans
    out = list(plans)
    cmds, k = plans[first].commands, plans[first].checks
    out[first] = replace(plans[first], commands=[*cmds[:k], record, *cmds[k:]])
    return out


def _run_handlers(role: Role, ctx: HostContext, names: list[str], t: Transport, result: HostResult,
                  owed: PendingHandlers) -> None:
    """Run each notified handler of ``role``, and those an earlier run owed, once, in the role's order.

    When they all ran, the same script removes them from the host's pending file.
    """
    handlers = role.handlers(ctx)
    unknown = [n for n in names if n not in handlers]
    if unknown:
        raise BringupError(f"role {role.name}: notify names unknown handler(s) {', '.join(unknown)}")
    earlier = owed.earlier(role.name)
    for n in earlier:
        if n not in handlers:
            result.resources.append(ResourceResult(role.name, f"handler:{n}", "skipped",
                                                   reason=f"{_OWED}, but the role no longer declares it: dropped"))
    ordered = [n for n in handlers if n in names or n in earlier]
    settle = owed.settled(role.name, earlier + ordered)
    keys = ordered + (["pending-handlers"] if settle else [])
    script, token = batch([(n, "\n".join(handlers[n])) for n in ordered] + ([(keys[-1], settle)] if settle else []),
                          stop_on_error=True, stderr="merge")
    res = t.run_script(script)
    secs = split(res.stdout, token, keys)
    for n, s in zip(ordered, secs):
        rid = f"handler:{n}"
        if s.rc == 0:
            result.handlers.append(n)
            result.resources.append(ResourceResult(role.name, rid, "changed",
                                                   reason="notified" if n in names else _OWED))
        else:
            result.resources.append(ResourceResult(role.name, rid, "failed",
                                                   error=f"exit {s.rc}: {said(s.output)}"))
    if settle and secs[-1].rc == 0:
        owed.forget(role.name, earlier + ordered)
    elif settle and all(s.rc == 0 for s in secs[:-1]):
        result.resources.append(ResourceResult(role.name, "pending-handlers", "failed",
                                               error=f"the handlers ran, but {owed.path} could not be updated "
                                                     f"(they run again next time): {said(secs[-1].output, 300)}"))


def _verify(role: Role, ctx: HostContext, t: Transport, result: HostResult) -> None:
    """After a role wrote something: its ``verify``; on failure its ``rollback``, then report both.

    Runs even when a write step failed: a half-applied revision is what a
    rollback is for.  One result, ``verify:<role>``, says what happened.
    """
    rid = f"verify:{role.name}"
    try:
        note = role.verify(ctx, t)
    except BringupError as e:
        error = str(e)
        if role.has_rollback:
            try:
                error += f"; rolled back: {role.rollback(ctx, t)}"
            except BringupError as e2:
                error += f"; rollback failed: {e2}"
        result.resources.append(ResourceResult(role.name, rid, "failed", error=error))
    else:
        result.resources.append(ResourceResult(role.name, rid, "ok", reason=note or "verified"))


def _jsonable(changes: dict) -> dict:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in changes.items()}


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
        for f in as_completed(by_future):
            h = by_future[f]
            try:
                r = f.result()
            except Exception as e:  # noqa: BLE001 - a bug on one host must not hide the others' results
                r = HostResult(h.name, status="failed", message=f"internal error: {type(e).__name__}: {e}")
            results[h.name] = r
            on_result(r)
    return [results[h.name] for h in hosts]


def exit_code(results: list[HostResult]) -> int:
    """Ansible's codes: 4 if any host was unreachable, else 2 if any failed, else 0."""
    if any(r.status == "unreachable" for r in results):
        return 4
    if any(r.status == "failed" for r in results):
        return 2
    return 0
