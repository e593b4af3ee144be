"""``invoke accept``: measured acceptance of GPU hosts (:mod:`bringup.acceptance`): copy bandwidths against the
link's and the part's limits, GPU pairs, clocks under a short load, DCGM diagnostics; the checklist's pages.

Never run by a plain ``checklist`` (which shows the newest saved result).  Refuses, before anything is loaded,
while Triton serves requests on a host, unless ``--force``.

Ctrl-C (SIGINT), SIGTERM or SIGHUP (the operator's terminal gone) ends it at once: the GPU load in flight is
killed on its host, process group and all, through a round trip of its own that then looks again
(:func:`bringup.acceptance.remote.stop_load`); one line says so, nothing is saved, the exit code is the signal's
(130, 143, 129).
"""
from __future__ import annotations

import functools
import signal
import threading
from pathlib import Path

from invoke import Exit

from ..errors import BringupError, InputError, Unreachable
from ..outfile import write_set
from .context import REPEATED, SELECTION, fail, failing, options
from .context import task  # Invoke's @task, an empty flag value refused first

__all__ = ["accept"]

#: What a signal ends now (:func:`_own_signals`): "start" (nothing loaded yet), "load" (a load may run on a host:
#: :class:`_Signalled` lets the task stop it), "pages" (the loads are over).
_PHASE = ["start"]

#: The longest load (seconds): acceptance is bounded in time.
MAX_SECONDS = 120
#: The facts the judge reads.
FACTS = ("nvidia.query", "nvidia.smi", "nvidia.topo")


def _seconds(text) -> float:
    from ..latency.options import number

    return number(text, "--seconds", lo=1, hi=MAX_SECONDS, unit="s")


def _level(text) -> int | None:
    if text is None or str(text).strip() == "":
        return None
    t = str(text).strip()
    if t not in ("0", "1", "2", "3"):
        raise InputError(f"--dcgm-level {text!r}: 0 (off), 1 (quick), 2 (medium) or 3 (long)")
    return int(t)


class _Signalled(BaseException):
    """SIGINT or SIGTERM came while a load may run: the task stops it and ends (a BaseException: no ``except
    Exception`` swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


#: The signals that end the task, its GPU load stopped first: Ctrl-C, SIGTERM, and SIGHUP (the operator's terminal
#: or SSH session gone: Python's default ended bringup on the spot and left the load running its whole bound).
_ENDING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _own_signals(body):
    """The task with SIGINT/SIGTERM/SIGHUP its own (the handlers before are back on return): the first signal ends
    it at once, wherever the main thread waits (a round trip to a host), in one line with the signal's exit code;
    while a load may run (:data:`_PHASE`) it raises :class:`_Signalled`, whose handler stops the load first.
    Later signals are ignored while that is done (bounded: :data:`~bringup.acceptance.remote.STOP_S`), and still
    ignored once the task has ended by one: the program is ending, and a second Ctrl-C in its last moments raised
    KeyboardInterrupt in the interpreter's teardown (a traceback after the one line)."""

    @functools.wraps(body)
    def run(*a, **kw):
        if threading.current_thread() is not threading.main_thread():
            return body(*a, **kw)
        came: list[int] = []

        def handle(signum, _frame) -> None:
            came.append(signum)
            for s_ in _ENDING:
                signal.signal(s_, signal.SIG_IGN)
            name = signal.Signals(signum).name
            if _PHASE[0] == "load":
                raise _Signalled(signum)
            if _PHASE[0] == "start":
                raise Exit(f"{name}: acceptance stopped before any GPU load started; nothing saved",
                           code=128 + signum)
            raise Exit(f"{name}: acceptance stopped after its loads ended (no load runs on any host); its pages "
                       "may be incomplete: run accept again", code=128 + signum)

        # A signal the operator's shell ignores stays ignored: `nohup bringup accept ...` must go on past a dropped
        # session, as it did before SIGHUP was taken here.
        before = {s_: signal.signal(s_, handle) for s_ in _ENDING if signal.getsignal(s_) is not signal.SIG_IGN}
        _PHASE[0] = "start"
        try:
            return body(*a, **kw)
        finally:
            for s_, h in before.items() if not came else ():
                signal.signal(s_, h)

    return run


@task(iterable=REPEATED, auto_shortflags=False, help=options(*SELECTION, "accept-new-host-keys") | {
    "seconds": f"seconds of the load on every GPU at once (default 10, at most {MAX_SECONDS})",
    "dcgm-level": "dcgmi diag level: 0 off, 1 quick (default where dcgmi exists), 2 medium, 3 long",
    "force": "run even while Triton serves requests on the host (the load slows them, and the figures)",
    "out": "folder for the results and the Markdown, HTML and JSON pages (default reports/accept)",
    "prometheus": "also write the results as Prometheus text to FILE (*.prom, for the textfile collector)"})
@_own_signals
def accept(c, host=None, hosts=None, group=None, inventory=None, set_=None, seconds="10", dcgm_level=None,
           force=False, out="reports/accept", prometheus=None, accept_new_host_keys=False,
           vault_password_file=None, vault_id=None):
    """Measured acceptance: per GPU H2D/D2H/memory bandwidth vs limits, P2P, clocks under load, DCGM diag."""
    from ..checklist.pages import render_html, render_json, render_markdown, verdict
    from ..latency.options import out_folder
    from .context import console as new_console
    from .context import prepared

    console = new_console()
    with failing():
        secs, level = _seconds(seconds), _level(dcgm_level)
        out_dir = out_folder(out)
        from ..acceptance.saved import check_prometheus_path

        prom = check_prometheus_path(prometheus) if prometheus else None
        from ..ssh.sshconfig import Routes

        routes = Routes()  # each host's route worked out once: checked, then connected with
        _, chosen, _, _, role_vars = prepared(inventory, set_, host, hosts, group, "triton",
                                              vault=(vault_password_file, vault_id), routes=routes)
        from ..acceptance.limits import thresholds
        from ..checklist.pages import page_name

        for h in chosen:
            thresholds(role_vars[h.name])  # bad accept_thresholds: one line before anything connects
            page_name(h.name)
    hosts_ = {h.name: h for h in chosen}
    conns, facts, untrusted, pre, results = {}, {}, {}, {}, {}
    loading: dict = {}  # {host: its load's tag} while a load may run there
    _PHASE[0] = "load"
    try:
        for name, h in hosts_.items():
            try:
                conns[name], facts[name], untrusted[name], pre[name] = _preflight(h, role_vars[name],
                                                                                  accept_new_host_keys, routes)
            except Unreachable as e:
                results[name] = [_unreachable(e)]
            except BringupError as e:
                # This host alone (a refused become password, its run lock held): its FAIL line, the others go on.
                results[name] = [_refused(e)]
        refused = [] if force else [(n, why) for n, why in ((n, _refusal(role_vars[n], p)) for n, p in pre.items())
                                    if why]
        if refused:
            # One line, nothing loaded on any host.
            n, why = refused[0]
            more = f" (and {len(refused) - 1} more host(s))" if len(refused) > 1 else ""
            raise Exit(f"error: {n}: {why}{more}: an acceptance load now would slow the requests and measure less "
                       "than the hardware gives; drain the host first, or pass --force", code=1)
        saved = {}
        for name, t in conns.items():
            console.print(f"accept {name}: {len(facts[name].get('nvidia.smi') or [])} GPU(s), {secs:g} s of load"
                          + (f", dcgmi diag -r {_want_level(level, pre[name])}" if _want_level(level, pre[name])
                             else ""), style="dim")
            results[name], saved[name] = _measure(t, name, facts[name], untrusted[name], role_vars[name], secs,
                                                  level, pre[name], out_dir, loading)
    except _Signalled as e:
        raise Exit(_stopped(e.signum, conns, loading), code=128 + e.signum) from None
    finally:
        _PHASE[0] = "pages"
        for t in conns.values():
            t.close()
    for name, lines in results.items():
        console.print(render_markdown(name, lines, terminal=True), markup=False, highlight=False)
        try:
            # Made here too: an unreachable host's FAIL page is written into a folder no measurement made yet.
            out_dir.mkdir(parents=True, exist_ok=True)
            write_set([(out_dir / f"{name}.md", render_markdown(name, lines)),
                       (out_dir / f"{name}.html", render_html(name, lines, "")),
                       (out_dir / f"{name}.json", render_json(name, lines))], errors="backslashreplace")
        except BringupError as e:  # a folder under a page's name: none of the host's pages written
            raise fail(e) from None
        except OSError as e:
            raise fail(f"--out {out_dir}: {e.strerror or e}") from None
    if prom is not None:
        from ..acceptance.saved import write_prometheus

        try:
            write_prometheus({n: (ls, saved.get(n, 0.0)) for n, ls in results.items() if n in saved}, prom)
        except OSError as e:
            raise fail(f"--prometheus {prom}: {e.strerror or e}") from None
    console.print(f"acceptance pages: {out_dir}/", style="dim")
    if any(verdict(ls) == "FAIL" for ls in results.values()):
        raise Exit(code=2)


def _stopped(signum: int, conns: dict, loading: dict) -> str:
    """Stop the load in flight on its host (killed, then looked for again); the task's one line."""
    from ..acceptance.remote import STOP_S, TAG_ENV, stop_load

    name = signal.Signals(signum).name
    if not loading:
        return f"{name}: acceptance stopped; no GPU load was running on any host; nothing saved"
    said = []
    for host, tag in loading.items():
        t = conns.get(host)
        try:
            if t is None:
                raise Unreachable("no connection")
            done = stop_load(t, tag)
        except (BringupError, ValueError, OSError) as e:
            said.append(f"{host}: the GPU load could not be stopped ({' '.join(str(e).split())[:200]}): it ends by "
                        f"itself at its bound on the host; to end it now, kill the processes whose environment holds "
                        f"{TAG_ENV}={tag}")
            continue
        if done.left:
            said.append(f"{host}: {done.left} process(es) of the GPU load still there {STOP_S} s after SIGKILL "
                        f"(stuck in the driver?): see the processes whose environment holds {TAG_ENV}={tag}")
        else:
            said.append(f"{host}: GPU load stopped ({done.killed} process(es) and their process group killed, none "
                        "left)")
    return f"{name}: acceptance stopped; " + "; ".join(said) + "; nothing saved"


def _refused(e: Exception):
    from ..checks import line

    return line("acceptance", "host ready", "FAIL", " ".join(str(e).split()),
                "fix what the line names (become password, a run in progress), then run accept again")


def _unreachable(e: Exception):
    from ..checks import line

    return line("acceptance", "host reachable", "FAIL", str(e), "fix SSH access, then run accept again")


def _preflight(h, vars: dict, accept_new_host_keys: bool, routes=None):
    """Connect, gather the facts the judge reads, and the preflight's reads; the transport is the caller's."""
    from ..acceptance.remote import preflight
    from ..ssh.connection import connect
    from ..facts import FACTS_BY_NAME
    from ..facts.gather import gather

    t = connect(h, accept_new_host_keys=accept_new_host_keys, routes=routes)
    try:
        facts, errors = gather(t, [FACTS_BY_NAME[n] for n in FACTS])
        return t, facts, errors, preflight(t, _metrics_port(vars))
    except BaseException:
        t.close()
        raise


def _metrics_port(vars: dict) -> int:
    ports = vars.get("triton_ports") or {}
    try:
        return int(ports.get("metrics", 8002))
    except (TypeError, ValueError):
        return 8002


def _refusal(vars: dict, p) -> str | None:
    from ..acceptance.remote import WINDOW_S
    from ..acceptance.serving import refusal

    why = refusal(p.metrics_first, p.metrics_second, p.apps, _metrics_port(vars), window_s=WINDOW_S)
    if why is None and getattr(p, "apps_problem", ""):  # (a reason found without that list says more)
        return (f"nvidia-smi's list of the GPUs' compute processes {p.apps_problem}, so whether the GPUs are in use "
                "cannot be told")
    return why


def _want_level(level: int | None, p) -> int:
    if level is None:
        return 1 if p.dcgmi else 0
    return level


def _measure(t, name: str, facts: dict, errors: dict, vars: dict, secs: float, level: int | None, p,
             out_dir: Path, loading: dict | None = None):
    """The probe, the judge, DCGM; the lines and the time they were saved (Unix time).  ``errors``: the facts
    the parsers did not trust.  ``loading``: ``{name: tag}`` is in it while a load may run on the host."""
    from datetime import datetime, timezone

    from ..acceptance.dcgm import dcgm_lines
    from ..acceptance.judge import judge
    from ..acceptance.remote import new_tag, run_dcgmi, run_probe
    from ..acceptance.saved import save

    gpus = len(facts.get("nvidia.smi") or []) or 1
    tag = new_tag()
    loading = {} if loading is None else loading
    if not p.python:
        doc = {"probe": 1, "error": "python3 not found on the host: the probe needs Python 3 (apt-get install "
                                    "python3)", "gpus": [], "pairs": [], "load": None}
    else:
        loading[name] = tag
        try:
            doc = run_probe(t, seconds=secs, gpus=gpus, tag=tag)
        except Unreachable as e:
            doc = {"probe": 1, "error": f"the probe's connection was lost: {e}", "gpus": [], "pairs": [],
                   "load": None}
    loading.pop(name, None)
    from ..checks import line

    # A fact the parsers did not trust leaves its limits unknown (the judge's lines say so): named here too.
    try:
        lines = [line("acceptance", f"fact {n}", "WARN", f"not trusted: {why}",
                      "nvidia-smi on the host: is its output whole? The limits it gives are unknown") for n, why in
                 errors.items()] + judge(doc, facts, vars)
    except BringupError as e:
        raise fail(e) from None
    want = _want_level(level, p)
    dcgm = {"level": want, "dcgmi": p.dcgmi}
    if level is None and not p.dcgmi or want:
        rc = out_ = err = None
        if want and p.dcgmi:
            loading[name] = tag
            try:
                rc, out_, err = run_dcgmi(t, want, tag)
            except Unreachable as e:
                rc, out_, err = 124, "", str(e)
            dcgm.update(rc=rc, stdout=out_[-200_000:], stderr=err[-20_000:])
        bus = {str(g.get("index")): g.get("pci_bus_id") for g in facts.get("nvidia.smi") or []
               if g.get("pci_bus_id")}
        loading.pop(name, None)
        lines += dcgm_lines(want or 1, p.dcgmi, rc, out_ or "", err or "", bus)
    when = datetime.now(timezone.utc)
    try:
        save(name, {"seconds": secs, "probe": doc, "dcgm": dcgm}, lines, out_dir, when)
    except BringupError as e:  # a folder under the result's name: one line naming it
        raise fail(e) from None
    except OSError as e:
        raise fail(f"--out {out_dir}: {e.strerror or e}: the result of {name} could not be saved") from None
    return lines, when.timestamp()
