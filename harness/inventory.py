"""An Ansible YAML inventory of sandbox hosts."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .host import SandboxHost


#: Variables of sandbox hosts.  vm.* and kernel.* sysctls are not namespaced:
#: in a container they are the machine's own, so the sandbox leaves them alone.
SANDBOX_VARS: dict[str, Any] = {"sysctl": {"vm.swappiness": None, "kernel.numa_balancing": None}}


def write_inventory(path: Path, hosts: list[SandboxHost], group: str = "sandbox",
                    extra_vars: dict[str, Any] | None = None) -> Path:
    """Write an Ansible YAML inventory of ``hosts`` in one group; return ``path``."""
    import yaml

    group_vars: dict[str, Any] = {"gpu_profile": "cpu", **(extra_vars or {})}
    data = {"all": {"children": {group: {
        "hosts": {h.name: h.inventory_vars() for h in hosts},
        "vars": group_vars,
    }}}}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False, default_flow_style=False))
    return path
