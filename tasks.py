"""Invoke entry point of the checkout: `invoke provision --host trt-l40s-01`, `invoke --list`.

bringup's tasks (the collection of the `bringup` program), and `sandbox`, which runs from a checkout only:
it drives the test harness (harness/, beside this file; it does not ship).
"""
from pathlib import Path

from invoke import Collection, Exit, task

from bringup.process import freeze_at_exit, keep_bytecode, quiet_gc

# The program's start.  Invoke turned bytecode writing off before it imported this file: what the tasks import
# keeps its bytecode cache (bringup.process.keep_bytecode), the collector runs rarely and the run's objects are
# frozen once imported and at exit.
keep_bytecode()
quiet_gc()
freeze_at_exit()

from bringup.cli import ns as bringup_tasks  # noqa: E402 - imported under the setting above


@task(help={"keep": "leave the sandbox host running afterwards (remove it with --down)",
            "down": "remove the sandbox host a --keep run left, and nothing else"})
def sandbox(c, keep=False, down=False):
    """Start a sandbox host (a systemd container), provision it (plan, apply, re-run), serve a model, prove latency."""
    from rich.text import Text

    from bringup.tasks.checklist import checklist_pages
    from bringup.tasks.context import console, fail
    from bringup.tasks.converge import converge
    from bringup.tasks.latency import bench
    from harness import SANDBOX_VARS, SandboxError, build_image, ensure_docker, start_host, write_inventory
    from harness.example import BENCH, cpu_split, example_vars, free_ports
    from harness.triton_image import build_triton_image

    out = console()
    name = "sandbox-01"
    workdir = Path(".sandbox").resolve()
    if down:
        from harness.host import remove_named

        try:
            gone = remove_named(name)
        except SandboxError as e:
            raise fail(e) from None
        out.print(f"sandbox: removed {name} ({', '.join(gone)})" if gone else f"sandbox: no {name} is running")
        return
    try:
        ensure_docker()
        image = build_image()
        triton_image = build_triton_image()  # a TEST DOUBLE of NGC's image: no registry is reachable here
        # Triton's ports published on 127.0.0.1 as SSH is, under the numbers the inventory gives them: the
        # README's commands (invoke bench --host sandbox-01) reach it as they reach a rack's host.
        http, grpc, metrics = free_ports(3)
        host = start_host(name, workdir=workdir, image=image, ports=(http, grpc, metrics))
    except SandboxError as e:
        raise fail(e) from None
    inv = workdir / "hosts"
    triton_cpus, client_cpus = cpu_split()
    write_inventory(inv, [host], extra_vars={**SANDBOX_VARS, **example_vars(triton_image, workdir, triton_cpus),
                                             "triton_ports": {"http": http, "grpc": grpc, "metrics": metrics}})
    try:
        codes = []
        for title, check in (("plan", True), ("apply", False), ("re-run (expect changed=0)", False)):
            out.rule(f"[bold]sandbox: {title}")
            codes.append(converge(host=name, inventory=str(inv), check=check, diff=check,
                                  command=f"sandbox-{title.split()[0]}"))
        latency = None
        if not any(codes):
            out.rule("[bold]sandbox: latency (a short benchmark of the example model)")
            bench(c, host=name, inventory=str(inv), client_cpus=client_cpus or None, **BENCH)
            out.rule("[bold]sandbox: checklist")
            pages, stop = checklist_pages(host=name, inventory=str(inv), out="reports/checklist")
            if stop.requested:
                codes.append(stop.exit_code)
            latency = next((k for k in pages.get(name, []) if k.area == "latency"), None)
    except SandboxError as e:
        raise fail(e) from None
    finally:
        if not keep:
            host.remove()
    if keep:
        rel = inv.relative_to(Path.cwd()) if inv.is_relative_to(Path.cwd()) else inv
        out.print(f"sandbox host kept: ssh -i {host.key_file} -p {host.port} root@127.0.0.1; every README command "
                  f"works on it with --inventory {rel} (invoke bench --host {name} --inventory {rel}); "
                  "remove it with: invoke sandbox --down", markup=False, highlight=False)
    if any(codes):
        raise Exit(code=max(codes))
    out.print(Text.assemble((f"sandbox: {latency.status}", "bold"), f" {latency.name}: {latency.seen}") if latency
              else "[bold]sandbox: no latency line")
    if latency is None or latency.status != "PASS":
        raise Exit(code=2)


# Invoke finds the `ns` collection.
ns = Collection(*bringup_tasks.tasks.values(), sandbox)
