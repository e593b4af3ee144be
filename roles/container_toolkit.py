"""NVIDIA Container Toolkit from NVIDIA's repository (signed-by keyring), pinned, held; Docker's nvidia runtime.

The four packages move together at one version.  ``/etc/docker/daemon.json``
is never replaced: ``nvidia-ctk runtime configure --runtime=docker`` (which
merges) runs only when the file lacks the runtime, after a backup; Docker is
restarted only when ``docker info`` does not list the runtime yet, and the
re-read checks that it does.

Variables:
    container_toolkit_version: ``1.17.6-1`` (all four packages).
    container_toolkit_repo: ``{url, suite, components, key | key_url, key_sha256}``
        (default NVIDIA's: nvidia.github.io/libnvidia-container, flat, gpgkey).
    container_toolkit_default_runtime: make nvidia Docker's default runtime (``--set-as-default``).
    container_toolkit_hold: true.  nvidia_without_gpu, apt_lock_timeout: as nvidia_driver.
"""
from __future__ import annotations

from bringup.inventory.vars import RoleVars, want
from bringup.hardware.gpu import gpu_gate
from bringup.resources import Packages
from bringup.resources.guard import Fail, Probe
from bringup.resources.hold import Hold
from bringup.resources.jsonfile import JsonFile
from bringup.resources.apt import check_repo_var, os_family, repo_from_var
from bringup.hardware import gpu
from bringup.resources import apt

PACKAGES = ("nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools",
            "libnvidia-container1")

#: The facts this role reads (only these are gathered for it).
FACTS = (*gpu.FACTS, *apt.OS_FACTS)

class Vars(gpu.GpuVars, apt.AptVars, RoleVars):
    container_toolkit_version: str = want("1.17.6-1", "must be a version like 1.17.6-1",
                                          pattern=r"^\d+\.\d+\.\d+[0-9A-Za-z.+~*_-]*$")
    container_toolkit_repo: apt.RepoSpec | None = want({
        "url": "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)",
        "suite": "/",
        "key_url": "https://nvidia.github.io/libnvidia-container/gpgkey",
    }, "must be a mapping with url, suite, and key (control-machine path) or key_url")
    container_toolkit_default_runtime: bool = False
    container_toolkit_hold: bool = True


DAEMON_JSON = "/etc/docker/daemon.json"


def validate(vars: dict) -> None:
    """The repository's key file, on the control machine (what a type cannot say)."""
    check_repo_var(vars.get("container_toolkit_repo"), "container_toolkit_repo")


def resources(host):
    v = host.vars
    gate = gpu_gate(host, "container toolkit")
    if gate:
        return gate
    fam, osid, _ = os_family(host.facts)
    if fam != "apt":
        return [Fail("container toolkit", f"OS {osid or 'unknown'}: this role covers Debian and Ubuntu (apt)")]
    lock = int(v["apt_lock_timeout"])
    ver = v["container_toolkit_version"]
    default = v["container_toolkit_default_runtime"]
    keys: dict = {"runtimes": {"nvidia": {"args": [], "path": "nvidia-container-runtime"}}}
    if default:
        keys["default-runtime"] = "nvidia"
    ctk = "nvidia-ctk runtime configure --runtime=docker" + (" --set-as-default" if default else "")
    check = "docker info --format '{{json .Runtimes}}' | grep -q '\"nvidia\"'"
    if default:
        check += " && [ \"$(docker info --format '{{.DefaultRuntime}}')\" = nvidia ]"
    out: list = [
        repo_from_var("nvidia-container-toolkit", v["container_toolkit_repo"], lock_timeout=lock),
        Packages({p: ver for p in PACKAGES}, allow_change_held=True, lock_timeout=lock),
    ]
    if v["container_toolkit_hold"]:
        out.append(Hold(list(PACKAGES)))
    out += [
        JsonFile(DAEMON_JSON, keys, command=ctk),
        # Restart only when the running daemon does not have the runtime yet.
        Probe("docker info lists the nvidia runtime" + (" as default" if default else ""), check,
              fix="systemctl restart docker", wait=30,
              hint="is Docker installed and running? the docker role runs before this one"),
    ]
    return out
