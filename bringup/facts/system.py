"""System facts: systemd, docker, sysctl, kernel cmdline, cpufreq, cpuidle, THP."""
from __future__ import annotations

import re
from typing import Any

from ..ssh.command import sh
from .helpers import json_object, key_values, to_int as _int
from .base import Fact, UntrustedOutput, ascii_whole
from ..untrusted import loads  # deep or 100,000-digit JSON: ValueError (Unreadable), never RecursionError

__all__ = [
    "SystemSystemd",
    "SystemDocker",
    "SystemDockerDaemon",
    "SystemSysctl",
    "SystemCmdline",
    "SystemCpufreq",
    "SystemCpuidle",
    "SystemThp",
    "SystemThpDefrag",
    "SystemContainer",
    "parse_container",
    "parse_systemd",
    "parse_docker_info_json",
    "parse_docker_daemon_json",
    "parse_sysctl",
    "parse_cmdline",
    "parse_cpufreq",
    "parse_cpuidle",
    "parse_bracket_choice",
]


def _kv_lines(output: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in output.splitlines():
        k, sep, v = line.strip().partition("=")
        if sep and re.fullmatch(r"[a-z_0-9]+", k):
            out[k] = v.strip()
    return out


# --------------------------------------------------------------------------
# systemd
# --------------------------------------------------------------------------

def parse_systemd(output: str) -> dict[str, Any]:
    """``booted=yes|no``, ``pid1=COMM``, ``version=<systemctl --version line 1>`` →
    ``{booted, pid1, version, version_text}``; ``version`` is the int (252)."""
    kv = _kv_lines(output)
    if not kv:
        return {}
    text = kv.get("version") or None
    m = re.match(r"^systemd\s+([0-9]+)", text or "")
    return {
        "booted": kv.get("booted") == "yes",
        "pid1": kv.get("pid1") or None,
        "version": int(m.group(1)) if m else None,
        "version_text": text,
    }


class SystemSystemd(Fact):
    name = "system.systemd"
    command = (
        "if [ -d /run/systemd/system ]; then echo booted=yes; else echo booted=no; fi\n"
        "c=; read -r c < /proc/1/comm; echo \"pid1=$c\"\n"
        "echo \"version=$(systemctl --version 2>/dev/null | head -n 1)\""
    )
    process = staticmethod(parse_systemd)


# --------------------------------------------------------------------------
# docker
# --------------------------------------------------------------------------

#: Seconds ``docker info`` may take within its fact (inside the fact's own bound, FACT_TIME_S).
DOCKER_INFO_S = 10
#: The line the docker fact prints when ``docker info`` did not answer within :data:`DOCKER_INFO_S`.
DOCKER_HUNG = "bringup: docker info timed out"


def docker_shape(server_version: Any, runtimes: dict[str, str | None], default_runtime: Any,
                 cgroup_driver: Any, cgroup_version: Any, errors: list[str]) -> dict[str, Any]:
    """The ``system.docker`` fact from its parts, whichever output they were read from."""
    return {
        "server_version": server_version or None,
        "runtimes": sorted(runtimes),
        "runtime_paths": {k: runtimes[k] for k in sorted(runtimes)},
        "default_runtime": default_runtime or None,
        "nvidia_runtime": "nvidia" in runtimes,
        "cgroup_driver": cgroup_driver or None,
        "cgroup_version": str(cgroup_version) if cgroup_version else None,
        "errors": errors,
    }


def parse_docker_info_json(output: str) -> dict[str, Any]:
    """``docker info --format '{{json .}}'`` → ``{server_version, runtimes (sorted),
    runtime_paths, default_runtime, nvidia_runtime, cgroup_driver, cgroup_version,
    errors}``.  A daemon that cannot be reached gives ``server_version: None``
    and its message in ``errors``."""
    data = None
    errors: list[str] = []
    for line in output.splitlines():
        line = line.strip()
        if line == DOCKER_HUNG:
            # timeout(1) ended it: the daemon's state is unknown, never "not running" (the docker role would
            # then write daemon.json without the restart that applies it).
            raise UntrustedOutput(f"docker info gave no answer within {DOCKER_INFO_S} s (dockerd hangs?): "
                                  "the daemon's state is unknown")
        if line.startswith("{"):
            try:
                data = loads(line, what="docker info")
                break
            except ValueError:
                continue
        elif line:
            errors.append(line)
    if data is None:
        start = output.find("{")
        if start >= 0:
            try:
                data = loads(output[start:], what="docker info")
            except ValueError:
                data = None
    if not isinstance(data, dict):
        return docker_shape(None, {}, None, None, None, errors) if errors else {}
    runtimes: dict[str, str | None] = {}
    for rname, spec in (data.get("Runtimes") or {}).items():
        runtimes[rname] = spec.get("path") if isinstance(spec, dict) else None
    errors += [str(e) for e in (data.get("ServerErrors") or [])]
    return docker_shape(data.get("ServerVersion"), runtimes, data.get("DefaultRuntime"),
                        data.get("CgroupDriver"), data.get("CgroupVersion"), errors)


class SystemDocker(Fact):
    name = "system.docker"
    requires_command = "docker"
    # timeout(1) is on every host bringup reaches over SSH (each script runs under it): a daemon that does not
    # answer costs 10 s, not the whole command_timeout (nor the fact's own FACT_TIME_S), and says so: its
    # status 124 alone, with nothing printed, read as a daemon not running.
    command = (f"timeout {DOCKER_INFO_S} docker info --format '{{{{json .}}}}'; _r=$?; "
               f"[ \"$_r\" -ne 124 ] || echo '{DOCKER_HUNG}'; exit \"$_r\"")
    process = staticmethod(parse_docker_info_json)


def parse_docker_daemon_json(output: str) -> dict[str, Any] | None:
    """``/etc/docker/daemon.json`` → ``{config, error, runtimes, default_runtime}``;
    None when the file is absent or empty.  Invalid JSON gives ``config: None``
    and the parser's message in ``error`` (dockerd would refuse to start)."""
    if not output.strip():
        return None
    config, error = json_object(output)
    if config is None:
        return {"config": None, "error": error, "runtimes": [], "default_runtime": None}
    runtimes = config.get("runtimes")
    return {
        "config": config,
        "error": None,
        "runtimes": sorted(runtimes) if isinstance(runtimes, dict) else [],
        "default_runtime": config.get("default-runtime"),
    }


class SystemDockerDaemon(Fact):
    name = "system.docker_daemon"
    command = "cat /etc/docker/daemon.json"
    process = staticmethod(parse_docker_daemon_json)


# --------------------------------------------------------------------------
# sysctl
# --------------------------------------------------------------------------

def parse_sysctl(output: str) -> dict[str, str]:
    """``sysctl -a`` → ``{key: value}``, runs of whitespace (tabs) → one space.

    A key printed on several lines (multi-line values) is joined by spaces.
    """
    out: dict[str, str] = {}
    for line in output.splitlines():
        m = re.match(r"^\s*([A-Za-z0-9_][^\s=]*)\s*=\s?(.*)$", line)
        if not m:
            continue
        key, value = m.group(1), " ".join(m.group(2).split())
        if key in out and out[key] and value:
            out[key] = out[key] + " " + value
        elif key not in out or value:
            out[key] = value
    return out


#: A sysctl key as the sysctl role accepts one (bringup.resources.sysctl): dotted names, no slash, no dot-dot.
_SYSCTL_KEY = re.compile(r"[a-z][a-z0-9_]*(\.[A-Za-z0-9_-]+)+")
#: The most keys read one by one (a reader of more reads the whole fact: ``sysctl -a`` is then cheaper).
SYSCTL_KEYS_MAX = 200


def _sysctl_files(keys) -> list[tuple[str, str]] | None:
    """``(key, its file under /proc/sys)`` for each of ``keys``, as sysctl(8) maps them; None when one is no plain
    dotted key (read whole then) or there are too many."""
    keys = sorted(set(keys))
    if not keys or len(keys) > SYSCTL_KEYS_MAX or not all(isinstance(k, str) and _SYSCTL_KEY.fullmatch(k)
                                                         for k in keys):
        return None
    return [(k, k.replace(".", "/")) for k in keys]


class SystemSysctl(Fact):
    name = "system.sysctl"
    requires_command = "sysctl"
    command = "sysctl -a"
    process = staticmethod(parse_sysctl)
    read_small = True  # some keys' values: one line each

    @classmethod
    def command_for(cls, keys):
        """The keys' values alone, from the same program and in its words (``sysctl -a`` reads every key of the
        kernel, ~40 KB, ~35 ms): ``-e`` leaves out a key this kernel lacks, as ``-a`` does not list it; one it
        cannot read (write-only) is left out too."""
        files = _sysctl_files(keys)
        if files is None:
            return None
        return "sysctl -e " + " ".join(sh("%s", k) for k, _ in files)


class SystemSysctlWritable(Fact):
    """The sysctl keys this host lets root change (a network namespace shows
    some of the machine's keys read-only, mode 0444)."""

    name = "system.sysctl_writable"
    command = "cd /proc/sys && find . -type f -perm -u+w | sed 's|^\\./||; s|/|.|g' | sort"
    read_small = True  # some keys' names, by the shell's own tests

    @classmethod
    def command_for(cls, keys):
        """The same test for ``keys``' files alone instead of the whole tree, by the shell's own ``-f`` and ``-w``
        (no process: /proc/sys answers ``-w`` by the file's owner bits, for root too, so a key a network
        namespace shows read-only, mode 0444, is not writable, as ``find -perm -u+w`` says); in the whole
        fact's words (dotted keys, one a line)."""
        files = _sysctl_files(keys)
        if files is None:
            return None
        return "cd /proc/sys && " + "; ".join(sh("if [ -f %s ] && [ -w %s ]; then echo %s; fi", f, f, k)
                                              for k, f in files)

    @staticmethod
    def process(output: str) -> list[str]:
        return [line.strip() for line in output.splitlines() if line.strip()]


# --------------------------------------------------------------------------
# /proc/cmdline
# --------------------------------------------------------------------------

def parse_cmdline(output: str) -> dict[str, Any]:
    """``/proc/cmdline`` → ``{raw, args, params, init_args}``.

    ``args`` are the kernel's words (double quotes honoured, as the kernel
    does), ``params`` maps ``key`` → value (None for a bare flag; the last
    occurrence wins), ``init_args`` are the words after ``--`` (for init).  Text that is not printable (binary
    junk) raises :class:`UntrustedOutput`.
    """
    raw = " ".join(output.split())
    if not raw:
        return {}
    if not raw.isprintable():
        # The kernel's command line is text: binary junk (control characters, bytes that were not UTF-8, Unicode
        # format characters) is no command line, never counted as its words.
        bad = next(ch for ch in raw if not ch.isprintable())
        raise UntrustedOutput(f"/proc/cmdline holds a character that is not printable text "
                              f"(U+{ord(bad):04X}): unreadable")
    words = [w.replace('"', "") for w in re.findall(r'(?:[^\s"]+|"[^"]*")+', raw)]
    init_args: list[str] = []
    if "--" in words:
        i = words.index("--")
        words, init_args = words[:i], words[i + 1:]
    params: dict[str, str | None] = {}
    for w in words:
        k, sep, v = w.partition("=")
        params[k] = v if sep else None
    return {"raw": raw, "args": words, "params": params, "init_args": init_args}


class SystemCmdline(Fact):
    name = "system.cmdline"
    command = "cat /proc/cmdline"
    process = staticmethod(parse_cmdline)


# --------------------------------------------------------------------------
# cpufreq / cpuidle
# --------------------------------------------------------------------------

def parse_cpufreq(output: str) -> dict[str, Any] | None:
    """``cpu=N governor=.. driver=.. min=.. max=.. hwmax=.. epp=..`` lines (+ ``no_turbo=``,
    ``boost=``) → ``{governor, governors, driver, cpus: {"0": {...}}, no_turbo, boost}``;
    None when no CPU has cpufreq (VMs).  ``governor`` is None when CPUs differ."""
    cpus: dict[int, dict[str, Any]] = {}
    glob: dict[str, str] = {}
    for line in output.splitlines():
        toks = line.split()
        if not toks:
            continue
        kv = key_values(toks)
        if "cpu" in kv and ascii_whole(kv["cpu"], 5):
            cpus[int(kv["cpu"])] = {
                "governor": kv.get("governor") or None,
                "driver": kv.get("driver") or None,
                "min_khz": _int(kv.get("min")),
                "max_khz": _int(kv.get("max")),
                "cpuinfo_max_khz": _int(kv.get("hwmax")),
                "epp": kv.get("epp") or None,
            }
        else:
            glob.update(kv)
    if not cpus:
        return None
    governors = sorted({c["governor"] for c in cpus.values() if c["governor"]})
    drivers = sorted({c["driver"] for c in cpus.values() if c["driver"]})

    def flag(key: str) -> bool | None:
        v = _int(glob.get(key))
        return None if v is None else bool(v)

    return {
        "governor": governors[0] if len(governors) == 1 else None,
        "governors": governors,
        "driver": drivers[0] if len(drivers) == 1 else None,
        "cpus": {str(k): cpus[k] for k in sorted(cpus)},
        "no_turbo": flag("no_turbo"),
        "boost": flag("boost"),
    }


class SystemCpufreq(Fact):
    name = "system.cpufreq"
    command = (
        "for c in /sys/devices/system/cpu/cpu[0-9]*; do\n"
        "  f=$c/cpufreq\n"
        "  if [ -r \"$f/scaling_governor\" ]; then\n"
        "    g=; d=; lo=; hi=; hw=; epp=\n"
        "    read -r g < \"$f/scaling_governor\"\n"
        "    if [ -r \"$f/scaling_driver\" ]; then read -r d < \"$f/scaling_driver\"; fi\n"
        "    if [ -r \"$f/scaling_min_freq\" ]; then read -r lo < \"$f/scaling_min_freq\"; fi\n"
        "    if [ -r \"$f/scaling_max_freq\" ]; then read -r hi < \"$f/scaling_max_freq\"; fi\n"
        "    if [ -r \"$f/cpuinfo_max_freq\" ]; then read -r hw < \"$f/cpuinfo_max_freq\"; fi\n"
        "    if [ -r \"$f/energy_performance_preference\" ]; then read -r epp < \"$f/energy_performance_preference\"; fi\n"
        "    echo \"cpu=${c##*/cpu} governor=$g driver=$d min=$lo max=$hi hwmax=$hw epp=$epp\"\n"
        "  fi\n"
        "done\n"
        "if [ -r /sys/devices/system/cpu/intel_pstate/no_turbo ]; then\n"
        "  v=; read -r v < /sys/devices/system/cpu/intel_pstate/no_turbo; echo \"no_turbo=$v\"\n"
        "fi\n"
        "if [ -r /sys/devices/system/cpu/cpufreq/boost ]; then\n"
        "  v=; read -r v < /sys/devices/system/cpu/cpufreq/boost; echo \"boost=$v\"\n"
        "fi"
    )
    process = staticmethod(parse_cpufreq)


def parse_cpuidle(output: str) -> dict[str, Any] | None:
    """``driver=``, ``governor=`` and ``state I latency=.. residency=.. disable=.. name=NAME``
    lines (cpu0's states) → ``{driver, governor, states: [{index, name,
    latency_us, residency_us, disabled}]}``; None when there are no idle states
    (no cpuidle, or a VM whose cpuidle driver is ``none``)."""
    driver = governor = None
    states: list[dict[str, Any]] = []
    for line in output.splitlines():
        line = line.strip()
        m = re.match(r"^state\s+([0-9]+)\s+latency=(\S*)\s+residency=(\S*)\s+disable=(\S*)\s+name=(.*)$", line)
        if m:
            states.append(
                {
                    "index": int(m.group(1)),
                    "name": m.group(5).strip(),
                    "latency_us": _int(m.group(2)),
                    "residency_us": _int(m.group(3)),
                    "disabled": _int(m.group(4)) == 1 if _int(m.group(4)) is not None else None,
                }
            )
        elif line.startswith("driver="):
            driver = line.partition("=")[2].strip() or None
        elif line.startswith("governor="):
            governor = line.partition("=")[2].strip() or None
    if not states:  # no idle states (VMs: driver "none", or no cpuidle at all)
        return None
    states.sort(key=lambda s: s["index"])
    return {"driver": driver, "governor": governor, "states": states}


class SystemCpuidle(Fact):
    name = "system.cpuidle"
    command = (
        "d=/sys/devices/system/cpu/cpuidle\n"
        "if [ -r \"$d/current_driver\" ]; then v=; read -r v < \"$d/current_driver\"; echo \"driver=$v\"; fi\n"
        "if [ -r \"$d/current_governor_ro\" ]; then v=; read -r v < \"$d/current_governor_ro\"; echo \"governor=$v\";\n"
        "elif [ -r \"$d/current_governor\" ]; then v=; read -r v < \"$d/current_governor\"; echo \"governor=$v\"; fi\n"
        "for s in /sys/devices/system/cpu/cpu0/cpuidle/state[0-9]*; do\n"
        "  if [ -d \"$s\" ]; then\n"
        "    nm=; lat=; res=; dis=\n"
        "    read -r nm < \"$s/name\"; read -r lat < \"$s/latency\"; read -r res < \"$s/residency\"\n"
        "    if [ -r \"$s/disable\" ]; then read -r dis < \"$s/disable\"; fi\n"
        "    echo \"state ${s##*/state} latency=$lat residency=$res disable=$dis name=$nm\"\n"
        "  fi\n"
        "done"
    )
    process = staticmethod(parse_cpuidle)


# --------------------------------------------------------------------------
# transparent hugepages
# --------------------------------------------------------------------------

def parse_bracket_choice(output: str) -> str | None:
    """``always [madvise] never`` → ``madvise``; no brackets → None.

    A string scan, not ``\\[([^\\]]+)\\]``: searched from every ``[`` that pattern ran to the end of the text
    each time, so 100,000 ``[`` of a hostile sysfs file took 33 s.  Each ``]`` is looked for once here."""
    at = output.find("[")
    while at >= 0:
        close = output.find("]", at + 1)
        if close < 0:
            return None
        if close > at + 1:
            return output[at + 1:close].strip()
        at = output.find("[", close + 1)
    return None


class SystemThp(Fact):
    name = "system.thp"
    command = "cat /sys/kernel/mm/transparent_hugepage/enabled"
    process = staticmethod(parse_bracket_choice)


class SystemThpDefrag(Fact):
    name = "system.thp_defrag"
    command = "cat /sys/kernel/mm/transparent_hugepage/defrag"
    process = staticmethod(parse_bracket_choice)


# --------------------------------------------------------------------------
# container
# --------------------------------------------------------------------------

#: Prints ``container=<what says so>`` inside a container, nothing elsewhere: systemd's record, its
#: detector, then the markers that engines leave (Docker, Podman, PID 1's environment).  A false "container"
#: costs a skip that names its opt-in; a missed one lets a role change the machine from inside a container.
_CONTAINER_PROBE = (
    "if [ -s /run/systemd/container ]; then echo \"container=/run/systemd/container says $(cat /run/systemd/container)\"\n"
    "elif v=$(systemd-detect-virt --container 2>/dev/null) && [ -n \"$v\" ] && [ \"$v\" != none ]; then "
    "echo \"container=systemd-detect-virt --container says $v\"\n"
    "elif [ -e /.dockerenv ]; then echo 'container=/.dockerenv exists'\n"
    "elif [ -e /run/.containerenv ]; then echo 'container=/run/.containerenv exists'\n"
    "elif tr '\\0' '\\n' < /proc/1/environ 2>/dev/null | grep -q '^container='; then "
    "echo 'container=PID 1 has container= in its environment'\n"
    "fi"
)


def parse_container(output: str) -> str | None:
    """``container=<what says so>`` → that text; no such line (not a container) → None."""
    return _kv_lines(output).get("container") or None


class SystemContainer(Fact):
    """What says this host is a container (``/run/systemd/container says docker``), or None."""

    name = "system.container"
    command = _CONTAINER_PROBE
    process = staticmethod(parse_container)
