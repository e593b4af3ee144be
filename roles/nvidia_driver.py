"""The NVIDIA driver: the loaded branch kept (never downgraded unless told), held, and loaded after a reboot
only when it changed.

Which branch (``nvidia_driver_branch``):
    ``auto`` (default, also null): the branch the driver loaded now belongs to, kept when it runs the
    Triton image (``triton_image``'s driver minimum in ``bringup/data/version_matrix.yaml``; a newer
    branch than the guide's is kept too).  A loaded branch too old for the image is refused (one line:
    pin a branch).  No driver loaded: :data:`INSTALL_BRANCH` is installed (the guide's 550).
    A branch (``580``), or the branch of ``nvidia_driver_version``: that branch.  A pin below the
    loaded branch is a downgrade: refused unless ``nvidia_driver_allow_downgrade: true``, and the plan
    then says ``downgrade 580 -> 550``.  The loaded branch is nvidia-smi's, else the loaded module's own
    (``driver.owner``: where nvidia-smi fails on a driver/library version mismatch); one that cannot be told
    changes no package without ``nvidia_driver_allow_downgrade: true``.

Packages by source (``nvidia_driver_source``):
    ``ubuntu-server``: Canonical's server packages, ``nvidia-headless-<br>-server``
    (``-open`` with ``nvidia_driver_modules: open``) and ``nvidia-utils-<br>-server``,
    from the distribution (or a mirror given as ``nvidia_driver_repo``).
    ``cuda``: NVIDIA's CUDA repository (``cuda-drivers-<br>``, or ``nvidia-open-<br>``),
    for Ubuntu and Debian 12.
    ``dnf-module``: RHEL-family ``dnf module install nvidia-driver:<br>-dkms``.
    ``auto`` (default): ubuntu-server on Ubuntu, cuda on Debian, dnf-module on RHEL.

A loaded driver that no package owns (``driver.owner``: ``nvidia-smi`` from no package; NVIDIA's ``.run``
installer, a vendor image, a module built elsewhere) is kept under ``auto`` as the loaded branch is: no driver
packages, no kernel headers, no nouveau blacklist, and the plan says so.  Packages are planned over it only on
an explicit ask, a pinned branch or version or ``nvidia_driver_manage: packages``, and the plan then names the
driver they replace.

Fabric Manager on NVSwitch boards (HGX/DGX: NVSwitch functions of vendor 0x10de, class 0x0680, on the PCI bus,
or GPUs whose ``nvidia-smi -q`` Fabric section shows a state): CUDA does not start there until the GPUs joined
the NVLink fabric, which ``nvidia-fabricmanager`` does.  It is installed at the driver's exact version (the
service refuses a driver of another version), pinned, held and kept from unattended-upgrades with the driver,
and ``nvidia-fabricmanager.service`` enabled and started: ``nvidia-fabricmanager-<br>`` from Canonical's archive
(source ``fabric-manager-<br>``) or NVIDIA's CUDA repository (the same name: NVIDIA/apt-packaging-fabric-manager;
not ``cuda-drivers-fabricmanager-<br>``, whose CUDA-repository form pulls ``cuda-drivers-<br>``), the dnf
module's ``fm`` profile on RHEL (``nvidia-driver:<stream>/fm``, package ``nvidia-fabric-manager``:
NVIDIA/yum-packaging-fabric-manager).  No NVSwitch: nothing, and the plan says why.  The checklist FAILs a
fabric manager missing or of another version than the loaded driver (``driver.fabric_manager``).

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
    nvidia_driver_manage: ``auto`` (default: a loaded driver no package owns is kept) or ``packages`` (replace
        it with the packages of its branch; a pinned branch or version asks the same).
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

from bringup.ssh.command import sh
from bringup.hardware.driver_matrix import triton_need
from bringup.inventory.vars import BOOL_WANTED, RoleVars, want
from bringup.hardware.gpu import gpu_gate, nvidia_gpus
from bringup.process import command
from bringup.resources import Command, File, Packages, Service
from bringup.resources.apt import check_repo_var, os_family, repo_from_var
from bringup.resources.guard import Fail, Unused
from bringup.resources.systemd import without_systemd
from bringup.resources.hold import Hold
from bringup.resources.nvidia import NvidiaDriverLoaded, upstream_version
from bringup.hardware import gpu
from bringup.resources import apt

#: The facts this role reads (only these are gathered for it).
FACTS = (*gpu.FACTS, *apt.OS_FACTS, "os.kernel", "nvidia.smi", "nvidia.query", "system.systemd", "driver.owner",
         "driver.fabric_manager")

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
    nvidia_driver_manage: Literal["auto", "packages"] = want("auto", "must be auto or packages")
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


def fabric_manager_packages(branch: str) -> list[str]:
    """The apt package of Fabric Manager for a branch: Canonical's and NVIDIA's CUDA repository's name."""
    return [f"nvidia-fabricmanager-{branch}"]


def foreign_driver(facts: dict) -> str | None:
    """``driver 580.159.04 loaded from outside the package manager (...)`` when a driver is loaded and the
    package manager owns no ``nvidia-smi`` (``driver.owner``); None: package-managed, no driver, or not known."""
    owner = facts.get("driver.owner") or {}
    drv = gpu.driver_version(facts) or owner.get("version")  # the module's own version where nvidia-smi is absent
    if not drv or owner.get("packaged") is not False:
        return None
    if not owner.get("nvidia_smi"):
        return f"driver {drv} loaded from outside the package manager (no nvidia-smi on the host: a driver container?)"
    smi = (owner.get("nvidia_smi") or {}).get("path") or "nvidia-smi"
    mod = (owner.get("module") or {}).get("path")
    if owner.get("installer"):
        how = f"NVIDIA .run installer: {', '.join(owner['installer'])}"
    elif mod and "/updates/dkms/" in mod:
        how = f"a DKMS module, {mod}, with {smi} owned by no package"
    else:
        how = (f"module {mod}, " if mod else "") + f"{smi} owned by no package: NVIDIA .run installer?"
    return f"driver {drv} loaded from outside the package manager ({how})"


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


def loaded_driver(facts: dict) -> tuple[str | None, str | None]:
    """The loaded driver's version and, where it is not known, why: ``(version, None)``, ``(None, None)`` for no
    driver loaded, ``(None, why)`` when that cannot be told.

    nvidia-smi's answer, else the loaded module's own version (``driver.owner``, ``/sys/module/nvidia/version``):
    the only one where nvidia-smi fails (a driver/library version mismatch after an upgrade without a reboot).
    No module version read, and nvidia-smi answered nothing: not known.
    """
    drv = gpu.driver_version(facts)
    if drv:
        return drv, None
    owner = facts.get("driver.owner")
    if isinstance(owner, dict) and owner.get("version"):
        return str(owner["version"]), None
    unread = getattr(facts, "unread", lambda name: None)
    why = [f"{n}: {unread(n)}" for n in ("driver.owner", "nvidia.smi") if unread(n)]
    bad = gpu.driver_version_unreadable(facts)
    if bad is not None:
        why.append(f"nvidia-smi printed driver version {bad}, no driver version")
    failed = gpu.nvml_failure(facts)
    if failed:
        why.append(f"nvidia-smi: Failed to initialize NVML: {failed['nvml_error']}")
    if not isinstance(owner, dict) and not why:
        why.append("driver.owner: no answer (the module's version was not read)")
    return None, "; ".join(why) or None


def choose_branch(vars: dict, facts: dict) -> tuple[int | None, str | None]:
    """The branch this host gets and, for a downgrade, the words the plan says; ``(None, why)`` when none may.

    A pin wins, except below the loaded branch without ``nvidia_driver_allow_downgrade``; no pin keeps the
    loaded branch when it runs the Triton image; no driver loaded installs :data:`INSTALL_BRANCH`.  A loaded
    branch that cannot be told (:func:`loaded_driver`) changes no package without that same explicit allow.
    """
    drv, unknown = loaded_driver(facts)
    loaded, pin = gpu.branch_of(drv), pinned_branch(vars)
    need = triton_need(vars.get("triton_image"))
    if unknown and not vars.get("nvidia_driver_allow_downgrade"):
        install = f"install {pin}" if pin is not None else f"install {INSTALL_BRANCH} (no pin)"
        return None, (f"the loaded driver's branch is not known ({unknown}): a package change may downgrade it; "
                      f"set nvidia_driver_allow_downgrade: true to {install} anyway, or fix the read and run again")
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
    foreign = foreign_driver(host.facts)
    if foreign and pinned_branch(v) is None and v.get("nvidia_driver_manage", "auto") == "auto":
        # Kept as it is loaded (its branch read from the module where no nvidia-smi answers).
        loaded = gpu.branch_of(gpu.driver_version(host.facts) or (host.facts.get("driver.owner") or {}).get("version"))
        return _kept(host, foreign, str(loaded))
    chosen, note = choose_branch(v, host.facts)
    if chosen is None:
        return [Fail("nvidia driver", note)]
    if foreign:
        note = "; ".join(filter(None, [note, f"replaces the {foreign}"]))
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
    elsewhere = gpu.fabric_elsewhere(host.facts)
    switch = None if elsewhere else gpu.nvswitch_evidence(host.facts)
    fm_pkgs = fabric_manager_packages(branch) if switch and fam == "apt" else []
    fm_pin = _fabric_manager_pin(host.facts, branch, version)
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
        names = "".join(f'    "{p}";\n' for p in pkgs + fm_pkgs)
        out.append(File(UNATTENDED_FILE, content=(
            "// Written by bringup: a driver moved by an unattended upgrade breaks running CUDA programs\n"
            "// (\"driver/library version mismatch\") until a reboot.  Upgrade it deliberately.\n"
            "Unattended-Upgrade::Package-Blacklist {\n" + names
            + '    "nvidia-.*-' + branch + '(-server)?(-open)?$";\n'
            + '    "libnvidia-.*-' + branch + '(-server)?$";\n};\n')))
        # The whole branch family follows the pin, dependencies included: pinning only the
        # top-level packages leaves apt unable to move their exact-version dependencies.
        # Fabric Manager first: the first specific-form record that matches a version decides its priority
        # (apt_preferences(5)), and the branch family's pattern below matches Fabric Manager too.  The
        # driver's exact version gets 1001, every other version of the branch -1: never installed.
        others = f"{branch}.*"
        fm_pref = "".join(f"Package: {p}\nPin: version {fm_pin}\nPin-Priority: 1001\n\n"
                          + (f"Package: {p}\nPin: version {others}\nPin-Priority: -1\n\n" if fm_pin != others else "")
                          for p in fm_pkgs)
        out.append(File(PREFERENCES_FILE, content=(
            "# Written by bringup: the NVIDIA driver packages follow nvidia_driver_branch/_version.\n"
            + fm_pref
            + f"Package: /^(lib)?nvidia-.*-{branch}(-server)?(-open)?$/ /^cuda-drivers(-{branch})?$/\n"
            f"Pin: version {pin}\nPin-Priority: 1001\n")))
        out.append(Packages({p: pin for p in pkgs}, allow_change_held=True, lock_timeout=lock))
        if fm_pkgs:
            out.append(Packages({p: fm_pin for p in fm_pkgs}, allow_change_held=True, lock_timeout=lock))
        if v["nvidia_driver_hold"]:
            out.append(Hold(pkgs + fm_pkgs))
    else:
        stream = f"nvidia-driver:{branch}-dkms" if v["nvidia_driver_modules"] == "proprietary" \
            else f"nvidia-driver:{branch}-open"
        out.append(Command(f"dnf module {stream}", sh("dnf -y module install %s", stream),
                           unless=sh("rpm -q --qf '%%{VERSION}\\n' nvidia-driver | grep -q %s", f"^{branch}\\.")))
        if switch:
            # The module's fm profile: the driver's packages with Fabric Manager and NSCQ, at the stream's version.
            out.append(Command(f"dnf module {stream}/fm", sh("dnf -y module install %s", f"{stream}/fm"),
                               unless=sh("rpm -q --qf '%%{VERSION}\\n' nvidia-fabric-manager | grep -q %s",
                                         f"^{branch}\\.")))
        if v["nvidia_driver_hold"]:
            out.append(Hold(["nvidia-driver", "kmod-nvidia-latest-dkms"] + (["nvidia-fabric-manager"] if switch else []),
                            manager="dnf"))
    loaded = any(str(g.get("driver_version") or "").startswith(branch + ".")
                 for g in host.facts.get("nvidia.smi") or [])
    skip = without_systemd(host, "nvidia-persistenced", "enable nvidia-persistenced with this host's init system")
    if skip:
        out.append(skip)
    else:
        # It can only start once the driver is loaded: after the reboot, on the next pass.
        out.append(Service("nvidia-persistenced", enabled=True, running=True if loaded else None))
        if switch:
            # It starts only against a driver of its own version: once that one is loaded.
            out.append(Service("nvidia-fabricmanager", enabled=True, running=True if loaded else None))
    if not switch:
        out.append(_no_fabric(elsewhere))
    expected = v.get("nvidia_driver_expected_gpus")
    if expected is None:
        expected = len(nvidia_gpus(host.facts)) or None
    out.append(NvidiaDriverLoaded(branch, version=version, expected_gpus=expected, note=note))
    return out


def _fabric_manager_pin(facts: dict, branch: str, version: str | None) -> str:
    """The package version Fabric Manager is pinned at: the driver's exact one, any packaging revision (the
    archives' revision suffixes need not match the driver's).  ``nvidia_driver_version``'s upstream version
    when given; else the loaded driver's when it is on this branch (``565.57.01-*``); else (no driver of the
    branch loaded yet) the branch, as the driver packages are: both come from one release of the same archive,
    and the checklist compares them once loaded."""
    if version:
        return f"{upstream_version(version)}-*"
    drv = gpu.driver_version(facts)
    if drv and drv.startswith(f"{branch}."):
        return f"{drv}-*"
    return f"{branch}.*"


def _no_fabric(elsewhere: str | None = None) -> Unused:
    if elsewhere:
        return Unused("nvidia-fabricmanager", f"{elsewhere}: none installed here")
    return Unused("nvidia-fabricmanager", "no NVSwitch on this host (no NVIDIA bridge of class 0x0680 on the PCI "
                                          "bus, no GPU in an NVLink fabric in nvidia-smi -q): no Fabric Manager")


def _kept(host, foreign: str, branch: str) -> list:
    """A loaded driver no package owns, under ``auto``: kept, checked, nothing installed over it."""
    elsewhere = gpu.fabric_elsewhere(host.facts)
    switch = None if elsewhere else gpu.nvswitch_evidence(host.facts)
    fm = (f"; Fabric Manager is not installed over it either ({switch}): install the one of its version as the "
          "driver was installed" if switch else "")
    out: list = [Unused("nvidia driver packages", f"{foreign}: kept; no driver packages or kernel headers planned{fm}; "
                                                  "set nvidia_driver_branch (a pin) or nvidia_driver_manage: packages "
                                                  "to replace it with packages")]
    if not switch:
        out.append(_no_fabric(elsewhere))
    if not (host.facts.get("driver.owner") or {}).get("nvidia_smi"):
        # No nvidia-smi on the host to ask (a driver container has its own): nothing here can check it.
        return out
    expected = host.vars.get("nvidia_driver_expected_gpus")
    if expected is None:
        expected = len(nvidia_gpus(host.facts)) or None
    out.append(NvidiaDriverLoaded(branch, expected_gpus=expected))
    return out


def checks(host) -> list:
    """The rack checklist's driver line: the loaded branch against a pin, the Triton image and the guide.

    FAIL: no driver, a branch other than the pinned one, or a branch too old for ``triton_image`` (the
    role would refuse to keep it).  Otherwise PASS, and WARN only for a branch older than the guide's.  A
    driver no package owns is said so, and no fix tells the operator to install packages over it unless the
    inventory pins a branch.  On NVSwitch boards, a second line: Fabric Manager at the loaded driver's version.
    """
    return _driver_line(host) + _fabric_line(host)


def _driver_line(host) -> list:
    from bringup.checks import line, load_matrix

    v = host.vars
    drv = gpu.driver_version(host.facts)
    pin = pinned_branch(v)
    failed = gpu.nvml_failure(host.facts)
    if not drv and failed and "mismatch" in failed["nvml_error"].lower():
        # The driver was upgraded (or downgraded) on disk and the old module is still loaded: nvidia-smi, NVML and
        # every CUDA program fail until the installed one is loaded.
        module, lib = (host.facts.get("driver.owner") or {}).get("version"), failed["nvml_library_version"]
        both = ", ".join(filter(None, [module and f"module {module} loaded", lib and f"NVML library {lib} installed"]))
        return [line("software", "driver loaded is the one installed", "FAIL",
                     f"nvidia-smi: Failed to initialize NVML: {failed['nvml_error']}" + (f" ({both})" if both else ""),
                     gpu.nvml_fix(failed, ""))]
    bad = gpu.driver_version_unreadable(host.facts)
    if bad is not None:
        # No driver version, and not no driver either: no branch is read from it (580garbage is no 580).
        return [line("software", "driver version", "WARN", f"not checked: driver version unreadable ({bad})",
                     "read the host again; nvidia-smi --query-gpu=driver_version --format=csv on it prints the "
                     "version (like 580.159.04): anything else, reinstall the driver's nvidia-smi")]
    unread = host.facts.unread("nvidia.smi") if hasattr(host.facts, "unread") else None
    lost = gpu.smi_unreachable(host.facts, {"nvidia.smi": unread} if unread else None)
    q = host.facts.get("nvidia.query")
    q = q if isinstance(q, dict) else {}
    if not drv and not failed and not lost and (unread or (q.get("driver_version") and q.get("gpus"))):
        # The query output could not be read (or read as no GPU while nvidia-smi -q lists them with a driver):
        # whether a driver answers is not known from it, and "install a driver" would be a verdict on what was
        # not seen.  Say what the other nvidia-smi output showed.
        other = (f"; nvidia-smi -q answered: driver {q['driver_version']}, {len(q.get('gpus') or [])} GPU(s)"
                 if q.get("driver_version") else "")
        why = "nvidia.smi unreadable" if unread else "nvidia-smi --query-gpu (nvidia.smi) listed no GPU"
        return [line("software", "driver version", "WARN", f"not checked: {why}{other}",
                     "read the host again; the line of fact nvidia.smi says what its command printed")]
    if not drv and lost and not gpu.without_gpu(v, host.facts):
        # The driver answered: it reaches no GPU.  A GPU fault (the gpu line says it), never "install a driver" over
        # the one loaded (a downgrade to INSTALL_BRANCH, perhaps).
        return [line("software", "driver version", "WARN", f"not checked: {lost}",
                     "the driver is loaded: do not install another; " + gpu.UNREACHABLE_FIX)]
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
        foreign = foreign_driver(host.facts)
        if foreign:
            return [line("software", "driver branch for the Triton image", "FAIL", f"{foreign}; {need.label}",
                         f"upgrade it to R{need.min_branch}+ the way it was installed, or pick an older "
                         f"triton_image (nvidia_driver_branch {need.min_branch} would replace it with packages)")]
        return [line("software", "driver branch for the Triton image", "FAIL", f"{drv}; {need.label}",
                     f"set nvidia_driver_branch to {need.min_branch} or newer and provision, "
                     "or pick an older triton_image")]
    guide = load_matrix()["guide"]["driver_branches"]
    kept = f"pinned {pin}" if pin is not None else "no pin: kept"
    if pin is None and foreign_driver(host.facts):
        kept += ", installed outside the package manager"
    runs = f"; {need.label}{how}" if need is not None else ""
    if branch in guide:
        return [line("software", "driver branch in the guide's matrix", "PASS",
                     f"{drv} (guide: {guide}; {kept}){runs}")]
    if branch is not None and branch > max(guide):
        return [line("software", "driver branch newer than the guide's", "PASS",
                     f"{drv} ({kept}; the guide ran {'/'.join(map(str, guide))}){runs}")]
    tested = ("upgrade it to a tested branch the way it was installed" if pin is None and foreign_driver(host.facts)
              else "pin nvidia_driver_branch to a tested branch")
    return [line("software", "driver branch in the guide's matrix", "WARN",
                 f"{drv}; the guide ran {'/'.join(map(str, guide))}{runs}",
                 f"{tested}, or accept after a latency run")]


def _fabric_line(host) -> list:
    """Fabric Manager against the loaded driver, on a host with NVSwitch: FAIL when missing or of another
    version (the service refuses to start, and CUDA with it).  Where that hangs on the PCI bus (a pass-through VM,
    or GPUs that show no fabric state) and ``pci.devices`` is unreadable: "not checked", never what the bus holds."""
    from bringup.checks import line, not_checked

    elsewhere = gpu.fabric_elsewhere(host.facts)
    drv = gpu.driver_version(host.facts)
    unread_pci = gpu.pci_unread(host.facts)
    if unread_pci and drv and (gpu.in_passthrough_vm(host.facts) or not gpu.fabric_states(host.facts)):
        # Whether Fabric Manager belongs here follows the NVSwitches on the PCI bus (a pass-through VM's, or a board
        # whose GPUs show no fabric state, A100-SXM's N/A): a listing not read says nothing of them.
        said = not_checked("software", "Fabric Manager", ("pci.devices",), {"pci.devices": unread_pci})
        fabric = gpu.fabric_states(host.facts)
        return [line("software", "Fabric Manager", "WARN", said.seen + (
            "; a pass-through VM: whether its PCI bus holds NVSwitches is not known" if gpu.in_passthrough_vm(host.facts)
            else "; whether an NVSwitch is on the PCI bus is not known") + (f" (fabric {fabric})" if fabric else ""),
            said.fix)]
    if elsewhere and drv:
        # The fabric is up and this machine holds no NVSwitch to manage: nothing to install or run here.
        return [line("software", "Fabric Manager", "PASS", f"none needed here: {elsewhere}")]
    switch = gpu.nvswitch_evidence(host.facts)
    if not switch or not drv:
        return []
    bus_switches = [d for d in host.facts.get("pci.devices") or []
                    if d.get("vendor") == "0x10de" and str(d.get("class") or "").startswith("0x0680")]
    if gpu.in_passthrough_vm(host.facts) and not bus_switches:
        # The NVSwitches stayed with the hypervisor host, whose Fabric Manager registers these GPUs: one installed in
        # this VM has no switch to manage.  The fabric is not up (else fabric_elsewhere said so): the host's to fix.
        return [line("software", "Fabric Manager", "WARN", f"none to install here: a pass-through VM with no NVSwitch on "
                     f"its PCI bus; fabric {gpu.fabric_states(host.facts) or 'state unknown'}",
                     "ask the hypervisor host's operator: its Fabric Manager registers these GPUs; nothing to install "
                     "in this VM")]
    fm = host.facts.get("driver.fabric_manager")
    foreign = foreign_driver(host.facts)
    states = gpu.fabric_states(host.facts)
    up = states is not None and all(g.get("fabric_state") == "Completed" and g.get("fabric_status") == "Success"
                                    for g in (host.facts.get("nvidia.query") or {}).get("gpus") or []
                                    if g.get("fabric_state"))
    fix = (f"install Fabric Manager {drv} the way the driver was installed (NVIDIA's fabricmanager-linux-*-{drv} "
           "archive), or set nvidia_driver_manage: packages to replace both with packages" if foreign else
           f"{command('provision --roles nvidia_driver')} (nvidia-fabricmanager-{gpu.branch_of(drv)} at {drv})")
    if fm is None:
        return [line("software", "Fabric Manager version", "WARN", f"{switch}; the installed Fabric Manager is not "
                     "in the facts (fact driver.fabric_manager)", command("facts") + " to read it again")]
    have = fm.get("version")
    if have is None and up:
        # The words follow the fabric seen: it is up, so a Fabric Manager runs, only not one this host installed.
        return [line("software", "Fabric Manager version", "FAIL", f"{switch}; no Fabric Manager installed here, yet "
                     f"the fabric is up ({states}): one runs from outside the package manager (a container?), and "
                     "after a reboot without it CUDA does not start", fix)]
    if have is None:
        seen = f"fabric {states}" if states else "no GPU shows its fabric state"
        return [line("software", "Fabric Manager version", "FAIL", f"{switch}; no Fabric Manager installed, and "
                     f"{seen}: CUDA does not start until the GPUs joined the NVLink fabric", fix)]
    if have != drv:
        return [line("software", "Fabric Manager version", "FAIL", f"Fabric Manager {have}, driver {drv}: "
                     "nvidia-fabricmanager refuses to start on a driver of another version", fix)]
    state = fm.get("active")
    if state is not None and state != "active":
        # Installed at the right version, yet not running: the GPUs never join the fabric, CUDA does not start.
        after = (f"; the GPUs joined the fabric before it stopped ({states}), but a GPU reset or reboot will not "
                 "rejoin them" if up else f"; fabric {states}" if states else "")
        return [line("software", "Fabric Manager running", "FAIL", f"Fabric Manager {have} = driver {drv}, but "
                     f"nvidia-fabricmanager is {state} ({switch}){after}", "systemctl enable --now "
                     "nvidia-fabricmanager; journalctl -u nvidia-fabricmanager says why it stopped")]
    return [line("software", "Fabric Manager version", "PASS", f"Fabric Manager {have} = driver {drv} ({switch})"
                 + (", running" if state == "active" else ""))]
