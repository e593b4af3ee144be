"""``invoke provision``, ``plan`` and ``engines``: converge hosts to the inventory's state, or say what would change."""
from __future__ import annotations

from typing import TYPE_CHECKING

from invoke import Exit

from .context import REPEATED, SELECTION, failing, options, parse_forks, print_interrupted, running
from .context import task  # Invoke's @task, an empty flag value refused first

if TYPE_CHECKING:
    from ..engine.results import HostResult

__all__ = ["provision", "plan", "engines", "converge", "ENGINES_ROLE"]

#: The role that declares the TensorRT engines (roles/trt_engines.py): ``invoke engines`` runs it alone.
ENGINES_ROLE = "trt_engines"


def converge(*, host=None, hosts=None, group=None, roles=None, check=False, diff=False, inventory=None,
             set_=None, forks=10, accept_new_host_keys=False,
             verbose=False, command="provision",
             allow_reboot=False, limit=None, serial=None, max_fail_percentage=None,
             vault_password_file=None, vault_id=None) -> int:
    """Run (or, ``check``, plan) the roles on the selected hosts, print each host and the recap, write the report
    (and ``reports/*.retry``); return the exit code.  Bad input raises Invoke's Exit (one line, code 1)."""
    # The flags and the hooks are checked without the run's engine, which loads while the hosts log in.
    from ..engine.rollout_input import drains_first, parse_max_fail, parse_serial, validate_hooks

    from ..outfile import reports_folder

    with failing():
        n = parse_forks(forks)
        batches, max_fail = parse_serial(serial), parse_max_fail(max_fail_percentage)
        reports = reports_folder()  # before anything connects: a link there was written through, a file a traceback
    # The hosts are connected to while the roles load and the variables are checked; not in a rolling run, nor a
    # host whose drain hook must come first.
    with running(inventory, set_, host, hosts, group, roles, limit=limit, forks=n, connect_ahead=not serial,
                 hold=lambda h: drains_first(h, check), accept_new_host_keys=accept_new_host_keys,
                 check=None if check else validate_hooks, vault=(vault_password_file, vault_id),
                 lock=not check) as run:
        from ..engine.report import Report, print_host, print_recap, print_rollout_stopped, progress_display
        from ..engine.results import exit_code
        from ..engine.rollout import rollout, write_retry
        from ..engine.runner import Options

        opts = Options(check=check, diff=diff, forks=n, accept_new_host_keys=accept_new_host_keys,
                       allow_reboot=allow_reboot, ahead=run.ahead)
        names = [h.name for h in run.hosts]
        report = Report(reports, command=command, hosts=names, args={
            "hosts": names, "roles": [r.name for r in run.roles], "check": check,
            "inventory": str(run.inventory.path)})

        def finished(r: HostResult) -> None:
            # Printed and recorded as each host ends: a slow or silent host holds back no one's result.
            if r.status != "not started":
                print_host(r, run.console, check=check, diff=diff, verbose=verbose)
            report.add(r)

        with progress_display(run.console, names) as progress:
            rolled = rollout(run.hosts, run.roles, run.role_vars, opts, run.templates, progress, finished,
                             stop=run.stop, serial=batches, max_fail_percentage=max_fail)
    console, stop, results = run.console, run.stop, rolled.results
    print_recap([r for r in results if r.status != "not started"], console)
    if stop.requested:
        print_interrupted(stop, results, console)
    elif rolled.stopped:
        print_rollout_stopped(rolled.stopped, rolled.never_started, console)
    path = report.write(finished=True)
    console.print(f"report: {path}", style="dim")
    retry = None if check else write_retry(path.parent, results, path.stem)
    if retry:
        console.print(f"retry: --limit @{retry}", style="dim", highlight=False)
    return stop.exit_code if stop.requested else exit_code(results)


def _ended(code: int) -> None:
    if code:
        raise Exit(code=code)


@task(
    iterable=REPEATED,
    help=options(*SELECTION, "forks", "accept-new-host-keys", "limit") | {
        "roles": "a subset of roles, comma separated (run in the standard order)",
        "check": "plan only: change nothing on the host",
        "diff": "show unified diffs of changed files",
        "verbose": "also list resources with nothing to do, and why",
        "allow-reboot": "reboot a host whose new state needs it (a driver), wait for SSH, verify, go on",
        "serial": "rolling batches, Ansible's serial: sizes or percentages, the last repeating (1,25%)",
        "max-fail-percentage": "stop the rollout when more than N% of a batch failed (0: at the first failure)",
    },
)
def provision(c, host=None, hosts=None, group=None, roles=None, check=False, diff=False,
              inventory=None, set_=None, forks="10", accept_new_host_keys=False, verbose=False,
              allow_reboot=False, limit=None, serial=None, max_fail_percentage=None,
              vault_password_file=None, vault_id=None):
    """Converge hosts to the inventory's state (--host trt-l40s-01, --group, --roles)."""
    _ended(converge(host=host, hosts=hosts, group=group, roles=roles, check=check, diff=diff, inventory=inventory,
                    vault_password_file=vault_password_file, vault_id=vault_id,
                    set_=set_, forks=forks, accept_new_host_keys=accept_new_host_keys, verbose=verbose,
                    allow_reboot=allow_reboot, limit=limit, serial=serial, max_fail_percentage=max_fail_percentage))


@task(iterable=REPEATED, help=options(*SELECTION, "forks", "accept-new-host-keys", "limit") | {
    "roles": "a subset of roles, comma separated", "verbose": "list no-op resources too"})
def plan(c, host=None, hosts=None, group=None, roles=None, inventory=None, set_=None, forks="10",
         accept_new_host_keys=False, verbose=False, limit=None, vault_password_file=None, vault_id=None):
    """Show what provision would change, with diffs (provision --check --diff)."""
    _ended(converge(host=host, hosts=hosts, group=group, roles=roles, check=True, diff=True, inventory=inventory,
                    vault_password_file=vault_password_file, vault_id=vault_id,
                    set_=set_, forks=forks, accept_new_host_keys=accept_new_host_keys, verbose=verbose,
                    command="plan", limit=limit))


@task(iterable=REPEATED, help=options(*SELECTION, "forks", "accept-new-host-keys") | {
    "check": "dry run: say which engines would be rebuilt and why (which part of the key changed)"})
def engines(c, host=None, hosts=None, group=None, check=False, inventory=None, set_=None, forks="10",
            accept_new_host_keys=False, vault_password_file=None, vault_id=None):
    """TensorRT engines per GPU class, built by trtexec in NVIDIA's TensorRT container."""
    # Every resource is listed, up-to-date engines with their key: the answer to "is this host's plan current?".
    _ended(converge(host=host, hosts=hosts, group=group, roles=ENGINES_ROLE, check=check, diff=False,
                    inventory=inventory,
                    vault_password_file=vault_password_file, vault_id=vault_id, set_=set_, forks=forks,
                    accept_new_host_keys=accept_new_host_keys,
                    verbose=True, command="engines"))
