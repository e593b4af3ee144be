"""The tasks behind ``invoke ...`` and the ``bringup`` console script."""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from invoke import Collection, Exit, Program, task

from . import __version__
from .errors import BringupError, Unreachable
from .process import keep_bytecode, reader_gone, stdout_gone

if TYPE_CHECKING:
    from rich.console import Console

    from .ahead import Ahead
    from .runner import HostResult, Stop

# Heavy modules (pydantic models, rich, Fabric/paramiko, Jinja2, YAML) are imported by the tasks
# that use them, so `bringup --help` and `invoke --list` pay for none of them.

__all__ = ["ns", "program", "main", "prepared"]


class _Program(Program):
    """``bringup ...``: Invoke's program, the bytecode flag restored once it parsed its core flags (it turns
    bytecode writing off for the whole process: :func:`bringup.process.keep_bytecode`)."""

    def parse_core(self, argv) -> None:
        super().parse_core(argv)
        keep_bytecode()


def _console() -> Console:
    from rich.console import Console

    # Piped into a log or CI, rich would assume 80 columns and cut the tables' headers: give them room.
    return Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 160)


def _fail(e: Exception) -> Exit:
    return Exit(f"error: {e}", code=1)


def _load(inventory, set_):
    from .inventory import load_inventory, parse_set
    from .secrets import mask_output

    # From here on, whatever is printed (rich, invoke's error line) has the inventory's secrets masked.
    mask_output()
    return load_inventory(inventory, overrides=parse_set(list(set_ or [])))


def _selected(inventory, set_, host, hosts, group, limit=None):
    inv = _load(inventory, set_)
    if limit and not (host or hosts or group):
        return inv, inv.limit(limit)  # --limit alone picks from the whole inventory
    chosen = inv.select(host=host, hosts=hosts, group=group)
    return inv, inv.limit(limit, chosen) if limit else chosen


def prepared(inventory, set_, host, hosts, group, roles, limit=None, ahead: Ahead | None = None, dial: int = 0,
             check=None):
    """The selected hosts and roles, with every role's variables merged and validated.

    Returns ``(inventory, hosts, content root, roles, variables by host)``: what every task that plans or
    runs roles starts from (provision, audit, checklist, drift, bench, tune-window), and what a tool
    outside the CLI uses to see the same declared state (bench/peers/audit_spec.py).

    Nothing connects, unless ``ahead`` is given: then the first ``dial`` hosts are connected to as soon as the
    inventory named them, while the roles load and the variables are checked, and their facts are gathered
    once every check passed (the variables, then ``check(hosts)``, the caller's own: the rollout's hooks)
    while the caller goes on (:mod:`bringup.ahead`).  The caller closes ``ahead`` when the run ends, and
    when this raises: a refused run has run no command on any host.
    """
    from .project import content_root
    from .roles import load_roles, select_roles, wanted_facts
    from .runner import prepare

    inv, chosen = _selected(inventory, set_, host, hosts, group, limit)
    if ahead is not None:
        ahead.dial(chosen[:dial])
    root = content_root()
    order, all_roles = load_roles(root)
    selected = select_roles(order, all_roles, roles)
    role_vars = prepare(chosen, selected, [all_roles[r] for r in order])
    if check is not None:
        check(chosen)
    if ahead is not None:
        ahead.want(wanted_facts(selected, ahead.extra_facts))
    return inv, chosen, root, selected, role_vars


MAX_FORKS = 256


def _forks(forks) -> int:
    """``--forks``: a whole number 1..MAX_FORKS (the tasks take it as text, so Invoke's parser never
    tracebacks on ``--forks many``)."""
    try:
        n = int(str(forks).strip()) if not isinstance(forks, bool) else 0
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_FORKS:
        raise BringupError(f"--forks {forks!r}: must be a whole number from 1 to {MAX_FORKS} "
                           "(hosts handled at once), e.g. --forks 10")
    return n


def _host_facts(task_name, inventory, set_, host, accept_new_host_keys, validate=None, facts_file=None):
    """One ``--host``'s facts, gathered in one round trip (or read from a saved ``invoke facts``, without
    connecting); errors become one line and an exit code."""
    from .connection import connect
    from .facts import ALL_FACTS
    from .facts.gather import gather, load_facts

    try:
        _, chosen = _selected(inventory, set_, host, None, None)
        if len(chosen) != 1:
            raise BringupError(f"{task_name} takes one --host")
        if validate:
            validate(chosen[0].vars)
        if facts_file:
            return (chosen[0], *load_facts(facts_file, chosen[0].name))
        t = connect(chosen[0], accept_new_host_keys=accept_new_host_keys)
    except Unreachable as e:
        raise Exit(f"unreachable: {e}", code=4) from None
    except BringupError as e:
        raise _fail(e) from None
    try:
        values, errors = gather(t, ALL_FACTS)
    finally:
        t.close()
    return chosen[0], values, errors


_SELECT_HELP = {
    "host": "one host of the inventory",
    "hosts": "several hosts, comma separated",
    "group": "every host of an inventory group",
    "inventory": "inventory file (Ansible YAML), default ./hosts",
    "set": "KEY=VALUE variable override (highest precedence); repeatable",
}
_LIMIT_HELP = ("Ansible host pattern narrowing the selection ('l40s:&rack2:!trt-l40s-03', 'trt-a10-*'), "
               "or @reports/last.retry")


@task(
    iterable=["set_"],
    help={
        **_SELECT_HELP,
        "roles": "a subset of roles, comma separated (run in the standard order)",
        "check": "plan only: change nothing on the host",
        "diff": "show unified diffs of changed files",
        "forks": "hosts handled in parallel (default 10)",
        "accept-new-host-keys": "record unknown host keys (a changed key is still refused)",
        "verbose": "also list resources with nothing to do, and why",
        "allow-reboot": "reboot a host whose new state needs it (a driver), wait for SSH, verify, go on",
        "limit": _LIMIT_HELP,
        "serial": "rolling batches, Ansible's serial: sizes or percentages, the last repeating (1,25%)",
        "max-fail-percentage": "stop the rollout when more than N% of a batch failed (0: at the first failure)",
    },
)
def provision(c, host=None, hosts=None, group=None, roles=None, check=False, diff=False,
              inventory="hosts", set_=None, forks="10", accept_new_host_keys=False, verbose=False,
              allow_reboot=False, limit=None, serial=None, max_fail_percentage=None):
    """Converge hosts to the inventory's state: invoke provision --host trt-l40s-01"""
    code = _provision(host=host, hosts=hosts, group=group, roles=roles, check=check, diff=diff,
                      inventory=inventory, set_=set_, forks=forks,
                      accept_new_host_keys=accept_new_host_keys, verbose=verbose, allow_reboot=allow_reboot,
                      limit=limit, serial=serial, max_fail_percentage=max_fail_percentage)
    if code:
        raise Exit(code=code)


def _provision(*, host=None, hosts=None, group=None, roles=None, check=False, diff=False, inventory="hosts",
               set_=None, forks=10, accept_new_host_keys=False, verbose=False, console=None,
               command="provision", allow_reboot=False, limit=None, serial=None, max_fail_percentage=None) -> int:
    from .ahead import Ahead
    from .rollout import drains_first, parse_max_fail, parse_serial, rollout, validate_hooks, write_retry
    from .runner import Options, exit_code

    # The hosts are connected to while the roles load and the variables are checked (bringup.ahead); not in a
    # rolling run, nor a host whose drain hook must come first.
    with Ahead(enabled=not serial, hold=lambda h: drains_first(h, check),
               accept_new_host_keys=accept_new_host_keys) as ahead:
        try:
            opts = Options(check=check, diff=diff, forks=_forks(forks), accept_new_host_keys=accept_new_host_keys,
                           allow_reboot=allow_reboot, ahead=ahead)
            batches, max_fail = parse_serial(serial), parse_max_fail(max_fail_percentage)
            inv, chosen, root, selected, role_vars = prepared(inventory, set_, host, hosts, group, roles, limit,
                                                              ahead=ahead, dial=opts.forks,
                                                              check=None if check else validate_hooks)
        except BringupError as e:
            raise _fail(e) from None
        # Imported and made while the hosts connect and gather their facts.
        from .report import Report, print_host, print_recap, print_rollout_stopped, progress_display
        from .templates import Templates

        console = console or _console()
        templates = Templates(root / "templates")
        report = Report(Path("reports"), command=command, hosts=[h.name for h in chosen], args={
            "hosts": [h.name for h in chosen], "roles": [r.name for r in selected], "check": check,
            "inventory": str(inv.path)})

        def finished(r: HostResult) -> None:
            # Printed and recorded as each host ends: a slow or silent host holds back no one's result.
            if r.status != "not started":
                print_host(r, console, check=check, diff=diff, verbose=verbose)
            report.add(r)

        with _interruptible(console) as stop, progress_display(console, [h.name for h in chosen]) as progress:
            run = rollout(chosen, selected, role_vars, opts, templates, progress, finished,
                          stop=stop, serial=batches, max_fail_percentage=max_fail)
    results = run.results
    print_recap([r for r in results if r.status != "not started"], console)
    if stop.requested:
        _print_interrupted(stop, results, console)
    elif run.stopped:
        print_rollout_stopped(run.stopped, run.never_started, console)
    path = report.write(finished=True)
    console.print(f"report: {path}", style="dim")
    retry = None if check else write_retry(path.parent, results, path.stem)
    if retry:
        console.print(f"retry: --limit @{retry}", style="dim", highlight=False)
    return stop.exit_code if stop.requested else exit_code(results)


@contextmanager
def _interruptible(console: Console) -> Iterator[Stop]:
    """SIGINT/SIGTERM stop the run in order (:class:`Stop`) instead of killing it; yields the Stop.

    The first signal starts no new host or role, the second abandons the steps
    in flight; either way the recap is printed, the report written, and the
    exit code is the signal's (130, 143).
    """
    from .runner import Stop

    stop = Stop()
    if threading.current_thread() is not threading.main_thread():
        yield stop  # signal handlers live in the main thread only
        return

    def handle(signum, _frame) -> None:
        # Plain text, no rich rendering: a handler runs between any two bytecodes of the main thread,
        # even in the middle of an import that rich's rendering would need.
        name = signal.Signals(signum).name
        if stop.request(signum):
            said = (f"{name}: stopping: no new host or role starts, the roles in progress finish "
                    f"({name} again abandons them)")
        else:
            said = f"{name} again: abandoning the steps in flight"
        try:  # straight to fd 2: a buffered stream the main thread is writing would raise a reentrant call
            os.write(2, (said + "\n").encode())
        except OSError:
            pass

    before = {s: signal.signal(s, handle) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for s, h in before.items():
            signal.signal(s, h)


def _print_interrupted(stop: Stop, results: list[HostResult], console: Console) -> None:
    """After the recap: which hosts the signal cut short, and which never started."""
    cut = [r for r in results if r.status == "interrupted"]
    never = [r.host for r in results if r.status == "not started"]
    console.print(f"[bold yellow]INTERRUPTED[/] by {stop.name}", highlight=False)
    for r in cut:
        console.print(f"  {r.host}: {r.message}", markup=False, highlight=False)
    if never:
        console.print(f"  not started: {', '.join(never)}", markup=False, highlight=False)


@task(iterable=["set_"], help={**_SELECT_HELP, "roles": "a subset of roles, comma separated",
                               "forks": "hosts handled in parallel", "verbose": "list no-op resources too",
                               "accept-new-host-keys": "record unknown host keys", "limit": _LIMIT_HELP})
def plan(c, host=None, hosts=None, group=None, roles=None, inventory="hosts", set_=None, forks="10",
         accept_new_host_keys=False, verbose=False, limit=None):
    """Show what provision would change, with diffs (provision --check --diff)."""
    code = _provision(host=host, hosts=hosts, group=group, roles=roles, check=True, diff=True,
                      inventory=inventory, set_=set_, forks=forks, accept_new_host_keys=accept_new_host_keys,
                      verbose=verbose, command="plan", limit=limit)
    if code:
        raise Exit(code=code)


@task(iterable=["set_"], help={k: _SELECT_HELP[k] for k in ("host", "inventory", "set")}
      | {"accept-new-host-keys": "record unknown host keys"})
def facts(c, host=None, inventory="hosts", set_=None, accept_new_host_keys=False):
    """Print a host's facts as JSON (gathered in one round trip)."""
    target, values, errors = _host_facts("facts", inventory, set_, host, accept_new_host_keys)
    doc = {"host": target.name, "facts": values}
    if errors:
        doc["errors"] = errors
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")


@task(iterable=["set_"], help={"inventory": _SELECT_HELP["inventory"], "set": _SELECT_HELP["set"]})
def hosts(c, inventory="hosts", set_=None):
    """List the inventory: hosts, groups, address and GPU profile."""
    from rich.table import Table

    try:
        inv = _load(inventory, set_)
    except BringupError as e:
        raise _fail(e) from None
    t = Table("host", "groups", "address", "connection", "gpu_profile", box=None)
    for h in inv.hosts.values():
        conn = h.connection
        addr = f"{conn.ansible_user or 'root'}@{h.address}:{conn.ansible_port}" if conn.ansible_connection != "local" \
            else "(local)"
        t.add_row(h.name, ",".join(h.vars["group_names"]), addr, conn.ansible_connection,
                  str(h.vars.get("gpu_profile", "-")))
    _console().print(t)


@task(help={"keep": "leave the sandbox host running afterwards"})
def sandbox(c, keep=False):
    """Start a sandbox host (a systemd container), provision it (plan, apply, re-run), serve a model, prove latency."""
    # The test harness lives in the checkout, next to bringup/ (an editable install finds it there);
    # it does not ship.
    checkout = Path(__file__).resolve().parents[1]
    if (checkout / "harness" / "__init__.py").is_file() and str(checkout) not in sys.path:
        sys.path.append(str(checkout))
    try:
        from harness import SANDBOX_VARS, SandboxError, build_image, ensure_docker, start_host, write_inventory
        from harness.example import BENCH, cpu_split, example_vars
        from harness.triton_image import build_triton_image
    except ModuleNotFoundError as e:
        if e.name != "harness":
            raise
        raise Exit("error: `invoke sandbox` runs from a checkout of bringup (its harness/ package is not here)",
                   code=1) from None

    from rich.text import Text

    console = _console()
    name = "sandbox-01"
    workdir = Path(".sandbox").resolve()
    try:
        ensure_docker()
        build_image()
        triton_image = build_triton_image()  # a TEST DOUBLE of NGC's image: no registry is reachable here
        host = start_host(name, workdir=workdir)
    except SandboxError as e:
        raise _fail(e) from None
    inv = workdir / "hosts"
    triton_cpus, client_cpus = cpu_split()
    write_inventory(inv, [host], extra_vars={**SANDBOX_VARS, **example_vars(triton_image, workdir, triton_cpus)})
    try:
        codes = []
        for title, check in (("plan", True), ("apply", False), ("re-run (expect changed=0)", False)):
            console.rule(f"[bold]sandbox: {title}")
            codes.append(_provision(host=name, inventory=str(inv), check=check, diff=check,
                                    console=console, command=f"sandbox-{title.split()[0]}"))
        latency = None
        if not any(codes):
            console.rule("[bold]sandbox: latency (a short benchmark of the example model)")
            bench(c, host=name, inventory=str(inv), address=host.address(), client_cpus=client_cpus or None, **BENCH)
            console.rule("[bold]sandbox: checklist")
            pages, stop = _checklist(host=name, inventory=str(inv), out="reports/checklist")
            if stop.requested:
                codes.append(stop.exit_code)
            latency = next((k for k in pages.get(name, []) if k.area == "latency"), None)
    except SandboxError as e:
        raise _fail(e) from None
    finally:
        if not keep:
            host.remove()
    if keep:
        console.print(f"sandbox host kept: ssh -i {host.key_file} -p {host.port} root@127.0.0.1 "
                      f"(inventory {inv})")
    if any(codes):
        raise Exit(code=max(codes))
    console.print(Text.assemble((f"sandbox: {latency.status}", "bold"), f" {latency.name}: {latency.seen}") if latency
                  else "[bold]sandbox: no latency line")
    if latency is None or latency.status != "PASS":
        raise Exit(code=2)


@task(iterable=["set_"], help={**_SELECT_HELP, "roles": "audit only these roles, comma separated",
                               "forks": "hosts audited in parallel (default 10)",
                               "accept-new-host-keys": "record unknown host keys (a changed key is still refused)"})
def audit(c, host=None, hosts=None, group=None, roles=None, inventory="hosts", set_=None, forks="10",
          accept_new_host_keys=False):
    """Is each host in the state its roles declare? Check mode only; one line per failed item; JUnit + JSON in
    reports/. Exit 0 all good, 2 drift, 4 unreachable."""
    from .ahead import Ahead
    from .audit import run_audit
    from .templates import Templates

    # The hosts are connected to while the roles load and the variables are checked (bringup.ahead).
    with Ahead(accept_new_host_keys=accept_new_host_keys) as ahead:
        try:
            n = _forks(forks)
            _, chosen, root, selected, role_vars = prepared(inventory, set_, host, hosts, group, roles,
                                                            ahead=ahead, dial=n)
            console = _console()
            with _interruptible(console) as stop:
                code, results = run_audit(chosen, selected, role_vars, Templates(root / "templates"),
                                          Path("reports"), forks=n, accept_new_host_keys=accept_new_host_keys,
                                          say=lambda line: console.print(line, markup=False, highlight=False),
                                          stop=stop, ahead=ahead)
        except BringupError as e:
            raise _fail(e) from None
    if stop.requested:
        _print_interrupted(stop, results, console)
        code = stop.exit_code
    if code:
        raise Exit(code=code)


@task(iterable=["set_"], help={**_SELECT_HELP, "roles": "roles whose drift is checked (default all)",
                               "out": "folder for the Markdown and HTML pages (default reports/checklist)",
                               "accept-new-host-keys": "record unknown host keys",
                               "facts": "a saved `invoke facts` JSON: plan the host's checklist without connecting"})
def checklist(c, host=None, hosts=None, group=None, roles=None, inventory="hosts", set_=None,
              out="reports/checklist", accept_new_host_keys=False, facts=None):
    """Rack bring-up checklist: PASS/WARN/FAIL per host, Markdown + HTML with a topology picture."""
    from .checklist import verdict

    pages, stop = _checklist(host=host, hosts=hosts, group=group, roles=roles, inventory=inventory, set_=set_,
                             out=out, accept_new_host_keys=accept_new_host_keys, facts=facts)
    if stop.requested:
        raise Exit(code=stop.exit_code)
    if any(verdict(cs) == "FAIL" for cs in pages.values()):
        raise Exit(code=2)


def _checklist(*, host=None, hosts=None, group=None, roles=None, inventory="hosts", set_=None,
               out="reports/checklist", accept_new_host_keys=False, facts=None) -> tuple[dict, Stop]:
    """Run, print and write the checklist pages; return ``({host: checks}, the run's Stop)``.

    A signal (SIGINT, SIGTERM) starts no further host; the pages of the hosts done are printed and
    written, then the hosts left out are named.
    """
    from .ahead import Ahead
    from .checklist import FACTS, render_group_html, render_markdown, run_checklist
    from .templates import Templates

    console = _console()
    # The first host is connected to while the roles load and the variables are checked (bringup.ahead); the
    # hosts are checked one after another, so the others connect in their turn.
    with Ahead(enabled=not facts, extra_facts=FACTS, accept_new_host_keys=accept_new_host_keys) as ahead:
        try:
            _, chosen, root, selected, role_vars = prepared(inventory, set_, host, hosts, group, roles,
                                                            ahead=ahead, dial=1)
            if facts and len(chosen) != 1:
                raise BringupError("--facts FILE holds one host's facts: pass one --host")
            # The hosts are checked in a worker thread: the main thread only waits, so a signal's handler
            # never runs in the middle of a host's work.
            from concurrent.futures import ThreadPoolExecutor

            with _interruptible(console) as stop, ThreadPoolExecutor(1) as pool:
                pages = pool.submit(run_checklist, chosen, selected, role_vars, Templates(root / "templates"), out,
                                    accept_new_host_keys=accept_new_host_keys, facts_file=facts, stop=stop,
                                    ahead=ahead).result()
        except BringupError as e:
            raise _fail(e) from None
    for name, checks in pages.items():
        console.print(render_markdown(name, checks), markup=False, highlight=False)
    if group:
        (Path(out) / "index.html").write_text(render_group_html(group, pages))
    console.print(f"checklist pages: {out}/", style="dim")
    if stop.requested:
        left = [h.name for h in chosen if h.name not in pages]
        console.print(f"[bold yellow]INTERRUPTED[/] by {stop.name}", highlight=False)
        if left:
            console.print(f"  no checklist: {', '.join(left)}", markup=False, highlight=False)
    return pages, stop


@task(iterable=["set_"], help={k: _SELECT_HELP[k] for k in ("host", "inventory", "set")}
      | {"json": "print the plan as JSON", "accept-new-host-keys": "record unknown host keys",
         "facts": "a saved `invoke facts` JSON: plan without connecting"})
def topology(c, host=None, inventory="hosts", set_=None, json_=False, accept_new_host_keys=False, facts=None):
    """Explain the CPU/IRQ plan of a host: IRQ, Triton and other CPUs per NUMA node, and warnings."""
    from .topology import format_plan, plan_topology, validate_vars

    target, values, _ = _host_facts("topology", inventory, set_, host, accept_new_host_keys,
                                    validate=validate_vars, facts_file=facts)
    try:
        result = plan_topology(values, target.vars)
    except BringupError as e:
        raise _fail(f"host {target.name}: {e}") from None
    if json_:
        sys.stdout.write(json.dumps({"host": target.name, "plan": result.to_dict()}, indent=2) + "\n")
        return
    format_plan(result, _console(), title=target.name)



from .latency.tasks import bench, tune_window  # noqa: E402 - the latency tasks use the helpers above

from .engines_task import engines  # noqa: E402 - a thin task over _provision above
from .drift import drift  # noqa: E402 - the drift report plans through prepared above

ns = Collection(provision, plan, facts, hosts, sandbox, audit, checklist, topology, bench, tune_window, engines, drift)
program = _Program(namespace=ns, version=__version__, name="bringup", binary="bringup")


def main() -> None:
    """Entry point of the ``bringup`` console script.

    A reader that goes away (``bringup --help | head``) ends the program as it ends ``git log | head``:
    quietly, exit 141 (128 + SIGPIPE), no traceback.
    """
    try:
        program.run()
        sys.stdout.flush()
    except BrokenPipeError:
        if not stdout_gone():
            raise
        reader_gone()
