"""``invoke drift``: which hosts drifted from the inventory; the report itself is :mod:`bringup.engine.drift`."""
from __future__ import annotations


from invoke import Exit

from .context import REPEATED, SELECTION, fail, failing, options, running
from .context import task  # Invoke's @task, an empty flag value refused first

__all__ = ["drift"]


@task(iterable=REPEATED, help=options(*SELECTION, "accept-new-host-keys", "limit") | {
    "group": "every host of an inventory group (all: the whole inventory)",
    "roles": "a subset of roles, comma separated (default all)",
    "forks": "hosts planned in parallel (default 10)",
    "json": "print the report as JSON instead of the table",
    "prometheus": "also write the report as Prometheus text to FILE (*.prom, for the textfile collector)",
})
def drift(c, host=None, hosts=None, group=None, roles=None, inventory=None, set_=None,
          forks="10", json_=False,
          prometheus=None, accept_new_host_keys=False, limit=None, vault_password_file=None, vault_id=None):
    """Which hosts drifted from the inventory: every host planned in check mode, one table host x role."""
    import json

    from ..engine.drift import check_prometheus_path, render_table, summarize, to_json, write_prometheus
    from ..engine.runner import Options, run_hosts

    from ..outfile import reports_folder

    with failing():
        prom = check_prometheus_path(prometheus) if prometheus else None
        reports = reports_folder()  # before anything connects: a link there was written through, a file a traceback
    # The hosts are connected to while the roles load and the variables are checked (bringup.engine.ahead).
    with running(inventory, set_, host, hosts, group, roles, limit=limit, forks=forks,
                 accept_new_host_keys=accept_new_host_keys, vault=(vault_password_file, vault_id), reads=True) as run:
        from ..engine.report import Report

        opts = Options(check=True, forks=run.forks, accept_new_host_keys=accept_new_host_keys, ahead=run.ahead)
        report_file = Report(reports, command="drift", hosts=[h.name for h in run.hosts], args={
            "hosts": [h.name for h in run.hosts], "roles": [r.name for r in run.roles],
            "inventory": str(run.inventory.path)})
        results = run_hosts(run.hosts, run.roles, run.role_vars, opts, run.templates, on_result=report_file.add,
                            stop=run.stop)
    report_file.write(finished=True)
    report = summarize(results, [r.name for r in run.roles])
    console = run.console
    if json_:
        print(json.dumps(to_json(report), indent=2))
    else:
        console.print(render_table(report))
        for h in report.hosts:
            for role, s in h.roles.items():
                for line in s.failed:
                    console.print(f"{h.host}: {role}: {line}", markup=False, highlight=False, style="red")
    if prom is not None:
        try:
            write_prometheus(report, prom)
        except OSError as e:
            raise fail(f"--prometheus {prom}: {e.strerror or e}") from None
    if run.stop.requested:
        raise Exit(code=run.stop.exit_code)
    if report.exit_code:
        raise Exit(code=report.exit_code)
