"""What a run prints and records: details, diffs, Ansible's recap, JSON report."""
from __future__ import annotations

import json
import textwrap
import time
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Iterator

from rich.console import Console

from ..outfile import write_atomic
from .results import HostResult
from ..secrets import MASK

__all__ = ["recap_line", "print_host", "print_recap", "print_rollout_stopped", "Report", "progress_display"]

_COLOURS = {"ok": "green", "changed": "yellow", "failed": "red", "skipped": "cyan", "unreachable": "red"}


def recap_line(r: HostResult, width: int = 0) -> str:
    """``trt-l40s-01 : ok=7 changed=2 failed=0 skipped=1 unreachable=0``"""
    c = r.recap
    line = (f"{r.host.ljust(width)} : ok={c['ok']} changed={c['changed']} failed={c['failed']} "
            f"skipped={c['skipped']} unreachable={c['unreachable']}")
    if r.status in ("not started", "interrupted"):
        # All zeros would read as a host with nothing to do: say that nothing (more) ran on it, and why.
        line += f"  ({r.status}: {r.message})" if r.message and not r.message.startswith(r.status) else \
            f"  ({r.message or r.status})"
    if r.live_not_persisted:
        # A failure after live values were set, before the file that persists them: a reboot loses them.
        line += f"  (live, not persisted: {', '.join(r.live_not_persisted)})"
    return line


def print_host(r: HostResult, console: Console, *, check: bool, diff: bool, verbose: bool = False) -> None:
    """One host's details: what changed (or would), what was skipped and why, failures.

    What comes from the run (the role's name in brackets, ids, values, messages, diffs) is plain text, never
    markup: rich read ``[sysctl]`` or a value ``[2, 4]`` as markup and dropped it.  The lines go out in one
    print (one render).
    """
    from rich.text import Text

    console.rule(Text.assemble((r.host, "bold"), " (check mode)" if check else ""), style="dim")
    lines: list[Text] = []
    if r.message:
        lines.append(Text.assemble((r.status.upper(), _COLOURS.get(r.status, "red")), f": {r.message}"))
    for e_name, e in r.fact_errors.items():
        lines.append(Text.assemble((f"fact {e_name} could not be parsed", "yellow"), f": {e}"))
    for res in r.resources:
        if res.status == "ok" and not verbose:
            continue
        label = "would change" if check and res.status == "changed" else res.status
        detail = res.error or ", ".join(f"{k}: {v[0]} → {v[1]}" if isinstance(v, list) and len(v) == 2
                                        else f"{k}: {v}" for k, v in res.changes.items()) or res.reason or ""
        lines.append(Text.assemble("  ", (f"{label:>12}", _COLOURS[res.status]), f" [{res.role}] {res.id}  {detail}"))
        if diff and res.diff:
            lines.append(Text(res.diff.rstrip("\n"), style="dim"))
    if r.rebooted:
        lines.append(Text.assemble("  ", ("rebooted", "yellow"), f": {r.reboot_reason}"))
    elif r.reboot_required:
        lines.append(Text.assemble("  ", ("reboot required", "yellow"), f": {r.reboot_reason}"
                                   + ("" if check else " (rerun with --allow-reboot, or reboot and rerun)")))
    lines.append(Text(f"  {r.round_trips} round trip(s), {r.seconds:.2f} s", style="dim"))
    console.print(Text("\n").join(lines), highlight=False, soft_wrap=True)


def print_recap(results: list[HostResult], console: Console) -> None:
    """Ansible's PLAY RECAP: one line per host."""
    console.print()
    console.print("[bold]PLAY RECAP[/] " + "*" * 60, highlight=False)
    width = max((len(r.host) for r in results), default=0)
    for r in results:
        # A host's name or message is text, never markup or an emoji code (a PCI bus ``ab`` read as :ab:).
        console.print(recap_line(r, width), markup=False, highlight=False, emoji=False)


class Report:
    """The run's JSON report under ``directory`` (``reports/``), rewritten whole as each host finishes.

    Hosts not finished yet are listed as ``pending``: a run cut short (a
    signal, a crash of the control machine) still leaves what was done.
    Each finished host is masked and encoded once, when it is added: the
    rewrite joins those texts, so a rack's report costs each host once, not
    once per host finished after it (64 hosts: 2.6 s of the control
    machine's time before; bench/RESULTS.md).
    """

    def __init__(self, directory: Path, *, command: str, args: dict, hosts: list[str]):
        directory.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%S")
        path = directory / f"{stamp}-{command}.json"
        n = 1
        while path.exists():
            n += 1
            path = directory / f"{stamp}-{command}-{n}.json"
        self.path, self.command, self.args = path, command, args
        self.started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self.order = list(hosts)
        self.done: dict[str, HostResult] = {}
        #: Each host's masked JSON text (finished or pending), with the masker's generation it was masked under.
        self._texts: dict[str, tuple[int, str]] = {}
        self.write()

    def add(self, result: HostResult) -> None:
        self.done[result.host] = result
        self._texts.pop(result.host, None)
        self.write()

    def _host_text(self, host: str) -> str:
        cached = self._texts.get(host)
        if cached and cached[0] == MASK.generation:
            return cached[1]
        generation = MASK.generation  # before masking: a secret learnt meanwhile marks this text stale
        if host in self.done:
            r = self.done[host]
            doc = dict(asdict(r), recap=r.recap)
        else:
            doc = {"host": host, "status": "pending"}
        # Secrets of the inventory (and URL passwords) never reach the file.
        text = textwrap.indent(json.dumps(MASK.mask_obj(doc), indent=2, sort_keys=False), "    ")
        self._texts[host] = (generation, text)
        return text

    def write(self, finished: bool = False) -> Path:
        head: dict = {"command": self.command, "args": self.args, "started": self.started,
                      "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z") if finished else None}
        # The document json.dumps(indent=2) gives, its "hosts" list joined from the hosts' texts.
        text = json.dumps(MASK.mask_obj(head), indent=2, sort_keys=False)[:-2]
        hosts = ",\n".join(self._host_text(h) for h in self.order)
        text += ',\n  "hosts": [\n' + hosts + "\n  ]\n}\n" if hosts else ',\n  "hosts": []\n}\n'
        return write_atomic(self.path, text)


@contextmanager
def progress_display(console: Console, hosts: list[str]) -> Iterator:
    """A live line per host while the run goes on; yields a ``progress(host, text)`` callback.

    Not on a terminal (a pipe, cron, the benchmark) nothing is drawn, and rich's progress module
    (live display, tables, spinners) is not even imported.
    """
    if not console.is_terminal:
        yield lambda host, text: None
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    # Host names and what a host said are text: never read as markup or emoji codes.
    prog = Progress(SpinnerColumn(), TextColumn("{task.fields[host]}", style="bold", markup=False),
                    TextColumn("{task.description}", markup=False),
                    TimeElapsedColumn(), console=console, transient=True,
                    disable=not console.is_terminal)
    tasks = {h: prog.add_task("waiting", host=h, total=None) for h in hosts}
    with prog:
        def update(host: str, text: str) -> None:
            prog.update(tasks[host], description=text)
        yield update


def print_rollout_stopped(why: str, never_started: list[str], console: Console) -> None:
    """After the recap: why a rolling run stopped, and the hosts it never started."""
    from rich.text import Text

    console.print(Text.assemble(("ROLLOUT STOPPED", "bold red"), f" {why}"), highlight=False)
    if never_started:
        console.print(f"  not started: {', '.join(never_started)}", markup=False, highlight=False, emoji=False)
