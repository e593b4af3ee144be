"""``invoke engines``: the TensorRT engines of hosts (the trt_engines role alone), built where out of date."""
from __future__ import annotations

from invoke import Exit, task

__all__ = ["engines", "ROLE"]

#: The role that declares the engines (roles/trt_engines.py).
ROLE = "trt_engines"


@task(iterable=["set_"], help={
    "host": "one host of the inventory",
    "hosts": "several hosts, comma separated",
    "group": "every host of an inventory group",
    "check": "dry run: say which engines would be rebuilt and why (which part of the key changed)",
    "inventory": "inventory file (Ansible YAML), default ./hosts",
    "set": "KEY=VALUE variable override (highest precedence); repeatable",
    "forks": "hosts handled in parallel (default 10)",
    "accept-new-host-keys": "record unknown host keys (a changed key is still refused)",
})
def engines(c, host=None, hosts=None, group=None, check=False, inventory="hosts", set_=None, forks="10",
            accept_new_host_keys=False):
    """TensorRT engines per GPU class (trtexec in NVIDIA's TensorRT container): invoke engines --host trt-l40s-01"""
    from .cli import _provision

    # Every resource is listed, up-to-date engines with their key: the answer to "is this host's plan current?".
    code = _provision(host=host, hosts=hosts, group=group, roles=ROLE, check=check, diff=False,
                      inventory=inventory, set_=set_, forks=forks, accept_new_host_keys=accept_new_host_keys,
                      verbose=True, command="engines")
    if code:
        raise Exit(code=code)
