"""The pyinfra and Ansible peers' side of bench/compare.py: their virtual environment (made once from PyPI, with
pytest-testinfra for the testinfra peer), the versions measured, and each peer's inventory for a set of sandbox hosts
(pyinfra's inventory.py, Ansible's inventory and ansible.cfg, the floor's hosts).  Cut from bench/compare.py
(issue 43 item 2): one module per peer, the parts keep only what they run.
"""
from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

from compare_run import PEER_PACKAGES, PYTHON, VENV, log

import harness  # noqa: E402 - compare_run puts the checkout (harness/) on sys.path


def peer_venv() -> Path:
    """.sandbox/bench-venv with pyinfra, ansible-core and pytest-testinfra (made once; reused while it imports)."""
    py = VENV / "bin" / "python"
    ok = py.exists() and subprocess.run([str(py), "-c", "import pyinfra, ansible, paramiko, testinfra"],
                                        capture_output=True).returncode == 0
    if not ok:
        log(f"making {VENV} with {', '.join(PEER_PACKAGES)} from PyPI")
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", *PEER_PACKAGES], check=True)
    return VENV / "bin"


def versions(venv: Path) -> dict[str, str]:
    def out(argv: list[str]) -> str:
        return subprocess.run(argv, capture_output=True, text=True).stdout.strip().splitlines()[0]
    return {
        "bringup": out([PYTHON, "-c", "import bringup; print(bringup.__version__)"]),
        "python (bringup)": platform.python_version(),
        "paramiko (bringup, floor)": out([PYTHON, "-c", "import paramiko; print(paramiko.__version__)"]),
        "pyinfra": out([str(venv / "pyinfra"), "--version"]),
        "ansible-core": out([str(venv / "ansible-playbook"), "--version"]),
        "pytest-testinfra": out([str(venv / "python"), "-c", "from importlib.metadata import version as v; print("
                                 "v('pytest-testinfra'), 'with pytest', v('pytest'), 'and paramiko', v('paramiko'))"]),
        "pytest-testinfra (bringup backend)": out([PYTHON, "-c", "from importlib.metadata import version as v; print("
                                                   "v('pytest-testinfra'), 'with pytest', v('pytest'))"]),
        "OpenSSH (client, Ansible)": subprocess.run(["ssh", "-V"], capture_output=True, text=True).stderr.strip(),
    }



def write_peer_inventories(hosts: list[harness.SandboxHost], d: Path) -> None:
    """pyinfra's inventory.py, Ansible's inventory and ansible.cfg (pipelining, ControlPersist), one known_hosts."""
    kh = d / "known_hosts"
    kh.write_text("".join(h.known_hosts.read_text() for h in hosts))
    key = hosts[0].key_file
    (d / "pyinfra_inventory.py").write_text("hosts = [\n" + "".join(
        f"    ({h.name!r}, {{'ssh_hostname': '127.0.0.1', 'ssh_port': {h.port}, 'ssh_user': 'root', "
        f"'ssh_key': {str(key)!r}, 'ssh_known_hosts_file': {str(kh)!r}, "
        f"'ssh_strict_host_key_checking': 'yes'}}),\n" for h in hosts) + "]\n")
    (d / "ansible_hosts").write_text("[all]\n" + "".join(
        f"{h.name} ansible_host=127.0.0.1 ansible_port={h.port} ansible_user=root\n" for h in hosts))
    (d / "ansible.cfg").write_text(
        "[defaults]\nhost_key_checking = True\ninterpreter_python = /usr/bin/python3\n"
        f"private_key_file = {key}\nforks = 64\nretry_files_enabled = False\n"
        "[ssh_connection]\npipelining = True\n"
        f"ssh_args = -o ControlMaster=auto -o ControlPersist=60s -o UserKnownHostsFile={kh} "
        "-o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes\n"
        f"control_path_dir = {d / 'cp'}\n")
    (d / "floor_hosts.json").write_text(json.dumps(
        [{"port": h.port, "key": str(key), "known_hosts": str(h.known_hosts)} for h in hosts]))
