"""``invoke checklist``: the rack bring-up checklist, PASS/WARN/FAIL per host, Markdown and HTML pages."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from invoke import Exit

from ..errors import BringupError
from ..outfile import write_atomic
from ..process import command
from .context import REPEATED, SELECTION, failing, options, running
from .context import task  # Invoke's @task, an empty flag value refused first

if TYPE_CHECKING:
    from ..ssh.stop import Stop

__all__ = ["checklist", "checklist_pages"]


@task(iterable=REPEATED, help=options(*SELECTION, "accept-new-host-keys") | {
    "roles": "roles whose drift is checked (default all)",
    "out": "folder for the Markdown, HTML and JSON pages (default reports/checklist)",
    "facts": f"a saved `{command('facts')}` (or `{command('facts --raw')}`) JSON: plan the host's checklist "
             "without connecting"})
def checklist(c, host=None, hosts=None, group=None, roles=None, inventory=None, set_=None,
              out="reports/checklist", accept_new_host_keys=False, facts=None,
              vault_password_file=None, vault_id=None):
    """Rack bring-up checklist: PASS/WARN/FAIL per host, Markdown + HTML with a topology picture."""
    from ..checklist.pages import verdict

    pages, stop = checklist_pages(host=host, hosts=hosts, group=group, roles=roles, inventory=inventory, set_=set_,
                                   vault_password_file=vault_password_file, vault_id=vault_id,
                                  out=out, accept_new_host_keys=accept_new_host_keys, facts=facts)
    if stop.requested:
        raise Exit(code=stop.exit_code)
    if any(verdict(cs) == "FAIL" for cs in pages.values()):
        raise Exit(code=2)


def checklist_pages(*, host=None, hosts=None, group=None, roles=None, inventory=None, set_=None,
                    out="reports/checklist", accept_new_host_keys=False, facts=None,
                    vault_password_file=None, vault_id=None) -> tuple[dict, Stop]:
    """Run, print and write the checklist pages; return ``({host: checks}, the run's Stop)``.

    A signal (SIGINT, SIGTERM) starts no further host; the pages of the hosts done are printed and
    written, then the hosts left out are named.
    """
    from ..checklist.pages import FACTS, GROUP_PAGE, group_page_free, render_group_html, render_markdown, run_checklist
    from ..latency.options import out_folder

    with failing():
        out_folder(out)  # before anything connects: a file there was Python's traceback after the run
    # The first host is connected to while the roles load and the variables are checked (bringup.engine.ahead); the
    # hosts are checked one after another, so the others connect in their turn.
    from ..hardware.health import check_vars

    def check(found) -> None:
        check_vars(found)
        if group:
            group_page_free(found)

    with running(inventory, set_, host, hosts, group, roles, forks=1, connects=not facts, extra_facts=FACTS,
                 accept_new_host_keys=accept_new_host_keys, check=check, vault=(vault_password_file, vault_id),
                 reads=True) as run:
        if facts and len(run.hosts) != 1:
            raise BringupError("--facts FILE holds one host's facts: pass one --host")
        # The hosts are checked in a worker thread: the main thread only waits, so a signal's handler
        # never runs in the middle of a host's work.
        from concurrent.futures import ThreadPoolExecutor

        from ..ssh.stop import result_awake

        with ThreadPoolExecutor(1) as pool:
            pages = result_awake(pool.submit(run_checklist, run.hosts, run.roles, run.role_vars, run.templates,
                                             out, accept_new_host_keys=accept_new_host_keys, facts_file=facts,
                                             stop=run.stop, ahead=run.ahead))
    console, stop = run.console, run.stop
    for name, checks in pages.items():
        console.print(render_markdown(name, checks, terminal=True), markup=False, highlight=False)
    if group:
        Path(out).mkdir(parents=True, exist_ok=True)
        write_atomic(Path(out) / f"{GROUP_PAGE}.html", render_group_html(group, pages), errors="backslashreplace")
    if pages or group:  # a stop before any host's page: nothing was written there
        console.print(f"checklist pages: {out}/", style="dim")
    if stop.requested:
        left = [h.name for h in run.hosts if h.name not in pages]
        console.print(f"[bold yellow]INTERRUPTED[/] by {stop.name}", highlight=False)
        if left:
            console.print(f"  no checklist: {', '.join(left)}", markup=False, highlight=False)
    return pages, stop
