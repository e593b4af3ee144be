"""``invoke audit``: is each host in the state its roles declare? Check mode only.

``--testinfra PATH`` runs a site's testinfra tests on each host beside it (:mod:`bringup.testinfra.suite`);
``--export-testinfra DIR`` writes the roles' audit as testinfra modules instead (:mod:`bringup.testinfra.export`).
"""
from __future__ import annotations

import sys

from invoke import Exit

from .context import REPEATED, SELECTION, fail, failing, options, print_interrupted, running
from .context import task  # Invoke's @task, an empty flag value refused first

__all__ = ["audit"]


@task(iterable=REPEATED, help=options(*SELECTION, "accept-new-host-keys") | {
    "roles": "audit only these roles, comma separated", "forks": "hosts audited in parallel (default 10)",
    "testinfra": "also run these testinfra tests (a file or a folder) on each host, through bringup's connection; "
                 "in the same recap and reports. They run as the login user (ansible_user), without become: "
                 "bringup runs whatever they run, so a test that writes changes the host",
    "testinfra-timeout": "seconds a host's testinfra tests may take, all together, before they are ended, with "
                         "what they run on the host (default 600)",
    "testinfra-become": "run the testinfra tests with the inventory's become (ansible_become: root, usually), "
                        "as the built-in audit reads",
    "export-testinfra": "write the roles' audit as testinfra modules, DIR/<host>/test_<role>.py, and audit nothing"})
def audit(c, host=None, hosts=None, group=None, roles=None, inventory=None, set_=None,
          forks="10",
          accept_new_host_keys=False, testinfra=None, export_testinfra=None, vault_password_file=None, vault_id=None,
          testinfra_timeout=None, testinfra_become=False):
    """Is each host in the state its roles declare? Check mode only, one line per failed item.

    JUnit + JSON in reports/. Exit 0 all good, 2 drift, 4 unreachable."""
    if testinfra is not None and export_testinfra is not None:
        raise fail("--testinfra and --export-testinfra: give one of them (export, then run the modules with "
                   "--testinfra DIR)")
    if testinfra is None and (testinfra_timeout is not None or testinfra_become):
        raise fail("--testinfra-timeout and --testinfra-become go with --testinfra PATH")
    if export_testinfra is not None:
        return _export(host, hosts, group, roles, inventory, set_, forks, accept_new_host_keys, export_testinfra,
                       (vault_password_file, vault_id))
    from ..checklist.audit import run_audit
    from ..outfile import reports_folder

    with failing():
        reports = reports_folder()  # before anything connects: a link there was written through, a file a traceback
    suite = None
    if testinfra is not None:
        from ..testinfra.suite import Suite

        with failing():
            suite = Suite.of(testinfra, inventory, set_, (vault_password_file, vault_id), timeout=testinfra_timeout,
                             become=testinfra_become)
    # The hosts are connected to while the roles load and the variables are checked (bringup.engine.ahead); the
    # testinfra tests are collected once meanwhile (bad tests are bad input).
    with running(inventory, set_, host, hosts, group, roles, forks=forks, accept_new_host_keys=accept_new_host_keys,
                 check=(lambda chosen: suite.preflight(chosen[0])) if suite else None,
                 vault=(vault_password_file, vault_id), reads=True) as run:
        if suite is not None:
            suite.stop = run.stop
            if notice := suite.root_notice(run.hosts):
                print(notice, file=sys.stderr)
        code, results = run_audit(run.hosts, run.roles, run.role_vars, run.templates, reports,
                                  forks=run.forks, accept_new_host_keys=accept_new_host_keys,
                                  say=lambda line: run.console.print(line, markup=False, highlight=False),
                                  stop=run.stop, ahead=run.ahead, also=suite.also if suite else None,
                                  extra=(lambda: {"testinfra": suite.summary()}) if suite else None)
    if run.stop.requested:
        print_interrupted(run.stop, results, run.console)
        code = run.stop.exit_code
    if code:
        raise Exit(code=code)


def _export(host, hosts, group, roles, inventory, set_, forks, accept_new_host_keys, where, vault) -> None:
    """``--export-testinfra DIR``: each selected host's roles as testinfra modules; exit 4 unreachable, 2 a role
    that could not be declared."""
    from ..engine.runner import Options
    from ..testinfra.export import export, refuse_foreign, target

    with failing():
        out = target(where)
    with running(inventory, set_, host, hosts, group, roles, forks=forks, accept_new_host_keys=accept_new_host_keys,
                 check=lambda chosen: refuse_foreign(out, chosen), vault=vault) as run:
        opts = Options(check=True, forks=run.forks, accept_new_host_keys=accept_new_host_keys, ahead=run.ahead)
        code = export(run.hosts, run.roles, run.role_vars, run.templates, out, opts, str(run.inventory.path),
                      say=lambda line: run.console.print(line, markup=False, highlight=False), stop=run.stop)
    if run.stop.requested:
        code = run.stop.exit_code
    if code:
        raise Exit(code=code)
