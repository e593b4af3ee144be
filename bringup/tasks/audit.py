"""``invoke audit``: is each host in the state its roles declare? Check mode only."""
from __future__ import annotations

from pathlib import Path

from invoke import Exit, task

from .context import SELECTION, options, print_interrupted, running

__all__ = ["audit"]


@task(iterable=["set_"], help=options(*SELECTION, "accept-new-host-keys") | {
    "roles": "audit only these roles, comma separated", "forks": "hosts audited in parallel (default 10)"})
def audit(c, host=None, hosts=None, group=None, roles=None, inventory="hosts", set_=None, forks="10",
          accept_new_host_keys=False):
    """Is each host in the state its roles declare? Check mode only; one line per failed item; JUnit + JSON in
    reports/. Exit 0 all good, 2 drift, 4 unreachable."""
    from ..audit import run_audit

    # The hosts are connected to while the roles load and the variables are checked (bringup.ahead).
    with running(inventory, set_, host, hosts, group, roles, forks=forks,
                 accept_new_host_keys=accept_new_host_keys) as run:
        code, results = run_audit(run.hosts, run.roles, run.role_vars, run.templates, Path("reports"),
                                  forks=run.forks, accept_new_host_keys=accept_new_host_keys,
                                  say=lambda line: run.console.print(line, markup=False, highlight=False),
                                  stop=run.stop, ahead=run.ahead)
    if run.stop.requested:
        print_interrupted(run.stop, results, run.console)
        code = run.stop.exit_code
    if code:
        raise Exit(code=code)
