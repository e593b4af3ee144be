"""The rack bring-up checklist: is this host fit for low-latency inference?

Each line is a :class:`Check`: PASS / WARN / FAIL, what was seen, and a
one-line fix.  The lines come from the host's facts (gathered in one round
trip), the version matrix in ``bringup/data/version_matrix.yaml``, the
platform rules of :mod:`bringup.hardware.platform` when present, and a check-mode plan
of the roles (pending changes mean the host has drifted from the inventory).
"""
from __future__ import annotations

import re
from collections import Counter

from ..hardware import health
from .html import render_group_html, render_html
from ..checks import Check, dated_ahead, line, line_json, load_matrix, not_checked, summary_counts, verdict, worst_first
from ..hardware.gpu import UNREACHABLE_FIX, nvml_failure, nvml_fix, smi_unreachable
from ..outfile import write_set
from ..process import command
from ..secrets import MASK

__all__ = ["Check", "load_matrix", "line", "gpu_checks", "role_checks", "tuning_checks", "collect",
           "render_markdown", "render_html", "render_json", "render_group_html", "summary_counts"]


def _gpus(facts: dict) -> list[dict]:
    return [d for d in (facts.get("pci.devices") or []) if d.get("kind") == "gpu"]


def gpu_checks(facts: dict, vars: dict, fact_errors: dict | None = None) -> list[Check]:
    """GPUs present, of the profile's class (``gpu_profile``; ``auto``: the class nvidia-smi shows) and count,
    seen by the driver; the profile's values with where they come from; MIG instances.  A fact that could not
    be read (``fact_errors``) makes the lines that need it "not checked", never a verdict on the hardware."""
    from ..errors import InputError
    from ..hardware.gpu_profiles import AUTO, detect, inventory_matches, matches, table

    asked = vars.get("gpu_profile", AUTO)
    smi = facts.get("nvidia.smi") or []
    # Without a PCI listing, the driver's list is all there is to count.
    gpus = _gpus(facts) if "pci.devices" in facts else [
        {"address": g.get("pci_address", "?")} for g in smi]
    unread_pci = not_checked("gpu", "GPU count", ("pci.devices",), fact_errors)
    unread_smi = not_checked("gpu", "driver sees the GPUs", ("nvidia.smi",), fact_errors)
    if unread_pci is not None:
        # The PCI listing was lost, not the GPUs: no count is judged, the driver's list is said.
        unread_pci.seen += f" (nvidia-smi lists {len(smi)} GPU(s))" if unread_smi is None else ""
        gpus = [{"address": g.get("pci_address", "?")} for g in smi]
    try:
        profiles = table(vars)
    except InputError as e:
        return [line("gpu", "GPU profiles", "FAIL", str(e), "fix gpu_profiles in the inventory")]
    found = detect(facts, profiles, inventory_matches(vars))
    problem = found.problem()
    name = found.one if asked == AUTO else asked
    profile = profiles.get(name) if name else None
    auto = " (gpu_profile auto)" if asked == AUTO else ""
    # The profile's name as a line's name says it: ******** when the inventory's value is a vault's (a line's name
    # is not masked as its seen and fix are: a short secret would hide 'GPU 1' in every name).
    said = MASK.mask_value(name) if isinstance(name, str) else name
    # What to set when the inventory's profile is not the GPUs' class: a profile that exists, by name.
    if found.one and found.one != "cpu":
        set_it = f"set gpu_profile: {found.one} (the class nvidia-smi shows) or {AUTO} in the inventory"
    elif problem:
        set_it = problem[1]
    else:
        set_it = (f"install the driver ({command('provision --roles nvidia_driver')}), then set gpu_profile: {AUTO} "
                  "(the class is read from nvidia-smi)")
    out: list[Check] = []
    unread_class = not_checked("gpu", "GPU class (gpu_profile auto)", ("nvidia.smi",), fact_errors)
    if asked == AUTO and unread_class is not None:
        out.append(unread_class)
    elif asked == AUTO and problem:
        out.append(line("gpu", "GPU class (gpu_profile auto)", "WARN" if found.unlisted else "FAIL", *problem))
    if profile is not None and profile.kind == "KIND_CPU":
        if unread_pci is not None:
            return out + [unread_pci]
        status = "PASS" if not gpus else "WARN"
        out.append(line("gpu", f"GPUs for the {name} profile", status,
                        f"{len(gpus)} NVIDIA GPU(s) on the PCI bus{auto}", "" if not gpus else set_it))
        return out
    if unread_pci is not None and (unread_smi is not None or not smi):
        return out + [unread_pci] + ([unread_smi] if unread_smi else [])
    if not gpus:
        return out + [line("gpu", "GPUs present", "FAIL", "no NVIDIA device (vendor 0x10de) on the PCI bus",
                           f"seat the GPUs or fix gpu_profile ({name}) in the inventory")]
    want = vars.get("gpu_count")
    seen = f"{len(gpus)} on the PCI bus: " + ", ".join(g["address"] for g in gpus)
    if unread_pci is not None:
        out.append(unread_pci)
    elif want is not None and int(want) != len(gpus):
        out.append(line("gpu", "GPU count", "FAIL", f"{seen}; inventory says gpu_count={want}",
                         "reseat or replace the missing GPU, or correct gpu_count"))
    else:
        out.append(line("gpu", "GPU count", "PASS", seen))
    # nvidia-smi said it cannot reach a GPU (-q, or --query-gpu in place of its list): a GPU fault, in its words.
    lost = smi_unreachable(facts, fact_errors)
    if unread_smi is not None and not lost:
        return out + [unread_smi]
    if not smi and lost:
        out.append(line("gpu", "driver sees the GPUs", "FAIL", lost, UNREACHABLE_FIX))
        return out
    if not smi:
        install = "install the driver: " + command("provision --roles nvidia_driver")
        failed = nvml_failure(facts)
        out.append(line("gpu", "driver sees the GPUs", "FAIL", "nvidia-smi absent or printed nothing" if not failed
                        else f"nvidia-smi: Failed to initialize NVML: {failed['nvml_error']}",
                        install if not failed else nvml_fix(failed, install)))
        return out
    names = sorted({g.get("name", "?") for g in smi})
    # Without the PCI listing there is no count to hold the driver's list against (the GPU count line says so).
    if unread_pci is None and len(smi) != len(gpus):
        out.append(line("gpu", "driver sees the GPUs", "FAIL", f"nvidia-smi lists {len(smi)} of {len(gpus)}"
                        + (f"; {lost}" if lost else ""), "check dmesg for NVRM/Xid errors; reseat the card"))
    elif unread_pci is None:
        out.append(line("gpu", "driver sees the GPUs", "PASS", f"{len(smi)} × {', '.join(names)}"))
    if profile is None:
        return out + _mig_lines(facts, name, fact_errors)
    if profile.match is not None:
        ok = all(matches(profile.match, g) for g in smi)
        out.append(line("gpu", f"GPU class matches gpu_profile {said}", "PASS" if ok else "WARN",
                         ", ".join(names) + auto, "" if ok else set_it))
    src = profile.source
    out.append(line("gpu", f"GPU profile {said}", "PASS",
                    f"{profile.instance_count} instance(s) per GPU, preferred batch sizes {profile.preferred_batch_size}"
                    f"{auto}; instances: {src.instance_count}; batch sizes: {src.preferred_batch_size}",
                    "" if _measured(src, (vars.get("gpu_profiles") or {}).get(name)) else
                    f"confirm on this host: {command('bench')}, then {command('tune-window')}; pin what you measured under "
                    f"gpu_profiles.{name}"))
    return out + _mig_lines(facts, name, fact_errors)


def _measured(src, given) -> bool:
    """Whether each value of a profile was measured (the guide's) or set by the inventory (``given``: its
    ``gpu_profiles`` entry): else it is a stated estimate, to be confirmed on the host."""
    given = given if isinstance(given, dict) else {}
    return all(key in given or (getattr(src, key) or "").startswith("the guide")
               for key in ("instance_count", "preferred_batch_size"))


def _mig_lines(facts: dict, profile: str | None, fact_errors: dict | None = None) -> list[Check]:
    """MIG on: how many MIG instances (each a GPU to Triton), and that the profile is for a whole GPU.  The
    MIG mode line itself (a WARN) is the platform's."""
    unread = not_checked("gpu", "MIG instances", ("nvidia.query",), fact_errors)
    if unread is not None:
        return [unread]
    query = [g for g in (facts.get("nvidia.query") or {}).get("gpus") or [] if g.get("mig_mode_current") is True]
    if not query:
        return []
    unreadable = [g["mig_devices_unreadable"] for g in query if g.get("mig_devices_unreadable")]
    if unreadable:  # a cut or garbled MIG device list: named, never counted short
        return [line("gpu", "MIG instances", "WARN", "not checked: nvidia.query's MIG devices unreadable: "
                     + "; ".join(str(u) for u in unreadable),
                     "read the host again (nvidia-smi -q and nvidia-smi -L should list the same MIG devices)")]
    devices = [g.get("mig_devices") for g in query]
    counts = [len(c) if isinstance(c, list) else c for c in devices]
    known = all(isinstance(c, int) and not isinstance(c, bool) for c in counts)
    where = ", ".join(g.get("bus_id") or g.get("pci_address") or "?" for g in query)
    kinds = ""  # the MIG profiles, when the facts list the devices (nvidia-smi -L): " (7 × 1g.10gb)"
    if all(isinstance(c, list) for c in devices) and any(devices):
        per = Counter(str(d.get("profile") or "?") if isinstance(d, dict) else "?" for c in devices for d in c)
        # nvidia-smi -q names no profile (-L does): then the count alone.
        kinds = "" if "?" in per else " (" + ", ".join(f"{n} × {p}" for p, n in sorted(per.items())) + ")"
    seen = (f"MIG on {len(query)} GPU(s) ({where}): "
            + (f"{sum(counts)} MIG instance(s){kinds}" if known else "the MIG instance count is not in the facts"))
    return [line("gpu", "MIG instances", "WARN", seen,
                 f"Triton sees each MIG instance as a GPU: gpu_profile {profile or '?'} is sized for a whole GPU; "
                 "define a profile for the slice under gpu_profiles, or nvidia-smi -mig 0")]


def tuning_checks(host_result) -> list[Check]:
    """From a check-mode plan of the roles: pending changes mean drift from the inventory."""
    out: list[Check] = []
    if host_result is None:
        return out
    if host_result.status == "unreachable":
        return [line("tuning", "roles converged", "FAIL", host_result.message or "unreachable", "fix SSH access")]
    from ..engine.results import role_states

    for role, s in role_states(host_result).items():
        if s.failed:
            out.append(line("tuning", f"role {role}", "FAIL", "; ".join(s.failed),
                             command(f"plan --roles {role}") + " and fix the first error"))
        elif s.pending:
            out.append(line("tuning", f"role {role}", "WARN", f"{len(s.pending)} pending change(s): "
                             + ", ".join(s.pending[:5]) + ("…" if len(s.pending) > 5 else ""),
                             command(f"provision --roles {role}")))
        elif s.skipped:
            # Not applicable is not a pass: the role's state is not there, and the reason says why.
            why = "; ".join(dict.fromkeys(s.skipped))
            done = s.total - len(s.skipped)
            out.append(line("tuning", f"role {role}", "WARN",
                             (f"{done} resource(s) converged, " if done else "")
                             + f"{len(s.skipped)} not applied here: {why}",
                             f"if {role} should run on this host, fix what the reason names; "
                             f"else leave {role} out of its --roles"))
        elif s.unused and len(s.unused) == s.total:
            # The inventory asks this role for nothing here: a choice, not a gap.
            out.append(line("tuning", f"role {role}", "PASS",
                            "not asked for: " + "; ".join(dict.fromkeys(s.unused))))
        else:
            out.append(line("tuning", f"role {role}", "PASS", f"{s.total - len(s.unused)} resources converged"))
    if host_result.message and host_result.status == "failed" and not out:
        out.append(line("tuning", "roles converged", "FAIL", host_result.message, command("plan") + " to see why"))
    return out


def latency_checks(vars: dict, reports=None) -> list[Check]:
    """The latency acceptance line: the host's newest ``invoke bench`` result against ``latency_slo_p95_ms``.

    PASS/FAIL with the median p95 of the repeated windows, the load it was measured at and when
    (:func:`bringup.latency.verdict.acceptance`); WARN when nothing was measured,
    when every point was client-bound, when no SLO is set, when the point is unstable, when the SLO
    lies inside its spread (min-max p95 of the windows) or when it rests on one window (no spread).
    """
    from ..latency.verdict import REPORT_DIR, acceptance, latest

    slo = vars.get("latency_slo_p95_ms")
    host = vars.get("inventory_hostname", "")
    later: list = []
    skipped: list = []
    found = latest(host, reports or REPORT_DIR, passed_over=later, skipped=skipped) if host else None
    name = "latency acceptance (p95)"
    warn = dated_ahead("latency", name, later, "benchmark result(s) finished in the future")
    # A file that is no result (a pipe, /dev/zero, garbage, no time it finished) is skipped, and named.
    bad = (f"{len(skipped)} benchmark file(s) not read: {skipped[0][0]} ({skipped[0][1]})"
           + (f" and {len(skipped) - 1} more" if len(skipped) > 1 else "")) if skipped else ""
    redo = "remove or replace them (bringup writes each result as a regular JSON file); re-run "
    if found is None:
        return warn + [line("latency", name, "WARN", "not measured: no latency benchmark has run on this host"
                            + (f" (SLO {slo} ms)" if slo else "") + (f"; {bad}" if bad else ""),
                            (redo if bad else "") + command(f"bench --host {host}"))]
    if bad:
        warn.append(line("latency", name, "WARN", bad, redo + command(f"bench --host {host}")))
    doc, path = found
    load = vars.get("latency_acceptance_load")
    try:
        acc = acceptance(doc, float(slo) if slo is not None else None, load if isinstance(load, dict) else None)
    except (TypeError, KeyError, AttributeError, ValueError, IndexError) as e:
        # A saved result is only as good as its author: a field of the wrong kind is this file's fault, never a
        # traceback, and never blamed on the facts.
        acc = {"status": "WARN", "kind": "unreadable", "point": None,
               "seen": f"not checked: the saved result is unreadable ({type(e).__name__}: {e})"}
    fix = {"PASS": "", "FAIL": f"tune the batching window ({command('bench --window-us ...')}) or lower the load; "
                   "see the sweep in " + str(path.with_suffix(".png")),
           "WARN": f"set latency_slo_p95_ms, or re-run {command(f'bench --host {host}')} with more client processes"}
    if acc.get("kind") == "single":
        fix["WARN"] = (f"re-run {command(f'bench --host {host} --repeats 3')}: a verdict rests on repeated windows "
                       "and their spread")
    if acc.get("kind") in ("unstable", "inside"):
        fix["WARN"] = (f"re-run {command(f'bench --host {host} --repeats 5')} while nothing else loads the host or "
                       "its client (the spread, not the median, decided this line)")
    point = acc.get("point") or {}
    return warn + [line("latency", name, acc["status"], f"{acc['seen']} ({path})", fix[acc["status"]],
                        value=point.get("p95_ms"), limit=float(slo) if slo is not None else None, unit="ms")]


def platform_checks(facts: dict, host_vars: dict, fact_errors: dict | None = None) -> list[Check]:
    """Firmware and platform rules of :mod:`bringup.hardware.platform`; a fact that could not be trusted is a FAIL."""
    from ..hardware.platform import checks

    return list(checks(facts, host_vars, fact_errors))


def role_checks(roles, name: str, facts: dict, vars: dict, render=None, fact_errors: dict | None = None) -> list[Check]:
    """The lines the roles contribute (a role's optional ``checks(host)``), each reading its declared facts (and
    why one could not be read, ``fact_errors``: ``host.facts.unread(fact)``)."""
    from ..engine.roles import FactView, HostContext

    out: list[Check] = []
    for role in roles:
        out += role.checks(HostContext(name, vars, FactView(facts, role.facts, role.name, fact_errors), render))
    return out


def collect(facts: dict, vars: dict, host_result=None, fact_errors: dict | None = None,
            roles_lines: list[Check] = ()) -> list[Check]:
    """Every checklist line for one host; ``vars`` are the run's merged variables (role defaults included),
    ``roles_lines`` what the selected roles contribute (:func:`role_checks`)."""
    from ..acceptance.saved import checklist_lines as acceptance_checks

    return (platform_checks(facts, vars, fact_errors) + gpu_checks(facts, vars, fact_errors)
            + health.health_checks(facts, vars, fact_errors)
            + list(roles_lines) + tuning_checks(host_result) + latency_checks(vars) + acceptance_checks(vars))


#: The longest "seen" or "fix" text a Markdown row shows; the HTML page and the JSON hold the whole text.
MD_CELL_MAX = 480


#: A "<" that could open HTML in rendered Markdown (CommonMark: a tag name's letter, "/", "!" or "?" after it).
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")
#: Markdown's inline syntax: a backslash, code spans, and the "](" or "][" every link and image needs
#: ("[x](url)", "![x](url)", "[x][ref]"): a "]" escaped there closes no link text, so "[2, 4, 8]" and parentheses,
#: frequent in the lines, stay as they are.  Then runs of "*", "_" or "~" (emphasis, strikethrough).
_MD_SYNTAX = re.compile(r"[\\`]|\](?=[(\[])|(?P<run>\*+|_+|~+)")


def _md_escape(m: re.Match) -> str:
    run = m.group("run")
    if not run:
        return "\\" + m.group(0)
    text, a, b = m.string, m.start(), m.end()
    before, after = text[a - 1:a], text[b:b + 1]
    # A run with a blank (or the text's edge) on both sides opens and closes nothing ("********", a masked
    # secret), nor does "_" between two letters or digits ("nvidia_driver") (CommonMark's flanking rules).
    if (not before.strip() and not after.strip()) or (run[0] == "_" and before.isalnum() and after.isalnum()):
        return run
    return "".join("\\" + c for c in run)


def _md(text: str, limit: int | None = None, syntax: bool = True) -> str:
    text = " ".join(text.split())
    if limit and len(text) > limit:
        # Cut at a word, never inside one ("this kernel has no such"), and say it was cut.
        cut = text[:limit].rsplit(" ", 1)[0] if " " in text[:limit] else text[:limit]
        text = cut.rstrip(",;:") + " …"
    # Texts come from hosts: no "|" splits the row, no "<" opens an HTML tag, comment or declaration where the
    # Markdown is rendered ("<script>", "<inactive>"); a "<" before a blank or a digit ("BAR1 ... < memory") stays.
    # Markdown's own syntax is escaped with a backslash (_MD_SYNTAX): no "[x](javascript:...)" link, "![x](url)"
    # image, emphasis, code span or strikethrough is made of a host's text.
    # ``syntax`` False (the terminal, where nothing renders Markdown): its syntax is left as the host wrote it.
    return _TAG_START.sub("&lt;", _MD_SYNTAX.sub(_md_escape, text) if syntax else text).replace("|", "\\|")


def _named(k: Check) -> str:
    """A line's name with the device it is about, where the name does not say it already."""
    return k.name if not k.subject or k.subject in k.name else f"{k.subject} {k.name}"


def render_markdown(host: str, checks: list[Check], *, terminal: bool = False) -> str:
    """The checklist as Markdown (terminal, tickets): FAIL and WARN lines first, with their fixes.  ``terminal``:
    the table as the console shows it, without the backslashes that keep a host's text from making Markdown's
    links, images or emphasis where the page is rendered (``ACPI _PXM``, not ``ACPI \\_PXM``)."""
    c = summary_counts(checks)
    lines = [f"# Bring-up checklist: {host} — {verdict(checks)}", "",
             f"{c['PASS']} pass, {c['WARN']} warn, {c['FAIL']} fail", "",
             "| status | area | check | seen | fix |", "| --- | --- | --- | --- | --- |"]
    for k in worst_first(checks):
        md = not terminal
        lines.append(f"| {k.status} | {_md(k.area, syntax=md)} | {_md(_named(k), syntax=md)} | "
                     f"{_md(k.seen, MD_CELL_MAX, md)} | {_md(k.fix, MD_CELL_MAX, md)} |")
    return "\n".join(lines) + "\n"


def render_json(host: str, checks: list[Check]) -> str:
    """The checklist as JSON: every line whole (the Markdown cuts long texts at a word)."""
    import json

    return json.dumps({"host": host, "verdict": verdict(checks), "counts": summary_counts(checks),
                       "checks": [line_json(k) for k in checks]}, indent=2) + "\n"


def cpu_plan(facts: dict, host_vars: dict) -> tuple[dict[int, str], list[str]]:
    """CPU roles and misplacement warnings from the topology planner."""
    from ..hardware.topology import cpu_roles, triton_pin

    try:
        roles, warnings = cpu_roles(facts, host_vars)
    except Exception as e:  # noqa: BLE001 - a plan that cannot fit is itself a finding
        roles, warnings = {}, [f"topology plan: {e}"]
    pinned = triton_pin(host_vars)
    if pinned is not None:
        # The inventory's pin is where Triton runs (the compose file's cpuset), whatever the planner says.
        from ..facts.base import parse_cpulist

        try:
            cpus = parse_cpulist(pinned)
        except ValueError:
            cpus = []
        roles = {c: r for c, r in roles.items() if not r.startswith("triton")}
        roles.update({c: "triton:triton_cpuset" for c in cpus})
    return roles, warnings


#: The facts the checklist itself reads (the platform rules, GPU lines, the topology picture),
#: gathered in the same round trip as the facts of the roles it plans.
FACTS = ("pci.devices", "nvidia.smi", "nvidia.query", "cpu.topology", "system.cmdline", "system.cpuidle",
         *health.FACTS)

_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,200}$")


def page_name(host: str) -> str:
    """``host`` as a file name under ``--out``; a name that could leave the folder is refused."""
    if not _SAFE_NAME.match(host) or ".." in host:
        from ..errors import InputError
        raise InputError(f"host name {host!r} cannot name a checklist page (letters, digits, '_', '.', '-'; "
                         "no '..'); rename the host in the inventory")
    return host


#: The rack's page under ``--out`` (``--group``): ``index.html``.
GROUP_PAGE = "index"


def group_page_free(hosts) -> None:
    """Refuse a host whose page would be the rack's page (a host named ``index``: its ``index.html`` and the
    group's would be one file, the host's page lost); said before anything runs."""
    for h in hosts:
        if h.name.casefold() == GROUP_PAGE:
            from ..errors import InputError
            raise InputError(f"host {h.name!r}: its checklist page {h.name}.html would be the --group page "
                             f"{GROUP_PAGE}.html; rename the host in the inventory, or run it without --group")


def run_checklist(hosts, roles, vars_by_host, templates, out_dir, accept_new_host_keys=False, facts_file=None,
                  stop=None, ahead=None):
    """Gather, plan (check mode) and render each host's checklist; returns ``{host: checks}``.

    Each host is one :class:`bringup.engine.runner.HostRun`: one connection, one
    gathering of the roles' facts and the checklist's own, the variables as
    ``provision`` merges them.  With ``facts_file`` (a saved ``invoke facts``)
    nothing connects: the hardware lines come from the file, and the roles'
    drift is not checked.  Once ``stop`` is requested (a signal) no further host starts: the pages of the
    hosts done are written, the others are left out.  ``ahead``: connections and facts opened while the
    checklist prepared (:mod:`bringup.engine.ahead`, its ``extra_facts`` this module's :data:`FACTS`).
    """
    from pathlib import Path

    from ..facts.gather import load_facts, missing_facts
    from ..engine.runner import HostRun, Options
    from ..hardware.topology_svg import topology_svg

    out_dir = Path(out_dir)
    names = {h.name: page_name(h.name) for h in hosts}
    pages: dict[str, list[Check]] = {}
    for h in hosts:
        if stop is not None and stop.requested:
            break
        vars = vars_by_host[h.name]
        if facts_file:
            facts, errors = load_facts(facts_file, h.name)
            result = None
            extra = [line("tuning", "roles converged", "WARN", f"not checked: planned offline from {facts_file}",
                           command(f"checklist --host {h.name}") + " once it is reachable")]
            lacking = missing_facts(facts)
            if lacking:
                # A file without them must not read as a clean PASS: the checks that read them saw nothing.
                extra.append(line("facts", "saved facts complete", "WARN",
                                  f"{len(lacking)} fact(s) not in {facts_file}: {', '.join(lacking)}",
                                  "save them all: " + command(f"facts --host {h.name} > FILE")))
        else:
            run = HostRun(h, roles, vars, Options(check=True, accept_new_host_keys=accept_new_host_keys, ahead=ahead),
                          templates, extra_facts=FACTS, stop=stop)
            result = run.converge()
            if result.status == "interrupted":
                break  # a host cut short by the signal gets no page that would read as its verdict
            facts, errors, extra = run.facts, run.fact_errors, []
        have = bool(facts) or facts_file is not None  # a saved file that lacks facts still gets its lines
        try:
            lines = role_checks(roles, h.name, facts, vars, templates.render, errors) if have else []
            checks = (collect(facts, vars, result, errors, lines) + extra) if have else tuning_checks(result)
            roles_of_cpus, warnings = cpu_plan(facts, vars) if have else ({}, [])
            svg = topology_svg(facts, roles_of_cpus, warnings, title=h.name) if have else "<p>unreachable</p>"
        except (TypeError, KeyError, AttributeError, ValueError, IndexError) as e:
            if not facts_file:
                raise
            # Gathered facts come from the parsers; a saved file is only as good as its author.
            from ..errors import InputError
            raise InputError(f"--facts {facts_file}: a fact is not shaped as `{command('facts')}` writes it "
                             f"({type(e).__name__}: {e}); save it with: {command(f'facts --host {h.name} > FILE')}") from None
        if not checks:
            checks = [line("facts", "anything checked", "WARN", "no line could be checked from what was read",
                           command(f"facts --host {h.name}") + " and look at what it gathers")]
        out_dir.mkdir(parents=True, exist_ok=True)  # only now: a bad --facts file leaves no folder behind
        # A byte a host printed that was not UTF-8 (a NIC name in the picture) is written as \xNN, never a traceback.
        # Replaced whole, never written through a link or into a FIFO planted under the page's name; the three
        # pages together (a folder under one of their names is one line, and none of them is written).
        write_set([(out_dir / f"{names[h.name]}.{ext}", text) for ext, text in (
            ("md", render_markdown(h.name, checks)), ("html", render_html(h.name, checks, svg)),
            ("json", render_json(h.name, checks)))], errors="backslashreplace")
        pages[h.name] = checks
    return pages
