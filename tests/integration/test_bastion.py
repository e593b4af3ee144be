"""Issue 32 item 3: hosts reachable only through a bastion, as ``ssh`` reaches them.

Two sandbox hosts: ``bastion`` (on Docker's bridge, its sshd published on 127.0.0.1 like every sandbox
host, and on an internal network) and ``behind``, moved onto that internal network alone (``docker
network create --internal``, with no address of this machine on it; taken off the bridge, so its published port goes): from this machine there is
no route to it, which the fixture checks.  On the internal network ``behind`` answers to two names
(``gpu-behind-1``, ``gpu-behind-2``), resolved by Docker's DNS on the bastion only.  bringup reaches it
through ``ProxyJump`` from an ssh config file, through DeepOps' ``ansible_ssh_common_args='-o
ProxyCommand="ssh -W %h:%p ..."'`` (with this machine's ssh client), with the jump host's key checked as
strictly as any host's.
"""
from __future__ import annotations

import secrets
import socket
import subprocess
from pathlib import Path

import pytest
import yaml

from harness.common import LABEL

from .helpers import invoke, recap

pytestmark = pytest.mark.integration

NAMES = ("gpu-behind-1", "gpu-behind-2")


def _docker(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=check, timeout=120)


def _ssh_answers(addr: tuple[str, int]) -> bool:
    """Whether an SSH server's banner comes back from ``addr`` within 3 s.  (Not a bare connect: this
    machine's way out may accept any TCP connection itself and then say nothing.)"""
    try:
        with socket.create_connection(addr, timeout=3) as s:
            s.settimeout(3)
            return s.recv(4).startswith(b"SSH-")
    except OSError:
        return False


@pytest.fixture(scope="module")
def net(sandbox_host_factory):
    bastion = sandbox_host_factory("bastion", light=True)
    behind = sandbox_host_factory("behind", light=True)
    name = f"bringup-internal-{secrets.token_hex(3)}"
    # No address of this machine on the network's bridge either (inhibit_ipv4): no route to it from here.
    _docker("network", "create", "--internal", "-o", "com.docker.network.bridge.inhibit_ipv4=true",
            "--label", f"{LABEL}=1", name)
    try:
        _docker("network", "connect", name, bastion.container)
        _docker("network", "connect", *(a for n in NAMES for a in ("--alias", n)), name, behind.container)
        _docker("network", "disconnect", "bridge", behind.container)
        inner = _docker("inspect", "-f", f'{{{{(index .NetworkSettings.Networks "{name}").IPAddress}}}}',
                        behind.container).stdout.strip()
        # No way in from here: no sshd answers at its internal address or the port it had published.
        for addr in ((inner, 22), ("127.0.0.1", behind.port)):
            assert not _ssh_answers(addr), addr
        key = behind.exec(["cat", "/etc/ssh/ssh_host_ed25519_key.pub"]).stdout.split()
        yield bastion, behind, key
    finally:
        _docker("network", "disconnect", "-f", name, bastion.container, check=False)
        behind.remove()
        _docker("network", "rm", name, check=False)


def _known(tmp_path: Path, bastion, key: list[str], *, with_bastion: bool = True) -> Path:
    known = tmp_path / "known_hosts"
    lines = [f"{n} {key[0]} {key[1]}\n" for n in NAMES]
    if with_bastion:
        lines.append(bastion.known_hosts.read_text())
    known.write_text("".join(lines))
    return known


def _ssh_config(tmp_path: Path, bastion, bastion_port: int | None = None) -> Path:
    p = tmp_path / "ssh_config"
    p.write_text(f"Host bastion\n  HostName 127.0.0.1\n  Port {bastion_port or bastion.port}\n  User root\n"
                 f"  IdentityFile {bastion.key_file}\n\n"
                 f"Host gpu-behind-*\n  ProxyJump bastion\n  User root\n  IdentityFile {bastion.key_file}\n")
    return p


def _inventory(tmp_path: Path, known: Path, **v) -> Path:
    hosts = {f"h{i}": {"ansible_host": n, "ssh_known_hosts": str(known), **v} for i, n in enumerate(NAMES, 1)}
    p = tmp_path / "hosts"
    p.write_text(yaml.safe_dump({"all": {"vars": {"gpu_profile": "cpu", "sysctl_profile": "none"},
                                         "hosts": hosts}}))
    return p


def _logins(bastion) -> int:
    """Logins the bastion's sshd accepted so far (its journal)."""
    out = bastion.exec("journalctl -q --no-pager -t sshd -t sshd-session | grep -c 'Accepted publickey' || true")
    return int(out.stdout.strip() or 0)


def test_proxyjump_from_ssh_config_one_bastion_login_for_both_hosts(net, tmp_path):
    bastion, behind, key = net
    known = _known(tmp_path, bastion, key)
    _inventory(tmp_path, known, ssh_config=str(_ssh_config(tmp_path, bastion)))
    r = invoke("facts", "--host", "h1", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert '"behind"' in r.stdout  # the host's own hostname, from its facts
    before = _logins(bastion)
    r = invoke("plan", "--roles", "sysctl", "--hosts", "h1,h2", "--forks", "2", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    rc = recap(r.stdout)
    assert rc["h1"]["unreachable"] == 0 and rc["h2"]["unreachable"] == 0, r.stdout
    # Both hosts behind one jump host: one login to it for the run, shared.
    assert _logins(bastion) - before == 1
    # The checklist of both, through the same jump host, its page naming the host behind it.
    r = invoke("checklist", "--hosts", "h1,h2", "--roles", "sysctl", "--out", "pages", "--set",
               "sysctl={vm.swappiness: null, kernel.numa_balancing: null}", cwd=tmp_path)
    assert r.returncode in (0, 2), r.stdout + r.stderr  # WARN (not provisioned) or FAIL lines, not unreachable
    md = (tmp_path / "pages" / "h1.md").read_text()
    assert md.startswith("# Bring-up checklist: h1") and "| PASS | gpu | GPUs for the cpu profile |" in md, md


def test_proxycommand_from_ansible_ssh_common_args_plan_provision_audit(net, tmp_path):
    bastion, behind, key = net
    known = _known(tmp_path, bastion, key)
    ssh = (f"ssh -F /dev/null -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile={known} "
           f"-i {bastion.key_file} -p {bastion.port} -W %h:%p root@127.0.0.1")
    _inventory(tmp_path, known, ansible_user="root", ansible_ssh_private_key_file=str(bastion.key_file),
               ansible_ssh_common_args=f"-o ProxyCommand=\"{ssh}\" -F none")
    r = invoke("plan", "--roles", "sysctl", "--host", "h2", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert recap(r.stdout)["h2"]["unreachable"] == 0
    # A run that writes (its run lock held on a channel through the proxy), then an audit of it.
    fastopen = "sysctl={net.ipv4.tcp_fastopen: 2}"
    r = invoke("provision", "--roles", "sysctl", "--host", "h2", "--set", fastopen, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert behind.exec(["cat", "/proc/sys/net/ipv4/tcp_fastopen"]).stdout.strip() == "2"
    r = invoke("audit", "--roles", "sysctl", "--host", "h2", "--set", fastopen, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    r = invoke("audit", "--roles", "sysctl", "--host", "h2", "--set", "sysctl={net.ipv4.tcp_fastopen: 3}",
               cwd=tmp_path)
    assert r.returncode == 2 and "h2: net.ipv4.tcp_fastopen is 2, want 3" in r.stdout, r.stdout + r.stderr


@pytest.mark.reliability(item=32, fault="a jump host whose key is unknown, then CHANGED",
                         checks=("one clear line", "exit code", "nothing touched"))
def test_bastion_key_strict_then_accept_new_then_changed_is_refused(net, tmp_path):
    bastion, behind, key = net
    known = _known(tmp_path, bastion, key, with_bastion=False)
    _inventory(tmp_path, known, ssh_config=str(_ssh_config(tmp_path, bastion)))
    r = invoke("plan", "--roles", "sysctl", "--host", "h1", cwd=tmp_path)
    assert r.returncode == 4, r.stdout + r.stderr
    assert f"jump host bastion (on the way to h1, which was not tried): unknown host key for 127.0.0.1:{bastion.port}" \
        in r.stdout, r.stdout
    assert "[127.0.0.1]" not in known.read_text()

    r = invoke("plan", "--roles", "sysctl", "--host", "h1", "--accept-new-host-keys", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    recorded = [ln.split() for ln in known.read_text().splitlines() if ln.startswith("[127.0.0.1]")]
    assert recorded == [bastion.known_hosts.read_text().split()]

    # Another key recorded for the bastion: what a MITM or a rebuilt bastion looks like.
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")], check=True)
    fake = (tmp_path / "k.pub").read_text().split()
    _known(tmp_path, bastion, key, with_bastion=False)
    with known.open("a") as f:
        f.write(f"[127.0.0.1]:{bastion.port} {fake[0]} {fake[1]}\n")
    before = _logins(bastion)
    r = invoke("plan", "--roles", "sysctl", "--host", "h1", "--accept-new-host-keys", cwd=tmp_path)
    assert r.returncode == 4, r.stdout + r.stderr
    lines = [ln for ln in r.stdout.splitlines() if "CHANGED" in ln]
    assert len(lines) == 1 and "jump host bastion" in lines[0] and f"127.0.0.1:{bastion.port}" in lines[0], r.stdout
    assert "which was not tried" in lines[0]
    assert _logins(bastion) == before  # no login was offered to it


@pytest.mark.reliability(item=32, fault="the jump host unreachable (nothing listens on its port)",
                         checks=("one clear line", "exit code"))
def test_unreachable_bastion_is_named_not_the_target(net, tmp_path):
    bastion, behind, key = net
    known = _known(tmp_path, bastion, key)
    _inventory(tmp_path, known, ssh_config=str(_ssh_config(tmp_path, bastion, bastion_port=1)),
               ssh_connect_timeout=3)
    r = invoke("plan", "--roles", "sysctl", "--host", "h1", cwd=tmp_path)
    assert r.returncode == 4, r.stdout + r.stderr
    assert "jump host bastion (on the way to h1, which was not tried): ssh to 127.0.0.1:1 failed" in r.stdout, \
        r.stdout
    assert recap(r.stdout)["h1"]["unreachable"] == 1


@pytest.mark.reliability(item=32, fault="a ProxyCommand that cannot reach the bastion",
                         checks=("one clear line", "exit code"))
def test_failing_proxycommand_says_what_the_command_said(net, tmp_path):
    bastion, behind, key = net
    known = _known(tmp_path, bastion, key)
    ssh = f"ssh -F /dev/null -o BatchMode=yes -p 1 -W %h:%p root@127.0.0.1"
    _inventory(tmp_path, known, ansible_ssh_common_args=f"-o ProxyCommand=\"{ssh}\" -F none",
               ssh_connect_timeout=5)
    r = invoke("plan", "--roles", "sysctl", "--host", "h1", cwd=tmp_path)
    assert r.returncode == 4, r.stdout + r.stderr
    line = next(ln for ln in r.stdout.splitlines() if "ProxyCommand" in ln)
    assert "ProxyCommand for gpu-behind-1:22 failed" in line and "port 1" in line, r.stdout


def test_deepops_inventory_folder_provisions_through_its_bastion(net, tmp_path):
    """Issue 32's 'done when': NVIDIA DeepOps' own inventory folder (tests/fixtures/inventories/deepops: INI,
    [all:vars] with the bastion's ProxyCommand, group_vars/ and host_vars/ beside it) runs `invoke provision`.
    What an operator fills in is filled in, nothing else: gpu01's address, and in [all:vars] the user, the key and
    the bastion the ProxyCommand names.  The known_hosts file comes from the command line."""
    import shutil

    bastion, behind, key = net
    known = _known(tmp_path, bastion, key)
    folder = tmp_path / "deepops"
    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures" / "inventories" / "deepops", folder)
    inv = folder / "inventory"
    text = inv.read_text()
    proxy = (f"ssh -W %h:%p -q -F /dev/null -o BatchMode=yes -o StrictHostKeyChecking=yes "
             f"-o UserKnownHostsFile={known} -i {bastion.key_file} -p {bastion.port} root@127.0.0.1")
    for old, new in (("gpu01      ansible_host=10.0.2.1", f"gpu01      ansible_host={NAMES[0]}"),
                     ("ansible_user=ubuntu", "ansible_user=root"),
                     ("ansible_ssh_private_key_file='~/.ssh/id_rsa'", f"ansible_ssh_private_key_file='{bastion.key_file}'"),
                     ("ssh -W %h:%p -q ubuntu@10.0.0.1", proxy)):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    inv.write_text(text)
    sets = ["--set", f"ssh_known_hosts={known}", "--set", "gpu_profile=cpu", "--set", "sysctl_profile=none",
            "--set", "sysctl={net.ipv4.tcp_fastopen: 1}"]
    r = invoke("provision", "--inventory", str(inv), "--roles", "sysctl", "--host", "gpu01", *sets, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert recap(r.stdout)["gpu01"]["failed"] == 0
    assert behind.exec(["cat", "/proc/sys/net/ipv4/tcp_fastopen"]).stdout.strip() == "1"
    # host_vars/gpu01 and group_vars reached the host's variables, as ansible-inventory gives them.
    import json

    r = invoke("hosts", "--inventory", str(inv), "--host", "gpu01", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    shown = json.loads(r.stdout)
    assert shown["slurm_cluster_install_cuda"] == {"value": False, "source": f"{folder}/host_vars/gpu01:6 (host gpu01)"}, shown
    assert shown["ansible_become"]["source"].startswith(f"{folder}/group_vars/k8s_cluster.yml")
