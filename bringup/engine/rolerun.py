"""One role on one host: plan its resources from what was read, apply what changes, confirm, handlers, verify.

    run = RoleRun(role, ctx, resources, transport, result, owed, check=False)
    stop_host = run.run(current)    # current: each resource's read output, from the host's one batched read
    run.plans, run.wrote, run.reboot, run.invalidates

Round trips of a role that changes something: one write script (cut where a
plan streams data), one re-read to confirm, one for its handlers; a role with
nothing to do costs none.  Its results go to the host's :class:`HostResult`
in the role's order.  :class:`bringup.engine.runner.HostRun` makes one per role.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Callable

from ..ssh.connection import RunResult
from ..errors import BringupError, said
from ..resources.base import Plan
from .results import HostResult, ResourceResult, jsonable
from ..ssh.script import READ_LANES, SECTION_MAX, Section, batch, split

if TYPE_CHECKING:
    from ..ssh.connection import Transport
    from .pending import PendingHandlers
    from ..resources.base import Resource
    from .roles import HostContext, Role

__all__ = ["RoleRun", "read", "plan_of", "apply", "OWED"]

#: Why a handler runs that nothing in this run notified.
OWED = "pending from an interrupted run"


def _reads(resources: list[Resource]) -> list[tuple[list[int], str, Callable[[str], list[str]] | None]]:
    """The read script's snippets: each resource's own read, or, for a class that reads several at once
    (``Resource.read_together``), one for all of them at the first one's place: ``(indexes, snippet, splitter)``."""
    of: dict[type, list[int]] = {}
    for i, r in enumerate(resources):
        of.setdefault(type(r), []).append(i)
    out: list[tuple[list[int], str, Callable[[str], list[str]] | None]] = []
    done: set[int] = set()
    for i, r in enumerate(resources):
        if i in done:
            continue
        members = of[type(r)]
        together = getattr(type(r), "read_together", None)
        both = together([resources[j] for j in members]) if together is not None and len(members) > 1 else None
        if both is None:
            out.append(([i], r.read(), None))
            done.add(i)
        else:
            out.append((members, *both))
            done.update(members)
    return out


def read(t: Transport, resources: list[Resource], keep: str | None = None) -> list[str | None]:
    """Read the current state of ``resources`` in one round trip; ``keep``: the run's first read, kept on the host
    under this key, whose next run with the same key reads it ahead with its facts (``Transport.run_script``):
    no round trip of its own where it is the same script."""
    if not resources:
        return []
    reads = _reads(resources)
    first = [resources[idx[0]] for idx, _, _ in reads]
    script, token = batch([(r.id, snippet) for r, (_, snippet, _) in zip(first, reads)], lanes=READ_LANES,
                          token=t.read_token if keep is not None else None,
                          in_shell={k for k, (idx, _, _) in enumerate(reads)
                                    if not all(resources[i].read_alongside for i in idx)},
                          small={k for k, (idx, _, _) in enumerate(reads) if resources[idx[0]].read_small},
                          section_max=SECTION_MAX)
    res = t.run_script(script, keep=keep)
    # A read cut at its bound (rc None) is unreadable: its resource (or the resources read together) fail alone.
    secs = split(res.stdout, token, [r.id for r in first], section_max=SECTION_MAX)
    outputs: list[str | None] = [None] * len(resources)
    for (idx, _, split_), sec in zip(reads, secs):
        if sec.rc is None:
            continue
        if split_ is None:
            outputs[idx[0]] = sec.output
            continue
        try:
            each = split_(sec.output)
        except ValueError:
            continue
        if len(each) == len(idx):
            for i, o in zip(idx, each):
                outputs[i] = o
    return outputs


def plan_of(r: Resource, out: str | None) -> Plan:
    """``r``'s plan from its read output; an unreadable or unplannable state is a failed plan."""
    if out is None:
        return Plan.fail("its state could not be read (the read script stopped early)")
    try:
        return r.plan(out)
    except BringupError as e:
        return Plan.fail(str(e))


def apply(t: Transport, keys: list[str], plans: list[Plan]) -> tuple[list[Section], RunResult]:
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


class RoleRun:
    """One role on one host: plan, apply, confirm, handlers, verify.

    Handlers an earlier run owed (``owed``) run even when nothing changes;
    before writing, the handlers the writes will owe are recorded on the host.
    """

    def __init__(self, role: Role, ctx: HostContext, resources: list[Resource], transport: Transport,
                 result: HostResult, owed: PendingHandlers, *, check: bool = False,
                 progress: Callable[[str, str], None] = lambda h, s: None):
        self.role, self.ctx, self.resources, self.t = role, ctx, resources, transport
        self.result, self.owed, self.check, self.progress = result, owed, check, progress
        #: The plans of the role's resources, in order (set by :meth:`run`).
        self.plans: list[Plan] = []
        #: Whether the role wrote something on the host (its later roles' reads are stale).
        self.wrote = False
        #: Facts that the changes made stale (``Plan.invalidates`` of each resource that changed).
        self.invalidates: tuple[str, ...] = ()
        self._done: dict[int, ResourceResult] = {}  # by resource index: reported in the role's order

    @property
    def reboot(self) -> str | None:
        """Why the host must reboot before the role's state takes effect (its plans' reasons), or None."""
        return "; ".join(dict.fromkeys(p.reboot for p in self.plans if p.reboot)) or None

    def run(self, current: list[str | None]) -> bool:
        """Plan from ``current`` (each resource's read output) and apply; True when the host must stop here."""
        name, resources = self.role.name, self.resources
        self.plans = plans = [plan_of(r, out) for r, out in zip(resources, current)]
        if any(p.error for p in plans):
            # Nothing of a role with an unplannable resource is applied.
            for i, (r, p) in enumerate(zip(resources, plans)):
                self._done[i] = ResourceResult(name, r.id, "failed", error=p.error) if p.error else \
                    ResourceResult(name, r.id, "skipped", reason="not run: another resource of the role failed")
            self._record()
            # Check mode writes nothing, so later roles cannot depend on this one: plan them too.
            return not self.check
        todo = [i for i, p in enumerate(plans) if p.changed and not p.skipped]
        for i, (r, p) in enumerate(zip(resources, plans)):
            if i not in todo:
                self._done[i] = ResourceResult(name, r.id, "skipped" if p.skipped else "ok", reason=p.reason)
        if self.check or not todo:
            self._without_writes(todo)
            return False
        applied = self._apply(todo)
        notified = self._confirm(applied)
        self._live_not_persisted()
        self._record()
        if notified or self.owed.earlier(name):
            self._handlers(notified)
        if self.role.has_verify:
            self._verify()
        self.wrote = True
        return any(x.status == "failed" for x in self.result.resources)

    def _live_not_persisted(self) -> None:
        """A role that failed after a live-only change (a /proc value set, its file not written): the host keeps
        live settings that a reboot would lose; the recap and the report name them."""
        if any(d.status == "failed" for d in self._done.values()):
            self.result.live_not_persisted.extend(
                k for i, d in sorted(self._done.items())
                if d.status == "changed" and self.resources[i].live_only for k in d.changes)

    def _record(self) -> None:
        self.result.resources.extend(self._done[i] for i in sorted(self._done))

    def _without_writes(self, todo: list[int]) -> None:
        """Check mode, or nothing to change: what would change is reported; handlers an earlier run owed run."""
        name, plans = self.role.name, self.plans
        for i in todo:
            self._done[i] = ResourceResult(name, self.resources[i].id, "changed", changes=jsonable(plans[i].changes),
                                           diff=plans[i].diff, reason="check mode: would change")
        self._record()
        if self.owed.earlier(name):
            if self.check:
                self.result.resources.extend(ResourceResult(name, f"handler:{n}", "changed",
                                                            reason=f"check mode: would run, {OWED}")
                                             for n in self.owed.earlier(name))
            else:
                self._handlers([])

    def _apply(self, todo: list[int]) -> list[int]:
        """Write the changes of ``todo`` (resource indexes) in order; returns the indexes whose step succeeded."""
        name, resources, plans = self.role.name, self.resources, self.plans
        self.progress(self.ctx.name, f"{name}: applying {len(todo)} change(s)")
        secs, res = apply(self.t, [resources[i].id for i in todo],
                          self._owing([resources[i] for i in todo], [plans[i] for i in todo]))
        step_failed = any(sec.rc not in (0, None) for sec in secs)
        applied: list[int] = []
        for i, sec in zip(todo, secs):
            r, p = resources[i], plans[i]
            if sec.rc == 0:
                applied.append(i)
            elif sec.rc is None and step_failed:
                self._done[i] = ResourceResult(name, r.id, "skipped",
                                               reason="not run: an earlier step of the role failed")
            elif sec.rc is None:
                self._done[i] = ResourceResult(name, r.id, "failed",
                                               error=f"the write script stopped (exit {res.rc}): {said(res.stderr, 300)}")
            else:
                self._done[i] = ResourceResult(name, r.id, "failed", changes=jsonable(p.changes),
                                               error=f"exit {sec.rc}: {said(sec.output)}")
        return applied

    def _confirm(self, applied: list[int]) -> list[str]:
        """Re-read what was applied: a resource that still wants changes did not converge.  Returns the
        handlers the changes notified, in order."""
        name = self.role.name
        self.progress(self.ctx.name, f"{name}: verifying")
        notified: list[str] = []
        stale: list[str] = []
        for i, out in zip(applied, read(self.t, [self.resources[i] for i in applied])):
            r, p = self.resources[i], self.plans[i]
            again = plan_of(r, out)
            if again.error or (again.changed and not again.skipped):
                self._done[i] = ResourceResult(name, r.id, "failed", changes=jsonable(p.changes), error=again.error or
                                               f"did not converge: still wants {jsonable(again.changes)}")
                continue
            if again.skipped:  # applying showed it cannot apply here (a refusal the write recorded)
                self._done[i] = ResourceResult(name, r.id, "skipped", reason=again.reason)
                continue
            self._done[i] = ResourceResult(name, r.id, "changed", changes=jsonable(p.changes), diff=p.diff)
            stale.extend(p.invalidates)
            if p.notifies:
                notified.extend(n for n in r.notify if n not in notified)
        self.invalidates = tuple(dict.fromkeys(stale))
        return notified

    def _owing(self, resources: list[Resource], plans: list[Plan]) -> list[Plan]:
        """``plans`` with the handlers they will owe recorded on the host before the first write that notifies."""
        names = list(dict.fromkeys(n for r, p in zip(resources, plans) if p.notifies for n in r.notify))
        first = next((i for i, (r, p) in enumerate(zip(resources, plans)) if r.notify and p.notifies), None)
        record = self.owed.owe(self.role.name, names) if names else ""
        if not record or first is None:
            return plans
        out = list(plans)
        cmds, k = plans[first].commands, plans[first].checks
        out[first] = replace(plans[first], commands=[*cmds[:k], record, *cmds[k:]])
        return out

    def _handlers(self, names: list[str]) -> None:
        """Run each notified handler of the role, and those an earlier run owed, once, in the role's order.

        When they all ran, the same script removes them from the host's pending file.
        """
        role, result, owed = self.role, self.result, self.owed
        handlers = role.handlers(self.ctx)
        unknown = [n for n in names if n not in handlers]
        if unknown:
            raise BringupError(f"role {role.name}: notify names unknown handler(s) {', '.join(unknown)}")
        earlier = owed.earlier(role.name)
        for n in earlier:
            if n not in handlers:
                result.resources.append(ResourceResult(role.name, f"handler:{n}", "skipped",
                                                       reason=f"{OWED}, but the role no longer declares it: dropped"))
        ordered = [n for n in handlers if n in names or n in earlier]
        settle = owed.settled(role.name, earlier + ordered)
        keys = ordered + (["pending-handlers"] if settle else [])
        script, token = batch([(n, "\n".join(handlers[n])) for n in ordered] + ([(keys[-1], settle)] if settle else []),
                              stop_on_error=True, stderr="merge")
        res = self.t.run_script(script)
        secs = split(res.stdout, token, keys)
        for n, s in zip(ordered, secs):
            rid = f"handler:{n}"
            if s.rc == 0:
                result.handlers.append(n)
                result.resources.append(ResourceResult(role.name, rid, "changed",
                                                       reason="notified" if n in names else OWED))
            else:
                result.resources.append(ResourceResult(role.name, rid, "failed",
                                                       error=f"exit {s.rc}: {said(s.output)}"))
        if settle and secs[-1].rc == 0:
            owed.forget(role.name, earlier + ordered)
        elif settle and all(s.rc == 0 for s in secs[:-1]):
            result.resources.append(ResourceResult(role.name, "pending-handlers", "failed",
                                                   error=f"the handlers ran, but {owed.path} could not be updated "
                                                         f"(they run again next time): {said(secs[-1].output, 300)}"))

    def _verify(self) -> None:
        """After the role wrote something: its ``verify``; on failure its ``rollback``, then report both.

        Runs even when a write step failed: a half-applied revision is what a
        rollback is for.  One result, ``verify:<role>``, says what happened.
        """
        role = self.role
        rid = f"verify:{role.name}"
        try:
            note = role.verify(self.ctx, self.t)
        except BringupError as e:
            error = str(e)
            if role.has_rollback:
                try:
                    error += f"; rolled back: {role.rollback(self.ctx, self.t)}"
                except BringupError as e2:
                    error += f"; rollback failed: {e2}"
            self.result.resources.append(ResourceResult(role.name, rid, "failed", error=error))
        else:
            self.result.resources.append(ResourceResult(role.name, rid, "ok", reason=note or "verified"))
