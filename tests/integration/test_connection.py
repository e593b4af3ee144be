"""Connecting for real: host keys, become, unreachable hosts, parallel runs, facts."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bringup.sandbox import write_inventory

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


def test_console_script_from_any_folder(sandbox_host, tmp_path):
    exe = shutil.which("bringup") or str(Path(sys.executable).parent / "bringup")
    write_inventory(tmp_path / "hosts", [sandbox_host])
    r = subprocess.run([exe, "hosts"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert sandbox_host.name in r.stdout and f"127.0.0.1:{sandbox_host.port}" in r.stdout
    r = subprocess.run([exe, "plan", "--roles", "sysctl", "--host", sandbox_host.name], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sandbox_host.name in recap(r.stdout)
