"""The NVIDIA driver, pinned to a branch, held, and loaded after a reboot only when it changed.

Packages by source (``nvidia_driver_source``):
    ``ubuntu-server``: Canonical's server packages, ``nvidia-headless-<br>-server``
    (``-open`` with ``nvidia_driver_modules: open``) and ``nvidia-utils-<br>-server``,
    from the distribution (or a mirror given as ``nvidia_driver_repo``).
    ``cuda``: NVIDIA's CUDA repository (``cuda-drivers-<br>``, or ``nvidia-open-<br>``),
    for Ubuntu and Debian 12.
    ``dnf-module``: RHEL-family ``dnf module install nvidia-driver:<br>-dkms``.
    ``auto`` (default): ubuntu-server on Ubuntu, cuda on Debian, dnf-module on RHEL.

Kernel headers for the running kernel go in before the driver (DKMS builds
against them); nouveau is blacklisted and the initramfs rebuilt only when the
blacklist changed; the driver packages are held (``apt-mark hold`` /
``dnf versionlock``) and listed in unattended-upgrades' blacklist.  The
loaded driver is checked through ``nvidia-smi``: not the wanted branch means
"reboot required" (``--allow-reboot`` reboots, waits and checks again).

Variables:
    nvidia_driver_branch: ``550`` (the guide's 535/550 matrix).
    nvidia_driver_version: exact package version or glob (``550.144.03-*``); default any of the branch.
    nvidia_driver_source, nvidia_driver_modules (``proprietary`` | ``open``).
    nvidia_driver_repo: ``{url, suite, components, key | key_url, key_sha256}``; ``key`` is a
        path on the control machine (air gap), ``key_url`` is fetched by the host.
    nvidia_driver_hold: true.  nvidia_driver_blacklist_nouveau: true.
    nvidia_driver_expected_gpus: GPUs nvidia-smi must see (default: the PCI count).
    nvidia_without_gpu: ``skip`` (default) or ``install`` on a host without a GPU.
    apt_lock_timeout: seconds to wait for a dpkg lock held by another process (300).
"""
from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import field_validator, model_validator

from bringup.command import sh
from bringup.vars import RoleVars, defaults_of, want
from bringup.gpu import gpu_gate, nvidia_gpus
from bringup.resources import Command, File, Packages, Service
from bringup.resources.apt import check_repo_var, os_family, repo_from_var
from bringup.resources.guard import Fail
from bringup.resources.systemd import without_systemd
from bringup.resources.hold import Hold
from bringup.resources.nvidia import NvidiaDriverLoaded
from bringup import gpu
from bringup.resources import apt

#: The facts this role reads (only these are gathered for it).
FACTS = (*gpu.FACTS, *apt.OS_FACTS, "os.kernel", "nvidia.smi", "system.systemd")

SOURCES = ("auto", "ubuntu-server", "cuda", "dnf-module")
NOUVEAU_FILE = "/etc/modprobe.d/blacklist-nouveau.conf"
UNATTENDED_FILE = "/etc/apt/apt.conf.d/51bringup-nvidia-no-unattended-upgrade"
PREFERENCES_FILE = "/etc/apt/preferences.d/bringup-nvidia-driver"
CUDA_REPO = "https://developer.download.nvidia.com/compute/cuda/repos/{distro}/x86_64/"

HANDLERS = {
    "rebuild initramfs": [
        "if command -v update-initramfs >/dev/null 2>&1; then update-initramfs -u; "
        "elif command -v dracut >/dev/null 2>&1; then dracut -f; "
        "else echo 'neither update-initramfs nor dracut: initramfs not rebuilt'; fi",
    ],
}


class Vars(gpu.GpuVars, apt.AptVars, RoleVars):
    nvidia_driver_branch: Any = want("550", "must be a driver branch like 550 or 535")
    nvidia_driver_version: str | None = want(None, "is malformed (e.g. 550.144.03-0ubuntu0.24.04.1)",
                                             pattern=r"^[0-9A-Za-z.+~:*_-]+$")
    nvidia_driver_source: Literal[SOURCES] = want("auto", f"must be one of {', '.join(SOURCES)}")
    nvidia_driver_modules: Literal["proprietary", "open"] = want("proprietary", "must be proprietary or open")
    nvidia_driver_repo: apt.RepoSpec | None = want(
        None, "must be a mapping with url, suite, and key (control-machine path) or key_url")
    nvidia_driver_hold: bool = True
    nvidia_driver_blacklist_nouveau: bool = True
    nvidia_driver_expected_gpus: int | None = want(None, "must be a whole number", ge=0)

    @field_validator("nvidia_driver_branch")
    @classmethod
    def _branch(cls, v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, (int, str)) or not re.fullmatch(r"\d{3}", str(v)):
            raise ValueError("must be a driver branch like 550 or 535")
        return v

    @model_validator(mode="after")
    def _on_branch(self) -> "Vars":
        ver, br = self.nvidia_driver_version, str(self.nvidia_driver_branch)
        if ver is not None and not ver.split(":", 1)[-1].startswith(br + "."):
            raise ValueError(f"nvidia_driver_version {ver} is not on nvidia_driver_branch {br}")
        return self


DEFAULTS = defaults_of(Vars)


def validate(vars: dict) -> None:
    """The repository's key file, on the control machine (what a type cannot say)."""
    check_repo_var(vars.get("nvidia_driver_repo"), "nvidia_driver_repo")


def driver_packages(source: str, branch: str, modules: str) -> list[str]:
    if source == "ubuntu-server":
        suffix = "-open" if modules == "open" else ""
        return [f"nvidia-headless-{branch}-server{suffix}", f"nvidia-utils-{branch}-server"]
    if source == "cuda":
        return [f"nvidia-open-{branch}" if modules == "open" else f"cuda-drivers-{branch}"]
    return []


def resources(host):
    v = host.vars
    gate = gpu_gate(host, "nvidia driver")
    if gate:
        return gate
    branch, version = str(v["nvidia_driver_branch"]), v.get("nvidia_driver_version")
    fam, osid, osver = os_family(host.facts)
    if fam == "?":
        return [Fail("nvidia driver", f"OS {osid or 'unknown'} {osver} is not supported: Ubuntu, Debian or "
                                      "RHEL-family only")]
    if osid == "centos" and osver.split(".")[0] == "7":
        return [Fail("nvidia driver", "CentOS 7 (yum) is not supported by this role: install the driver "
                                      "from NVIDIA's .run or CUDA yum repo by hand, then rerun to hold it")]
    source = v["nvidia_driver_source"]
    if source == "auto":
        source = {"ubuntu": "ubuntu-server", "debian": "cuda"}.get(osid, "dnf-module" if fam == "dnf" else "cuda")
    if (source == "dnf-module") != (fam == "dnf"):
        return [Fail("nvidia driver", f"nvidia_driver_source {source} does not fit {osid} {osver}")]
    kernel = (host.facts.get("os.kernel") or {}).get("release")
    if not kernel:
        return [Fail("nvidia driver", "the running kernel's release is unknown (fact os.kernel failed)")]
    lock = int(v["apt_lock_timeout"])
    out: list = []
    pkgs = driver_packages(source, branch, v["nvidia_driver_modules"])
    pin = version or f"{branch}.*"
    if fam == "apt":
        spec = v.get("nvidia_driver_repo")
        if spec is None and source == "cuda":
            distro = f"{osid}{osver.replace('.', '')}"
            url = CUDA_REPO.format(distro=distro)
            spec = {"url": url, "suite": "/", "key_url": url + "3bf863cc.pub"}
        if spec is not None:
            out.append(repo_from_var("nvidia-driver", spec, lock_timeout=lock))
        # DKMS builds the module against the running kernel's headers: first.
        out.append(Packages({f"linux-headers-{kernel}": None}, lock_timeout=lock))
    else:
        out.append(Packages({f"kernel-devel-{kernel}": None}, manager="dnf"))
    if v["nvidia_driver_blacklist_nouveau"]:
        out.append(File(NOUVEAU_FILE, content="# Written by bringup: nouveau and the NVIDIA driver exclude each "
                                              "other.\nblacklist nouveau\noptions nouveau modeset=0\n",
                        notify=["rebuild initramfs"]))
    if fam == "apt":
        # unattended-upgrades matches these as regular expressions from the name's start (a "." matching
        # any character is harmless here; apt.conf has no escape for a backslash).
        names = "".join(f'    "{p}";\n' for p in pkgs)
        out.append(File(UNATTENDED_FILE, content=(
            "// Written by bringup: a driver moved by an unattended upgrade breaks running CUDA programs\n"
            "// (\"driver/library version mismatch\") until a reboot.  Upgrade it deliberately.\n"
            "Unattended-Upgrade::Package-Blacklist {\n" + names
            + '    "nvidia-.*-' + branch + '(-server)?(-open)?$";\n'
            + '    "libnvidia-.*-' + branch + '(-server)?$";\n};\n')))
        # The whole branch family follows the pin, dependencies included: pinning only the
        # top-level packages leaves apt unable to move their exact-version dependencies.
        out.append(File(PREFERENCES_FILE, content=(
            "# Written by bringup: the NVIDIA driver packages follow nvidia_driver_branch/_version.\n"
            f"Package: /^(lib)?nvidia-.*-{branch}(-server)?(-open)?$/ /^cuda-drivers(-{branch})?$/\n"
            f"Pin: version {pin}\nPin-Priority: 1001\n")))
        out.append(Packages({p: pin for p in pkgs}, allow_change_held=True, lock_timeout=lock))
        if v["nvidia_driver_hold"]:
            out.append(Hold(pkgs))
    else:
        stream = f"nvidia-driver:{branch}-dkms" if v["nvidia_driver_modules"] == "proprietary" \
            else f"nvidia-driver:{branch}-open"
        out.append(Command(f"dnf module {stream}", sh("dnf -y module install %s", stream),
                           unless=sh("rpm -q --qf '%%{VERSION}\\n' nvidia-driver | grep -q %s", f"^{branch}\\.")))
        if v["nvidia_driver_hold"]:
            out.append(Hold(["nvidia-driver", "kmod-nvidia-latest-dkms"], manager="dnf"))
    loaded = any(str(g.get("driver_version") or "").startswith(branch + ".")
                 for g in host.facts.get("nvidia.smi") or [])
    skip = without_systemd(host, "nvidia-persistenced", "enable nvidia-persistenced with this host's init system")
    if skip:
        out.append(skip)
    else:
        # It can only start once the driver is loaded: after the reboot, on the next pass.
        out.append(Service("nvidia-persistenced", enabled=True, running=True if loaded else None))
    expected = v.get("nvidia_driver_expected_gpus")
    if expected is None:
        expected = len(nvidia_gpus(host.facts)) or None
    out.append(NvidiaDriverLoaded(branch, version=version, expected_gpus=expected))
    return out


def checks(host) -> list:
    """The rack checklist's driver lines: the loaded branch against the pin and the guide's matrix."""
    from bringup.checklist import line, load_matrix

    v = host.vars
    drv = gpu.driver_version(host.facts)
    if not drv:
        return [] if v.get("gpu_profile") in gpu.CPU_PROFILES else [
            line("software", "driver version", "FAIL", "no driver answers (nvidia-smi lists no GPU)",
                 "install the pinned driver branch: invoke provision --roles nvidia_driver")]
    branch = gpu.branch_of(drv)
    guide = load_matrix()["guide"]["driver_branches"]
    pinned = v.get("nvidia_driver_branch")
    if pinned is not None and branch != int(pinned):
        return [line("software", "driver branch pinned", "FAIL", f"{drv}, inventory pins {pinned}",
                     f"invoke provision --roles nvidia_driver (branch {pinned})")]
    if branch in guide:
        return [line("software", "driver branch in the guide's matrix", "PASS", f"{drv} (guide: {guide})")]
    return [line("software", "driver branch in the guide's matrix", "WARN",
                 f"{drv}; the guide ran {'/'.join(map(str, guide))}",
                 "pin nvidia_driver_branch to a tested branch, or accept after a latency run")]
