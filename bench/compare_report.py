"""bench/RESULTS.md from a run's results: the tables per part and per peer, the issue's targets, the CPU and where
the time goes, and bench/NOTES.md, keeping the section bench/pull_fleet.py writes.  Cut from bench/compare.py
(issue 43 item 2): the report reads results only, so ``compare.py --render`` writes it again without measuring.
"""
from __future__ import annotations

import re
from pathlib import Path

from compare_floor import COMPOSE_CHECK
from compare_run import BENCH, WAVE
from compare_testinfra import PEERS, TESTINFRA, TESTINFRA_BRINGUP, TESTINFRA_SHIPPED

def fmt(r: dict | None) -> str:
    """Median (min–max) and the median 1-minute load average when this tool's runs started; — when not run."""
    if not r:
        return "—"
    return f"{r['median']:.2f} s ({r['min']:.2f}–{r['max']:.2f}) ·{r['load']:.1f}"


def ratio(a: dict | None, b: dict | None) -> str:
    return f"{a['median'] / b['median']:.2f}×" if a and b else "—"


def report(res: dict, meta: dict) -> str:
    L = ["# bringup benchmark: whole processes against pyinfra, Ansible and the SSH floor", "",
         f"Written by `python3 bench/compare.py {meta['args']}` on {meta['date']}, at commit {meta['commit']}.", "",
         f"- machine: {meta['machine']}, {meta['cores']} cores, {meta['mem']}",
         "- " + "; ".join(f"{k} {v}" for k, v in meta["versions"].items()),
         "- hosts: sandbox containers (Debian, systemd, sshd) on 127.0.0.1, the control node the same machine",
         f"- each cell: median (min–max) of {meta['runs']} runs, wall time of the whole process from outside "
         "(start-up included), tools alternated run by run; `·N` after a cell is the median 1-minute load "
         "average (`os.getloadavg`) when that tool's runs started, on 2 cores a load above 2 means waiting for a core", ""]
    st = res.get("s")
    if st:
        L += ["## Start-up (target under 0.15 s)", "", "| command | wall time ·load |", "|---|---|"]
        L += [f"| `{n}` | {fmt(r)} |" for n, r in st.items()] + [""]
    a = res.get("a")
    if a:
        L += ["## (a) sysctl role, no-op: file and " + str(a["keys"]) + " live keys", "",
              "Light sandbox hosts (sshd and systemd, no Docker inside), the fleet grown size by size (booted in "
              f"waves of {WAVE}, then the load left to settle) after (b)-(d); `--forks`/`--parallel`/`-f` = the host count. Ansible runs up to "
              f"{a.get('ansible_max', '?')} hosts (`--ansible-max`): about 3 s per added host.", "",
              "| hosts | bringup | pyinfra | ansible | floor | bringup/pyinfra | bringup/ansible | bringup/floor |",
              "|---|---|---|---|---|---|---|---|"]
        for n, r in a["scale"].items():
            L.append(f"| {n} | {fmt(r['bringup'])} | {fmt(r['pyinfra'])} | {fmt(r.get('ansible'))} | "
                     f"{fmt(r['floor'])} | {ratio(r['bringup'], r['pyinfra'])} | "
                     f"{ratio(r['bringup'], r.get('ansible'))} | {ratio(r['bringup'], r['floor'])} |")
        if len(a["scale"]) > 1:
            L += ["", "Cost per added host (median, from the smallest to the largest size each ran at): " + ", ".join(
                per_host(a["scale"], t) for t in ("bringup", "pyinfra", "ansible", "floor"))]
        L += ["", commands_table(a.get("commands", {}))]
    b = res.get("b")
    if b:
        L += ["## (b) six-operation mix, one host", "",
              "| run | bringup | pyinfra | ansible | floor | bringup/pyinfra | bringup/ansible | bringup/floor |",
              "|---|---|---|---|---|---|---|---|"]
        for what, r in (("apply from scratch", b["apply"]), ("no-op", b["noop"])):
            fl = r.get("floor")
            L.append(f"| {what} | {fmt(r['bringup'])} | {fmt(r['pyinfra'])} | {fmt(r['ansible'])} | "
                     f"{fmt(fl)} | {ratio(r['bringup'], r['pyinfra'])} | "
                     f"{ratio(r['bringup'], r['ansible'])} | {ratio(r['bringup'], fl)} |")
        L += ["", commands_table(b["commands"])]
    for key, title in (("c", "(c) full `provision`, cpu profile, no-op, one host"),
                       ("d", "(d) `bringup audit` (= `invoke audit`) of the provisioned host")):
        r = res.get("cd", {}).get(key)
        if not r:
            continue
        t = r["times"]
        name = next(n for n in t if n not in ("floor", *(tool for tool, _ in PEERS.values())))
        c = r["commands"]
        peer = r.get("testinfra")
        if peer:
            pc = peer["commands"]
            L += [f"## {title}", "",
                  "| bringup | testinfra | its floor | bringup/testinfra | bringup/floor | remote commands "
                  "(bringup / testinfra) | connections (bringup / testinfra) |", "|---|---|---|---|---|---|---|",
                  f"| {fmt(t[name])} | {fmt(t.get(TESTINFRA))} | {fmt(t['floor'])} | "
                  f"{ratio(t[name], t.get(TESTINFRA))} | {ratio(t[name], t['floor'])} | "
                  f"{c['commands']} / {pc['commands']} | {c['connections']} / {pc['connections']} |", "",
                  f"testinfra: `pytest -q -p no:cacheprovider bench/peers/audit_testinfra.py "
                  f"--hosts=paramiko://...`, one test per audit item ({peer['tests']} tests: {peer['passed']} "
                  f"passed, {peer['skipped']} skipped, each as the audit's item), over the one paramiko "
                  "connection its backend keeps for the session, TCP_NODELAY set by the peer's fixture.", "",
                  *backends_table(r, t), ""]
        else:
            L += [f"## {title}", "", "| bringup | its floor | bringup/floor | remote commands | connections |",
                  "|---|---|---|---|---|",
                  f"| {fmt(t[name])} | {fmt(t['floor'])} | {ratio(t[name], t['floor'])} | {c['commands']} | "
                  f"{c['connections']} |", ""]
        L += ["Its floor: every command this run ran on the host (the run lock's holder with its facts and, where "
              "read ahead, its state read), each with what it sent on stdin, captured on the host and replayed from "
              "a fresh paramiko process in one command over one connection. Until 2026-12-06 it replayed only what "
              "was sent on stdin (the state read, not the facts in the holder's command line): its floors and ratios "
              "are not comparable with earlier runs'.", ""]
    L += targets_table(res)
    L += cpu_table(res)
    L += where_table(res)
    L += [meta["notes"]]
    return "\n".join(L) + "\n"


def backends_table(r: dict, t: dict) -> list[str]:
    """(d)'s peer on each testinfra backend: the same tests, whole processes, against bringup's backend."""
    rows = []
    for backend, (tool, field) in PEERS.items():
        peer = r.get(field)
        if not peer or tool not in t:
            continue
        how = {"paramiko": "paramiko, TCP_NODELAY set by the peer's fixture (its best configuration)",
               "shipped": "paramiko as testinfra ships it (no TCP_NODELAY)",
               "bringup": "bringup's (`-p bringup.testinfra.plugin --hosts=bringup://HOST "
                          "--bringup-inventory=hosts`, bringup's Python)"}[backend]
        rows.append(f"| {how} | {fmt(t[tool])} | {peer['commands']['commands']} | "
                    f"{peer['commands']['connections']} | {ratio(t.get(TESTINFRA_BRINGUP), t[tool])} |")
    if len(rows) < 2:
        return []
    return ["testinfra's backends on the same tests (each run first verified item for item against the audit):", "",
            "| backend | whole run | remote commands | connections | bringup's backend / this |", "|---|---|---|---|---|",
            *rows]


def targets_table(res: dict) -> list[str]:
    """Issue 11's targets against this run's medians: holds, or not, with the number."""
    rows = []

    def row(target: str, value: str, holds: bool | None) -> None:
        rows.append(f"| {target} | {value} | {'holds' if holds else 'not measured' if holds is None else '**does not hold**'} |")

    def vs_floor(target: str, a: dict | None, b: dict | None, limit: float) -> None:
        if a and b:
            r = a["median"] / b["median"]
            row(target, f"{r:.2f}× ({a['median']:.2f} s against {b['median']:.2f} s)", r <= limit)

    scale = res.get("a", {}).get("scale", {})
    one = scale.get(1, {})
    vs_floor("(a) sysctl no-op, one host: ≤ 1.3× floor", one.get("bringup"), one.get("floor"), 1.3)
    b = res.get("b")
    if b:
        vs_floor("(b) mix no-op, one host: ≤ 1.3× floor", b["noop"]["bringup"], b["noop"].get("floor"), 1.3)
        ap = b["apply"]
        r = ap["pyinfra"]["median"] / ap["bringup"]["median"]
        row("(b) mix apply from scratch: ≥ 2× faster than pyinfra", f"{r:.2f}× faster "
            f"({ap['bringup']['median']:.2f} s against {ap['pyinfra']['median']:.2f} s)", r >= 2)
    c = (res.get("cd") or {}).get("c")
    if c:
        vs_floor("(c) full provision no-op, one host: ≤ 1.5× its floor", c["times"]["bringup provision"],
                 c["times"]["floor"], 1.5)
    for n in sorted(scale):
        if n >= 16:
            vs_floor(f"(a) sysctl no-op, {n} hosts: ≤ 1.3× the fleet floor", scale[n].get("bringup"),
                     scale[n].get("floor"), 1.3)
    d = (res.get("cd") or {}).get("d")
    if d:
        t = d["times"]["bringup audit"]["median"]
        row("(d) audit of a provisioned host: under 1 s", f"{t:.2f} s", t < 1)
        ti = d["times"].get("testinfra")
        if ti:
            row("(d) audit faster than testinfra's paramiko backend", f"{ti['median'] / t:.2f}× faster ({t:.2f} s "
                f"against {ti['median']:.2f} s)" if t < ti["median"] else f"{t / ti['median']:.2f}× slower "
                f"({t:.2f} s against {ti['median']:.2f} s)", t < ti["median"])
        else:
            row("(d) audit faster than testinfra's paramiko backend", "testinfra not run", None)
        tb = d["times"].get(TESTINFRA_BRINGUP)
        for tool, what in ((TESTINFRA_SHIPPED, "as shipped"), (TESTINFRA, "with TCP_NODELAY (its best)")):
            other = d["times"].get(tool)
            target = f"(d) testinfra: bringup's backend faster than the paramiko backend {what}"
            if tb and other:
                r = other["median"] / tb["median"]
                row(target, f"{r:.2f}× faster ({tb['median']:.2f} s against {other['median']:.2f} s)" if r > 1 else
                    f"{1 / r:.2f}× slower ({tb['median']:.2f} s against {other['median']:.2f} s)", r > 1)
            else:
                row(target, "not run", None)
    for name, r in (res.get("s") or {}).items():
        if name.startswith(("bringup", "invoke")):
            row(f"`{name}`: under 0.15 s", f"{r['median']:.2f} s", r["median"] < 0.15)
    if not rows:
        return []
    return ["## The issue's targets in this run", "", "| target | this run (medians) | |", "|---|---|---|", *rows, ""]


def cpu_table(res: dict) -> list[str]:
    """The one-host no-op cells' CPU (user + system of the whole process, medians) beside their wall times: a
    ratio target to the floor's wall time cannot hold while bringup's CPU alone is above it."""
    rows = []
    c = (res.get("cd") or {}).get("c")
    for label, a, b, limit in (
            ("(a) sysctl", res.get("a", {}).get("scale", {}).get(1, {}).get("bringup"),
             res.get("a", {}).get("scale", {}).get(1, {}).get("floor"), 1.3),
            ("(b) mix", (res.get("b") or {}).get("noop", {}).get("bringup"),
             (res.get("b") or {}).get("noop", {}).get("floor"), 1.3),
            ("(c) provision", c and c["times"].get("bringup provision"), c and c["times"].get("floor"), 1.5)):
        if not a or not b or "cpu" not in a or "cpu" not in b:
            continue
        budget = limit * b["median"]
        rows.append(f"| {label} | {a['median']:.2f} s | {a['cpu']:.2f} s | {b['median']:.2f} s | {b['cpu']:.2f} s "
                    f"| {budget:.2f} s ({limit:g}×) | {a['cpu'] / budget:.0%} |")
    if not rows:
        return []
    return ["## CPU of the whole process (one host, no-op, medians)", "",
            "User + system seconds of the process and the children it waited for (`getrusage`), run by run. "
            "On one host the work is mostly the control process's own: what it uses in CPU the wall time "
            "cannot go below, however much of it overlaps the network.", "",
            "| run | bringup wall | bringup CPU | floor wall | floor CPU | the target's wall budget | bringup's "
            "CPU / budget |", "|---|---|---|---|---|---|---|", *rows, ""]


def where_table(res: dict) -> list[str]:
    """Whole run = imports + SSH handshake + round trips + the rest, per one-host no-op, medians."""
    rows = []
    for label, whole, w in (
            ("(a) sysctl", res.get("a", {}).get("scale", {}).get(1, {}).get("bringup"), res.get("a", {}).get("where")),
            ("(b) mix", res.get("b", {}).get("noop", {}).get("bringup"), res.get("b", {}).get("where")),
            ("(c) provision", (res.get("cd", {}).get("c") or {}).get("times", {}).get("bringup provision"),
             (res.get("cd", {}).get("c") or {}).get("where")),
            ("(d) audit", (res.get("cd", {}).get("d") or {}).get("times", {}).get("bringup audit"),
             (res.get("cd", {}).get("d") or {}).get("where"))):
        if not whole or not w:
            continue
        imp = w["imports"]
        groups = sorted(((k, v) for k, v in imp.items() if k != "all"), key=lambda kv: -kv[1])
        trips = w["trips"]
        rest = whole["median"] - imp["all"] - w["connect"] - sum(trips)
        rows.append(f"| {label} | {whole['median']:.2f} s | {imp['all']:.2f} s: "
                    + ", ".join(f"{k} {v * 1000:.0f}" for k, v in groups if v >= 0.005)
                    + f" ms | {w['connect'] * 1000:.0f} ms | {len(trips)}: "
                    + " + ".join(f"{t * 1000:.0f}" for t in trips) + f" ms | {rest:+.2f} s | {w['load']:.1f} |")
    if not rows:
        return []
    return ["## Where bringup's time goes (one host, no-op, medians)", "",
            "Whole run: the timed cell above. Imports: the wall time a fresh process takes to import every module "
            "the same command loaded, less `python -c pass` (role modules, loaded from their files, are in the "
            "rest); split by top-level package in the shares `python -X importtime` gives them (ms). Handshake and round trips: bench/where.py replays the commands "
            "this run ran, with what it sent on their stdin (captured on the host), over a fresh paramiko "
            "connection: TCP, key exchange and authentication, then each command on a new channel. The rest: whole run minus those three, that is "
            "interpreter start-up and exit, reading the inventory, merging and validating variables, declaring and "
            "planning resources, printing and writing the report, less the overlap: a run connects and gathers the "
            "facts while it still loads its roles, checks its variables and imports Jinja2 and rich "
            "(bringup/engine/ahead.py), so the handshake and the first round trip partly run at the same time as the "
            "imports and the rest (a negative rest: more overlapped than left).", "",
            "| run | whole run | imports, by package | SSH handshake | round trips | the rest | load |",
            "|---|---|---|---|---|---|---|", *rows, "", *compose_line(res)]


def compose_line(res: dict) -> list[str]:
    alone = ((res.get("cd") or {}).get("d") or {}).get("where", {}).get("alone")
    if alone is None:
        return []
    return [f"The audit's compose check alone (`{COMPOSE_CHECK.strip()}`, one round trip on the provisioned host): "
            f"{alone * 1000:.0f} ms. The sandbox's compose is v1 (`docker-compose`, a Python program), and the audit "
            "must show that a compose works, so it runs it; the provision's docker role only looks for it on the PATH.",
            ""]


def per_host(scale: dict, tool: str) -> str:
    """Median cost of one added host, from the smallest to the largest size this tool ran at."""
    ns = sorted(n for n in scale if tool in scale[n])
    lo, hi = ns[0], ns[-1]
    if hi == lo:
        return f"{tool} —"
    return f"{tool} {(scale[hi][tool]['median'] - scale[lo][tool]['median']) / (hi - lo) * 1000:.0f} ms ({lo}→{hi})"


def commands_table(cmds: dict) -> str:
    if not cmds:
        return ""
    rows = ["Remote commands of one no-op run on one host (exec requests and sftp sessions, logged by a "
            "wrapper login shell on the host; connections = distinct sshd session processes):", "",
            "| tool | commands | of which sftp | connections | first commands |", "|---|---|---|---|---|"]
    for n, c in cmds.items():
        rows.append(f"| {n} | {c['commands']} | {c['sftp']} | {c['connections']} | "
                    + "<br>".join(f"`{s.replace('|', '¦')}`" for s in c["sample"]) + " |")
    return "\n".join(rows) + "\n"


NOTES = (BENCH / "NOTES.md")


#: The section bench/pull_fleet.py writes into the same file, carried over when this report is written again.
PULL_SECTION = re.compile(r"<!-- pull_fleet: begin -->.*?<!-- pull_fleet: end -->\n", re.S)


def write_report(res: dict, meta: dict, out: Path) -> None:
    meta = {**meta, "notes": NOTES.read_text() if NOTES.exists() else ""}
    text = report(res, meta)
    kept = PULL_SECTION.search(out.read_text()) if out.exists() else None
    if kept:
        text = text.rstrip("\n") + "\n\n" + kept.group(0)
    out.write_text(text)
    print(text)
