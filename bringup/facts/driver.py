"""Who installed the NVIDIA driver, and which fabric manager is installed: ``driver.owner``,
``driver.fabric_manager``.

``driver.owner`` tells a driver that a package manager owns (Canonical's ``nvidia-utils-<br>-server``, NVIDIA's
CUDA repository, a RHEL dnf module) from one that none does (NVIDIA's ``.run`` installer, a vendor image, a
module built elsewhere): the ``nvidia_driver`` role keeps the second kind under ``auto`` instead of installing
packages over it.  ``nvidia-smi`` decides (a DKMS-built module belongs to no package even when its source does;
a ``.run`` installer's ``nvidia-smi`` belongs to none either); the module's path, the version of the loaded
module (``/sys/module/nvidia/version``, what NVIDIA's open modules recommend reading) and the ``.run``
installer's own files (``/usr/bin/nvidia-uninstall``, ``/var/log/nvidia-installer.log``) say more.

``driver.fabric_manager`` is the installed NVIDIA Fabric Manager (``nvidia-fabricmanager-<br>``,
``cuda-drivers-fabricmanager-<br>``, the RHEL ``nvidia-fabric-manager``) and the version its binary prints
(``nv-fabricmanager --version``): it must be the loaded driver's exact version, or the service refuses to
start ("fabric manager NVIDIA GPU driver interface version ... don't match with driver version ...").
"""
from __future__ import annotations

import re
from typing import Any

from .base import Fact, UntrustedOutput

__all__ = ["DriverOwner", "FabricManager", "parse_driver_owner", "parse_fabric_manager", "END", "DRIVER_VERSION",
           "driver_branch"]

#: The last line both commands print: an output without it was cut short.
END = "end=driver"
#: The ``.run`` installer's own files.
RUN_INSTALLER_FILES = ("/usr/bin/nvidia-uninstall", "/var/log/nvidia-installer.log")
#: A driver version as NVIDIA writes it (``580.159.04``, ``595.80``, ``390.157``): ASCII digits only (``\d`` takes
#: fullwidth ``５８０``), a branch of 3 or 4 digits, one or two parts after it.  Anything else (``580garbage``,
#: ``99999.1.1``, ``NaN``, an error text, 5000 digits) is no version and is never read as a branch.
DRIVER_VERSION = re.compile(r"[0-9]{3,4}(?:\.[0-9]{1,3}){1,2}")


def driver_branch(version: object) -> int | None:
    """550 of ``550.90.07``; None for anything that is not a whole driver version (:data:`DRIVER_VERSION`)."""
    text = version if isinstance(version, str) else None
    if text is None or not DRIVER_VERSION.fullmatch(text):
        return None
    return int(text.split(".", 1)[0])


_PACKAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9+._:~-]*$")


def _lines(output: str, what: str, keys: tuple[str, ...]) -> list[str] | None:
    """The command's lines before :data:`END`; None for an output none of whose lines is the command's (another
    command's text: not this fact's); :class:`UntrustedOutput` for one cut before its end or not UTF-8."""
    lines = [l.rstrip("\r") for l in output.splitlines() if l.strip()]
    if not any(l == END or l.startswith(keys) for l in lines):
        return None
    if "\ufffd" in output:
        raise UntrustedOutput(f"{what}: the output is not UTF-8 text")
    if lines[-1] != END:
        raise UntrustedOutput(f"{what}: the output ends before its last line {END!r} (cut short?)")
    return lines[:-1]


def _owners(text: str, manager: str) -> list[str]:
    """The packages a ``dpkg-query -S`` or ``rpm -qf --qf '%{NAME}\\n'`` answer names (``a, b: /path``)."""
    if manager == "dpkg":
        # "diversion by" lines are not ownership; each other line is "pkg[:arch][, pkg]: /path".
        names = [n.strip().split(":")[0] for l in text.split("\n") if ": " in l and not l.startswith("diversion")
                 for n in l.split(": ", 1)[0].split(",")]
    else:
        names = [l.strip() for l in text.split("\n") if l.strip()]
    bad = [n for n in names if not _PACKAGE.match(n)]
    if bad:
        raise UntrustedOutput(f"driver.owner: {manager} named no package but {bad[0]!r}")
    return list(dict.fromkeys(names))


def parse_driver_owner(output: str) -> dict[str, Any] | None:
    """The command's ``key=value`` lines → ``{version, manager, nvidia_smi, module, installer, packaged}``.

    ``nvidia_smi`` and ``module`` are ``{path, packages}`` (``packages`` ``[]``: no package owns the path;
    None: not asked, no package manager); ``installer`` lists the ``.run`` installer's files present;
    ``packaged`` is True when a package owns ``nvidia-smi``, False when the package manager owns none of it or a
    driver is loaded with no ``nvidia-smi`` on the host, None when that cannot be told (no driver and no
    ``nvidia-smi``, no dpkg or rpm).  Empty output (or another command's):
    None, not known.
    """
    lines = _lines(output, "driver.owner", ("version=", "manager=", "smi=", "module=", "owner=rc="))
    if lines is None:
        return None
    out: dict[str, Any] = {"version": None, "manager": None, "nvidia_smi": None, "module": None,
                           "installer": []}
    owned: dict[str, tuple[int, list[str]]] = {}
    cur: list[str] | None = None
    for line in lines:
        key, sep, value = line.partition("=")
        if key == "owner" and sep:
            m = re.fullmatch(r"rc=([0-9]+) path=(\S+)", value)
            if not m:
                raise UntrustedOutput(f"driver.owner: malformed line {line!r}")
            cur = []
            owned[m.group(2)] = (int(m.group(1)), cur)
        elif key == "by" and sep and cur is not None:
            cur.append(value)
        elif key == "version" and sep:
            if value and not DRIVER_VERSION.fullmatch(value):
                raise UntrustedOutput(f"driver.owner: /sys/module/nvidia/version is {value!r}, not a driver version")
            out["version"] = value or None
        elif key == "manager" and sep:
            out["manager"] = value if value in ("dpkg", "rpm") else None
        elif key in ("smi", "module") and sep:
            out["nvidia_smi" if key == "smi" else "module"] = {"path": value, "packages": None} if value else None
        elif key == "installer" and sep:
            out["installer"].append(value)
        else:
            raise UntrustedOutput(f"driver.owner: unknown line {line!r}")
    for part in ("nvidia_smi", "module"):
        entry = out[part]
        if entry is None or out["manager"] is None:
            continue
        asked = [owned[p] for p in (entry["path"], f"{entry['path']}@real") if p in owned]
        if asked:
            names = [n for rc, by in asked if rc == 0 for n in _owners("\n".join(by), out["manager"])]
            entry["packages"] = names
    smi = out["nvidia_smi"]
    if smi is None:
        # A driver loaded with no nvidia-smi on the host at all: every package-managed driver ships nvidia-smi
        # (nvidia-utils, the driver package itself), so this one came from elsewhere (a driver container such
        # as the GPU Operator's, a vendor image).  No driver loaded, or no package manager: not known.
        out["packaged"] = False if out["version"] and out["manager"] else None
    else:
        out["packaged"] = None if smi["packages"] is None else bool(smi["packages"])
    return out


class DriverOwner(Fact):
    name = "driver.owner"
    # stderr is the gatherer's to drop: dpkg-query -S names an unowned path there; its rc says it.
    command = (
        "v=; if [ -r /sys/module/nvidia/version ]; then read -r v < /sys/module/nvidia/version; fi\n"
        "echo \"version=$v\"\n"
        "if command -v dpkg-query >/dev/null 2>&1; then pm=dpkg; elif command -v rpm >/dev/null 2>&1; then pm=rpm; "
        "else pm=; fi\n"
        "echo \"manager=$pm\"\n"
        "smi=$(command -v nvidia-smi 2>/dev/null); echo \"smi=$smi\"\n"
        "mod=; if command -v modinfo >/dev/null 2>&1; then mod=$(modinfo -F filename nvidia 2>/dev/null | head -n 1); "
        "elif [ -x /sbin/modinfo ]; then mod=$(/sbin/modinfo -F filename nvidia 2>/dev/null | head -n 1); fi\n"
        "echo \"module=$mod\"\n"
        "for f in " + " ".join(RUN_INSTALLER_FILES) + "; do if [ -e \"$f\" ]; then echo \"installer=$f\"; fi; done\n"
        "own() {\n"
        "  case $pm in\n"
        "    dpkg) o=$(dpkg-query -S \"$1\" 2>/dev/null); rc=$? ;;\n"
        "    rpm) o=$(rpm -qf --qf '%{NAME}\\n' \"$1\" 2>/dev/null); rc=$? ;;\n"
        "    *) return 0 ;;\n"
        "  esac\n"
        "  echo \"owner=rc=$rc path=$2\"\n"
        "  if [ \"$rc\" = 0 ]; then printf '%s\\n' \"$o\" | while IFS= read -r l; do echo \"by=$l\"; done; fi\n"
        "}\n"
        "for p in \"$smi\" \"$mod\"; do\n"
        "  if [ -n \"$p\" ]; then own \"$p\" \"$p\"; r=$(readlink -f \"$p\" 2>/dev/null)\n"
        "    if [ -n \"$r\" ] && [ \"$r\" != \"$p\" ]; then own \"$r\" \"$p@real\"; fi; fi\n"
        "done\n"
        "echo " + END
    )
    process = staticmethod(parse_driver_owner)


def parse_fabric_manager(output: str) -> dict[str, Any] | None:
    """``pkg=<status> <name> <version>`` lines, ``nv-fabricmanager --version``'s and ``active=<state>`` (systemd's
    ``is-active`` of nvidia-fabricmanager, where systemd runs) → ``{packages, version, active}``:
    ``packages`` the installed fabric manager packages by name (their version), ``version`` what the binary
    says (else the upstream version of the installed ``nvidia-fabricmanager``/``nvidia-fabric-manager``
    package), None when none is installed.  Empty output (or another command's): None, not known."""
    lines = _lines(output, "driver.fabric_manager", ("pkg=", "active="))
    if lines is None:
        return None
    packages: dict[str, str] = {}
    binary = None
    active = None
    for line in lines:
        if line.startswith("active="):
            state = line[len("active="):].strip()
            if state and not re.fullmatch(r"[a-z-]+", state):
                raise UntrustedOutput(f"driver.fabric_manager: systemctl is-active printed {state[:40]!r}")
            active = state or None  # active, inactive, failed, activating, ...
            continue
        if line.startswith("pkg="):
            parts = line[4:].split()
            if parts and len(parts[0]) >= 2 and parts[0][1] != "i":
                continue  # dpkg knows of it (un, rc): not installed
            if len(parts) != 3 or not _PACKAGE.match(parts[1]) or not _PACKAGE.match(parts[2]):
                raise UntrustedOutput(f"driver.fabric_manager: malformed package line {line!r}")
            packages[parts[1]] = parts[2]  # dpkg's ii/hi (installed); rpm's lines say ii
            continue
        m = re.search(r"Fabric Manager version is\s*:\s*(\S+)", line)
        if m:
            binary = m.group(1)
    version = binary
    if version is None:
        main = [v for n, v in packages.items() if n.startswith(("nvidia-fabricmanager", "nvidia-fabric-manager"))
                and "-dev" not in n]
        version = main[0].split(":", 1)[-1].split("-", 1)[0] if main else None
    return {"packages": packages, "version": version, "active": active}


class FabricManager(Fact):
    name = "driver.fabric_manager"
    command = (
        "if command -v dpkg-query >/dev/null 2>&1; then\n"
        "  dpkg-query -W -f='pkg=${db:Status-Abbrev} ${Package} ${Version}\\n' 'nvidia-fabricmanager*' "
        "'cuda-drivers-fabricmanager*' 2>/dev/null\n"
        "elif command -v rpm >/dev/null 2>&1; then\n"
        "  rpm -qa --qf 'pkg=ii %{NAME} %{VERSION}-%{RELEASE}\\n' 'nvidia-fabric*manager*' 'cuda-drivers-fabricmanager*'\n"
        "fi\n"
        "if command -v nv-fabricmanager >/dev/null 2>&1; then nv-fabricmanager --version 2>&1; fi\n"
        "if [ -d /run/systemd/system ]; then echo \"active=$(systemctl is-active nvidia-fabricmanager 2>/dev/null)\"; fi\n"
        "echo " + END
    )
    process = staticmethod(parse_fabric_manager)
