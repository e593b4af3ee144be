"""Connecting for real: host keys, become, unreachable hosts, parallel runs, facts."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness import write_inventory

from .helpers import REPO, invoke, last_report, recap

pytestmark = pytest.mark.integration


def inventory(path: Path, hosts: dict[str, dict]) -> Path:
    path.write_text(yaml.safe_dump({"all": {"vars": {"gpu_profile": "cpu", "sysctl_profile": "none"},
                                            "hosts": hosts}}))
    return path


def test_unknown_host_key_is_refused_then_accepted_new(sandbox_host, tmp_path):
    known = tmp_path / "known_hosts"
    hv = dict(sandbox_host.inventory_vars(), ssh_known_hosts=str(known))
    inventory(tmp_path / "hosts", {"h": hv})
    r = invoke("provision", "--host", "h", "--roles", "sysctl", cwd=tmp_path)
    assert r.returncode == 4, r.stdout + r.stderr
    assert "unknown host key" in r.stdout and "--accept-new-host-keys" in r.stdout
    assert recap(r.stdout)["h"]["unreachable"] == 1
    assert not known.exists()

    r = invoke("provision", "--roles", "sysctl", "--host", "h", "--accept-new-host-keys", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    line = known.read_text().split()
    assert line[0] == f"[127.0.0.1]:{sandbox_host.port}"
    # The recorded key is the container's own, read through docker exec.
    pub = sandbox_host.exec(["cat", "/etc/ssh/ssh_host_ed25519_key.pub"]).stdout.split()
    assert pub[1] in known.read_text()


def test_changed_host_key_is_refused_even_with_accept_new(sandbox_host, tmp_path):
    known = tmp_path / "known_hosts"
    # Another host's key recorded under this address: what a MITM or a rebuilt host looks like.
    other = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")],
                           capture_output=True)
    assert other.returncode == 0
    fake = (tmp_path / "k.pub").read_text().split()
    known.write_text(f"[127.0.0.1]:{sandbox_host.port} {fake[0]} {fake[1]}\n")
    inventory(tmp_path / "hosts", {"h": dict(sandbox_host.inventory_vars(), ssh_known_hosts=str(known))})
    r = invoke("provision", "--roles", "sysctl", "--host", "h", "--accept-new-host-keys", cwd=tmp_path)
    assert r.returncode == 4 and "CHANGED" in r.stdout, r.stdout + r.stderr


def test_become_through_sudo(sandbox_host, tmp_path):
    hv = dict(sandbox_host.inventory_vars(), ansible_user="deploy", ansible_become=True)
    inventory(tmp_path / "hosts", {"h": hv})
    r = invoke("provision", "--roles", "sysctl", "--host", "h", "--set", "sysctl={net.ipv4.tcp_fastopen: 2}", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sandbox_host.exec(["cat", "/proc/sys/net/ipv4/tcp_fastopen"]).stdout.strip() == "2"
    owner = sandbox_host.exec(["stat", "-c", "%U", "/etc/sysctl.d/90-trt-latency.conf"]).stdout.strip()
    assert owner == "root"


def test_one_unreachable_host_does_not_stop_the_others(sandbox_host, tmp_path):
    good = sandbox_host.inventory_vars()
    dead = dict(good, ansible_port=1, ssh_connect_timeout=3)  # nothing listens on port 1
    inventory(tmp_path / "hosts", {"good": good, "dead": dead})
    r = invoke("provision", "--roles", "sysctl", "--hosts", "good,dead", "--forks", "2", cwd=tmp_path)
    assert r.returncode == 4, r.stdout + r.stderr
    rc = recap(r.stdout)
    assert rc["dead"]["unreachable"] == 1 and rc["good"]["unreachable"] == 0 and rc["good"]["failed"] == 0
    assert "ssh to 127.0.0.1:1 failed" in r.stdout
    assert {h["host"]: h["status"] for h in last_report(tmp_path)["hosts"]} == {"good": "ok", "dead": "unreachable"}


def test_facts_json_over_ssh(sandbox_host, tmp_path):
    inventory(tmp_path / "hosts", {"h": sandbox_host.inventory_vars()})
    r = invoke("facts", "--host", "h", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    facts = json.loads(r.stdout)["facts"]
    assert facts["os.release"]["id"] == "debian"
    assert facts["system.systemd"]["booted"] is True and facts["system.systemd"]["pid1"] == "systemd"
    hostname = sandbox_host.exec(["cat", "/proc/sys/kernel/random/boot_id"]).stdout.strip()
    assert facts["os.boot_id"] == hostname
    assert facts["nvidia.smi"] in (None, [], {})  # no GPU, no nvidia-smi in the sandbox
    # The health facts on a real host: no RDMA port, no nvidia-smi; the kernel log read, or its refusal said
    # with the words dmesg gives through the second channel (a container without CAP_SYSLOG is refused).
    assert facts["net.infiniband"] == [] and facts["nvidia.nvlink"] in (None, [])
    dmesg = sandbox_host.exec(["sh", "-c", "dmesg >/dev/null"], check=False)
    log = facts["kernel.xid"]
    if dmesg.returncode == 0:
        assert log["readable"] is True and log["source"] == "dmesg", log
    else:
        assert log["readable"] is False and dmesg.stderr.strip().split(": ")[-1] in log["error"], (log, dmesg.stderr)


def test_console_script_from_any_folder(sandbox_host, tmp_path):
    exe = shutil.which("bringup") or str(Path(sys.executable).parent / "bringup")
    write_inventory(tmp_path / "hosts", [sandbox_host])
    r = subprocess.run([exe, "hosts"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert sandbox_host.name in r.stdout and f"127.0.0.1:{sandbox_host.port}" in r.stdout
    r = subprocess.run([exe, "plan", "--roles", "sysctl", "--host", sandbox_host.name], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sandbox_host.name in recap(r.stdout)


def _sudo_user(host, name: str, password: str, *, nopasswd: bool) -> None:
    """A login ``name`` with ``password`` whose sudo asks for it (or not), reached with the run's key."""
    rule = "NOPASSWD:ALL" if nopasswd else "ALL"
    host.exec(f"id {name} >/dev/null 2>&1 || useradd --create-home --shell /bin/bash {name}; "
              f"echo '{name}:{password}' | chpasswd; "
              f"echo '{name} ALL=(ALL) {rule}' > /etc/sudoers.d/{name}; chmod 0440 /etc/sudoers.d/{name}; "
              f"install -d -m 0700 -o {name} -g {name} /home/{name}/.ssh; "
              f"install -m 0600 -o {name} -g {name} /root/.ssh/authorized_keys /home/{name}/.ssh/authorized_keys")


def _provision_as(host, tmp_path, user: str, password: str, fastopen: int):
    hv = dict(host.inventory_vars(), ansible_user=user, ansible_become=True, ansible_become_password=password)
    inventory(tmp_path / "hosts", {"h": hv})
    return invoke("provision", "--roles", "sysctl", "--host", "h", "--set",
                  f"sysctl={{net.ipv4.tcp_fastopen: {fastopen}}}", cwd=tmp_path)


@pytest.mark.reliability(item=1, fault='become password with NOPASSWD sudo (a password that is a shell command)',
                         checks=('nothing executed',))
def test_become_password_is_never_run_as_a_command(sandbox_host, tmp_path):
    """NOPASSWD sudo does not read a password: it must not reach the script's stdin (it ran as root)."""
    _sudo_user(sandbox_host, "nopw", "unused-pw", nopasswd=True)
    sandbox_host.exec("rm -f /tmp/pwned-by-password")
    r = _provision_as(sandbox_host, tmp_path, "nopw", "touch /tmp/pwned-by-password; true", 1)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sandbox_host.exec("test -e /tmp/pwned-by-password", check=False).returncode == 1
    assert sandbox_host.exec(["cat", "/proc/sys/net/ipv4/tcp_fastopen"]).stdout.strip() == "1"


@pytest.mark.reliability(item=18, fault='wrong become password on a real sudo',
                         checks=('secret never shown', 'exit code'))
def test_become_password_answers_sudos_prompt_and_a_wrong_one_says_so(sandbox_host, tmp_path):
    _sudo_user(sandbox_host, "pwuser", "Right-pw-42", nopasswd=False)
    r = _provision_as(sandbox_host, tmp_path, "pwuser", "Right-pw-42", 3)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sandbox_host.exec(["cat", "/proc/sys/net/ipv4/tcp_fastopen"]).stdout.strip() == "3"
    assert sandbox_host.exec(["stat", "-c", "%U", "/etc/sysctl.d/90-trt-latency.conf"]).stdout.strip() == "root"

    r = _provision_as(sandbox_host, tmp_path, "pwuser", "Wrong-pw-13", 3)
    out = r.stdout + r.stderr
    assert r.returncode == 2, out
    # sudo's own words, once; not a fact error per fact, and never the password.
    assert "refused ansible_become_password" in out and "try again" in out, out
    assert "could not be parsed" not in out and "Wrong-pw-13" not in out
    assert "Wrong-pw-13" not in json.dumps(last_report(tmp_path))


def _silent_run(hosts, pause: tuple[str, str, str]):
    """Run the sysctl role in-process; ``docker pause`` a host's container when its progress hits a step."""
    from bringup.inventory.hosts import load_inventory
    from bringup.project import content_root
    from bringup.engine.roles import load_roles, select_roles
    from bringup.engine.runner import Options, prepare, run_hosts
    from bringup.engine.templates import Templates

    inv = load_inventory(hosts)
    chosen = list(inv.hosts.values())
    order, every = load_roles(content_root())
    roles = select_roles(order, every, "sysctl")
    name, step, container = pause
    finished: list[str] = []

    def progress(host: str, text: str) -> None:
        if host == name and text.startswith(step):
            subprocess.run(["docker", "pause", container], check=True, capture_output=True)

    results = run_hosts(chosen, roles, prepare(chosen, roles), Options(forks=2),
                        Templates(content_root() / "templates"), progress, lambda r: finished.append(r.host))
    return {r.host: r for r in results}, finished


@pytest.mark.reliability(item=9, fault='host stops answering mid-write (docker pause), 2 hosts',
                         checks=('whole old or new file', 'no leftovers', 'next run converges', 'no hang'))
def test_a_host_that_stops_answering_mid_write_is_cut_off(sandbox_host, sandbox_host_factory, tmp_path):
    import time

    silent = sandbox_host_factory("silent-host")
    conf = {"sysctl_profile": "none", "sysctl": {"net.ipv4.tcp_fastopen": 3}, "command_timeout": 8}
    inventory(tmp_path / "hosts", {"good": dict(sandbox_host.inventory_vars(), **conf),
                                   "silent": dict(silent.inventory_vars(), **conf)})
    sandbox_host.exec("rm -f /etc/sysctl.d/90-trt-latency.conf")
    silent.exec("rm -f /etc/sysctl.d/90-trt-latency.conf")
    started = time.monotonic()
    try:
        results, finished = _silent_run(tmp_path / "hosts", ("silent", "sysctl: applying", silent.container))
    finally:
        subprocess.run(["docker", "unpause", silent.container], capture_output=True)
    took = time.monotonic() - started
    assert took < 60, took
    assert results["good"].status == "ok" and results["good"].count("changed") == 1
    assert results["silent"].status == "unreachable"
    assert "stopped answering: no result within 8 s (command_timeout)" in results["silent"].message
    # The finished host was handed over first, while the silent one was still waited for.
    assert finished == ["good", "silent"]
    # Nothing half-written on the silent host, and the next run converges.
    leftovers = silent.exec("ls -a /etc/sysctl.d", check=False).stdout
    assert ".bringup" not in leftovers, leftovers
    # The persisted file is the whole old one (none: removed above) or the whole new one (the good host's).
    conf = "/etc/sysctl.d/90-trt-latency.conf"
    cut = silent.exec(["cat", conf], check=False)
    assert cut.returncode != 0 or cut.stdout == sandbox_host.exec(["cat", conf]).stdout, cut.stdout
    r = invoke("provision", "--roles", "sysctl", "--hosts", "good,silent", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert silent.exec(["cat", "/proc/sys/net/ipv4/tcp_fastopen"]).stdout.strip() == "3"
    r = invoke("provision", "--roles", "sysctl", "--hosts", "good,silent", cwd=tmp_path)
    assert recap(r.stdout)["silent"]["changed"] == 0, r.stdout
