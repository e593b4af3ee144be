"""``invoke accept``: measured acceptance of GPU hosts (:mod:`bringup.acceptance`): copy bandwidths against the
link's and the part's limits, GPU pairs, clocks under a short load, DCGM diagnostics; the checklist's pages.

Never run by a plain ``checklist`` (which shows the newest saved result).  Refuses, before anything is loaded,
while Triton serves requests on a host, unless ``--force``.
"""
from __future__ import annotations

from pathlib import Path

from invoke import Exit

from ..errors import BringupError, InputError, Unreachable
from ..outfile import write_atomic
from .context import REPEATED, SELECTION, fail, failing, options
from .context import task  # Invoke's @task, an empty flag value refused first

__all__ = ["accept"]

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


@task(iterable=REPEATED, auto_shortflags=False, help=options(*SELECTION, "accept-new-host-keys") | {
    "seconds": f"seconds of the load on every GPU at once (default 10, at most {MAX_SECONDS})",
    "dcgm-level": "dcgmi diag level: 0 off, 1 quick (default where dcgmi exists), 2 medium, 3 long",
    "force": "run even while Triton serves requests on the host (the load slows them, and the figures)",
    "out": "folder for the results and the Markdown, HTML and JSON pages (default reports/accept)",
    "prometheus": "also write the results as Prometheus text to FILE (*.prom, for the textfile collector)"})
def accept(c, host=None, hosts=None, group=None, inventory=None, set_=None, seconds="10", dcgm_level=None,
           force=False, out="reports/accept", prometheus=None, accept_new_host_keys=False,
           vault_password_file=None, vault_id=None):
    """Measured acceptance: per GPU H2D/D2H/memory bandwidth vs limits, P2P, clocks under load, DCGM diag."""
    from ..checklist import render_html, render_json, render_markdown, verdict
    from ..latency.options import out_folder
    from .context import console as new_console
    from .context import prepared

    console = new_console()
    with failing():
        secs, level = _seconds(seconds), _level(dcgm_level)
        out_dir = out_folder(out)
        from ..acceptance.saved import check_prometheus_path

        prom = check_prometheus_path(prometheus) if prometheus else None
        _, chosen, _, _, role_vars = prepared(inventory, set_, host, hosts, group, "triton",
                                              vault=(vault_password_file, vault_id))
        from ..acceptance.limits import thresholds
        from ..checklist import page_name

        for h in chosen:
            thresholds(role_vars[h.name])  # bad accept_thresholds: one line before anything connects
            page_name(h.name)
    hosts_ = {h.name: h for h in chosen}
    conns, facts, untrusted, pre, results = {}, {}, {}, {}, {}
    try:
        for name, h in hosts_.items():
            try:
                conns[name], facts[name], untrusted[name], pre[name] = _preflight(h, role_vars[name],
                                                                                  accept_new_host_keys)
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
                                                  level, pre[name], out_dir)
    finally:
        for t in conns.values():
            t.close()
    for name, lines in results.items():
        console.print(render_markdown(name, lines), markup=False, highlight=False)
        try:
            write_atomic(out_dir / f"{name}.md", render_markdown(name, lines), errors="backslashreplace")
            write_atomic(out_dir / f"{name}.html", render_html(name, lines, ""), errors="backslashreplace")
            write_atomic(out_dir / f"{name}.json", render_json(name, lines), errors="backslashreplace")
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


def _refused(e: Exception):
    from ..checks import line

    return line("acceptance", "host ready", "FAIL", " ".join(str(e).split()),
                "fix what the line names (become password, a run in progress), then run accept again")


def _unreachable(e: Exception):
    from ..checks import line

    return line("acceptance", "host reachable", "FAIL", str(e), "fix SSH access, then run accept again")


def _preflight(h, vars: dict, accept_new_host_keys: bool):
    """Connect, gather the facts the judge reads, and the preflight's reads; the transport is the caller's."""
    from ..acceptance.remote import preflight
    from ..connection import connect
    from ..facts import FACTS_BY_NAME
    from ..facts.gather import gather

    t = connect(h, accept_new_host_keys=accept_new_host_keys)
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

    return refusal(p.metrics_first, p.metrics_second, p.apps, _metrics_port(vars), window_s=WINDOW_S)


def _want_level(level: int | None, p) -> int:
    if level is None:
        return 1 if p.dcgmi else 0
    return level


def _measure(t, name: str, facts: dict, errors: dict, vars: dict, secs: float, level: int | None, p,
             out_dir: Path):
    """The probe, the judge, DCGM; the lines and the time they were saved (Unix time).  ``errors``: the facts
    the parsers did not trust."""
    from datetime import datetime, timezone

    from ..acceptance.dcgm import dcgm_lines
    from ..acceptance.judge import judge
    from ..acceptance.remote import run_dcgmi, run_probe
    from ..acceptance.saved import save

    gpus = len(facts.get("nvidia.smi") or []) or 1
    if not p.python:
        doc = {"probe": 1, "error": "python3 not found on the host: the probe needs Python 3 (apt-get install "
                                    "python3)", "gpus": [], "pairs": [], "load": None}
    else:
        try:
            doc = run_probe(t, seconds=secs, gpus=gpus)
        except Unreachable as e:
            doc = {"probe": 1, "error": f"the probe's connection was lost: {e}", "gpus": [], "pairs": [],
                   "load": None}
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
            try:
                rc, out_, err = run_dcgmi(t, want)
            except Unreachable as e:
                rc, out_, err = 124, "", str(e)
            dcgm.update(rc=rc, stdout=out_[-200_000:], stderr=err[-20_000:])
        bus = {str(g.get("index")): g.get("pci_bus_id") for g in facts.get("nvidia.smi") or []
               if g.get("pci_bus_id")}
        lines += dcgm_lines(want or 1, p.dcgmi, rc, out_ or "", err or "", bus)
    when = datetime.now(timezone.utc)
    try:
        save(name, {"seconds": secs, "probe": doc, "dcgm": dcgm}, lines, out_dir, when)
    except OSError as e:
        raise fail(f"--out {out_dir}: {e.strerror or e}: the result of {name} could not be saved") from None
    return lines, when.timestamp()
