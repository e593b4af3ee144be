"""The NVIDIA driver: the loaded branch kept (never downgraded unless told), held, and loaded after a reboot
only when it changed.

Which branch (``nvidia_driver_branch``):
    ``auto`` (default, also null): the branch the driver loaded now belongs to, kept when it runs the
    Triton image (``triton_image``'s driver minimum in ``bringup/data/version_matrix.yaml``; a newer
    branch than the guide's is kept too).  A loaded branch too old for the image is refused (one line:
    pin a branch).  No driver loaded: :data:`INSTALL_BRANCH` is installed (the guide's 550).
    A branch (``580``), or the branch of ``nvidia_driver_version``: that branch.  A pin below the
    loaded branch is a downgrade: refused unless ``nvidia_driver_allow_downgrade: true``, and the plan
    then says ``downgrade 580 -> 550``.

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
    nvidia_driver_branch: ``auto`` (the loaded branch; none loaded: 550, the guide's) or a branch (``580``).
    nvidia_driver_version: exact package version or glob (``550.144.03-*``); default any of the branch.
        It pins its branch as ``nvidia_driver_branch`` does.
    nvidia_driver_allow_downgrade: false; true lets a pin below the loaded branch install.
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
from bringup.driver_matrix import triton_need
from bringup.vars import BOOL_WANTED, RoleVars, want
from bringup.gpu import gpu_gate, nvidia_gpus
from bringup.process import command
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
#: The branch installed on a host with no driver loaded and no pin (the guide's 535/550 matrix).
INSTALL_BRANCH = 550

HANDLERS = {
    "rebuild initramfs": [
        "if command -v update-initramfs >/dev/null 2>&1; then update-initramfs -u; "
        "elif command -v dracut >/dev/null 2>&1; then dracut -f; "
        "else echo 'neither update-initramfs nor dracut: initramfs not rebuilt'; fi",
    ],
}


class Vars(gpu.GpuVars, apt.AptVars, RoleVars):
    nvidia_driver_branch: Any = want("auto", "must be auto or a driver branch like 580 or 550")
    nvidia_driver_version: str | None = want(None, "is malformed (e.g. 550.144.03-0ubuntu0.24.04.1)",
                                             pattern=r"^[0-9A-Za-z.+~:*_-]+$")
    nvidia_driver_source: Literal[SOURCES] = want("auto", f"must be one of {', '.join(SOURCES)}")
    nvidia_driver_modules: Literal["proprietary", "open"] = want("proprietary", "must be proprietary or open")
    nvidia_driver_repo: apt.RepoSpec | None = want(
        None, "must be a mapping with url, suite, and key (control-machine path) or key_url")
    nvidia_driver_hold: bool = True
    nvidia_driver_blacklist_nouveau: bool = True
    nvidia_driver_allow_downgrade: bool = want(False, BOOL_WANTED)
    nvidia_driver_expected_gpus: int | None = want(None, "must be a whole number", ge=0)

    @field_validator("nvidia_driver_branch")
    @classmethod
    def _branch(cls, v: Any) -> Any:
        if v is None or v == "auto":
            return v
        if isinstance(v, bool) or not isinstance(v, (int, str)) or not re.fullmatch(r"\d{3}", str(v)):
            raise ValueError("must be auto or a driver branch like 580 or 550")
        return v

    @model_validator(mode="after")
    def _on_branch(self) -> "Vars":
        ver, br = self.nvidia_driver_version, self.nvidia_driver_branch
        if ver is None:
            return self
        upstream = ver.split(":", 1)[-1]
        if br in (None, "auto"):
            if not re.match(r"\d{3}\.", upstream):
                raise ValueError(f"nvidia_driver_version {ver} names no driver branch: write it whole "
                                 "(550.144.03-*) or set nvidia_driver_branch")
        elif not upstream.startswith(f"{br}."):
            raise ValueError(f"nvidia_driver_version {ver} is not on nvidia_driver_branch {br}")
        return self


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


def pinned_branch(vars: dict) -> int | None:
    """The branch the inventory pins: ``nvidia_driver_branch``, else ``nvidia_driver_version``'s; None: auto."""
    br = vars.get("nvidia_driver_branch")
    if br not in (None, "auto"):
        return int(br)
    m = re.match(r"(\d{3})\.", str(vars.get("nvidia_driver_version") or "").split(":", 1)[-1])
    return int(m.group(1)) if m else None


def _pin_words(vars: dict) -> tuple[str, str]:
    """How the inventory pins the branch, and how it unpins."""
    br = vars.get("nvidia_driver_branch")
    if br not in (None, "auto"):
        return f"nvidia_driver_branch pins {br}", "unpin (nvidia_driver_branch: auto)"
    return f"nvidia_driver_version pins {vars.get('nvidia_driver_version')}", "unpin (remove nvidia_driver_version)"


def choose_branch(vars: dict, facts: dict) -> tuple[int | None, str | None]:
    """The branch this host gets and, for a downgrade, the words the plan says; ``(None, why)`` when none may.

    A pin wins, except below the loaded branch without ``nvidia_driver_allow_downgrade``; no pin keeps the
    loaded branch when it runs the Triton image; no driver loaded installs :data:`INSTALL_BRANCH`.
    """
    drv = gpu.driver_version(facts)
    loaded, pin = gpu.branch_of(drv), pinned_branch(vars)
    need = triton_need(vars.get("triton_image"))
    if pin is not None:
        if loaded is None or pin >= loaded:
            return pin, None
        if not vars.get("nvidia_driver_allow_downgrade"):
            pins, unpin = _pin_words(vars)
            return None, (f"driver {drv} (branch {loaded}) is loaded and {pins}, a downgrade: set "
                          f"nvidia_driver_allow_downgrade: true to install {pin}, or {unpin} to keep {loaded}")
        return pin, f"downgrade {loaded} -> {pin} (nvidia_driver_allow_downgrade: true)"
    if loaded is not None:
        if need is not None and need.meets(drv) is None:
            return None, (f"driver {drv} is loaded and {need.label} (triton_image): set nvidia_driver_branch to "
                          f"{need.min_branch} or newer to upgrade it, or pick an older triton_image")
        return loaded, None
    if need is not None and not need.branch_meets(INSTALL_BRANCH):
        return None, (f"no driver is loaded and {need.label} (triton_image), newer than the branch installed "
                      f"by default ({INSTALL_BRANCH}): set nvidia_driver_branch to {need.min_branch} or newer")
    return INSTALL_BRANCH, None


def resources(host):
    v = host.vars
    gate = gpu_gate(host, "nvidia driver")
    if gate:
        return gate
    chosen, note = choose_branch(v, host.facts)
    if chosen is None:
        return [Fail("nvidia driver", note)]
    branch, version = str(chosen), v.get("nvidia_driver_version")
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
    out.append(NvidiaDriverLoaded(branch, version=version, expected_gpus=expected, note=note))
    return out


def checks(host) -> list:
    """The rack checklist's driver line: the loaded branch against a pin, the Triton image and the guide.

    FAIL: no driver, a branch other than the pinned one, or a branch too old for ``triton_image`` (the
    role would refuse to keep it).  Otherwise PASS, and WARN only for a branch older than the guide's.
    """
    from bringup.checks import line, load_matrix

    v = host.vars
    drv = gpu.driver_version(host.facts)
    pin = pinned_branch(v)
    if not drv:
        return [] if gpu.without_gpu(v, host.facts) else [
            line("software", "driver version", "FAIL", "no driver answers (nvidia-smi lists no GPU)",
                 f"install a driver: {command('provision --roles nvidia_driver')} (branch {pin or INSTALL_BRANCH})")]
    branch = gpu.branch_of(drv)
    if pin is not None and branch != pin:
        allow = " with nvidia_driver_allow_downgrade: true" if branch is not None and pin < branch else ""
        return [line("software", "driver branch pinned", "FAIL", f"{drv}, inventory pins {pin}",
                     f"{command('provision --roles nvidia_driver')} (branch {pin}){allow}, or {_pin_words(v)[1]} "
                     f"to keep {branch}")]
    need = triton_need(v.get("triton_image"))
    how = need.meets(drv) if need is not None else ""
    if how is None:
        return [line("software", "driver branch for the Triton image", "FAIL", f"{drv}; {need.label}",
                     f"set nvidia_driver_branch to {need.min_branch} or newer and provision, "
                     "or pick an older triton_image")]
    guide = load_matrix()["guide"]["driver_branches"]
    kept = f"pinned {pin}" if pin is not None else "no pin: kept"
    runs = f"; {need.label}{how}" if need is not None else ""
    if branch in guide:
        return [line("software", "driver branch in the guide's matrix", "PASS",
                     f"{drv} (guide: {guide}; {kept}){runs}")]
    if branch is not None and branch > max(guide):
        return [line("software", "driver branch newer than the guide's", "PASS",
                     f"{drv} ({kept}; the guide ran {'/'.join(map(str, guide))}){runs}")]
    return [line("software", "driver branch in the guide's matrix", "WARN",
                 f"{drv}; the guide ran {'/'.join(map(str, guide))}{runs}",
                 "pin nvidia_driver_branch to a tested branch, or accept after a latency run")]
