"""The sandbox harness itself: systemd hosts that real SSH clients trust strictly."""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import harness
from harness import docker as harness_docker

pytestmark = pytest.mark.integration


def ssh(host: harness.SandboxHost, *cmd: str, user: str = "root",
        known_hosts: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``cmd`` on ``host`` with the system ssh client, strict host key checking."""
    argv = host.ssh_argv(user)
    if known_hosts is not None:
        argv = [a if not a.startswith("UserKnownHostsFile=") else f"UserKnownHostsFile={known_hosts}"
                for a in argv]
    return subprocess.run([*argv, *cmd], capture_output=True, text=True, timeout=60)


def docker(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=60)


def test_pid1_is_systemd(sandbox_host):
    assert sandbox_host.exec(["cat", "/proc/1/comm"]).stdout.strip() == "systemd"
    assert sandbox_host.exec("hostname").stdout.strip() == sandbox_host.name


def test_systemd_running_not_degraded(sandbox_host):
    # A degraded sandbox would hide a role's own failed units.
    state = sandbox_host.exec(["systemctl", "is-system-running"], check=False).stdout.strip()
    failed = sandbox_host.exec(["systemctl", "--failed", "--plain", "--no-legend"]).stdout
    assert state == "running", f"state {state}, failed units:\n{failed}"


def test_ssh_with_strict_host_key_checking(sandbox_host):
    line = sandbox_host.known_hosts.read_text()
    assert line.startswith(f"[127.0.0.1]:{sandbox_host.port} ssh-ed25519 AAAA")
    cp = ssh(sandbox_host, "true")
    assert cp.returncode == 0, cp.stderr
    cp = ssh(sandbox_host, "id", "-un")
    assert cp.stdout.strip() == "root"


def test_ssh_refuses_a_different_host_key(sandbox_host, tmp_path):
    other = Ed25519PrivateKey.generate().public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"[127.0.0.1]:{sandbox_host.port} {other}\n")
    cp = ssh(sandbox_host, "true", known_hosts=wrong)
    assert cp.returncode == 255
    assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in cp.stderr or \
        "Host key verification failed" in cp.stderr, cp.stderr


def test_host_keys_are_per_container(sandbox_host, sandbox_host_factory):
    # A key baked into the image would be shared by every sandbox host.
    other = sandbox_host_factory("keys-other")
    try:
        assert other.known_hosts.read_text().split()[2] != \
            sandbox_host.known_hosts.read_text().split()[2]
        assert other.exec("cat /etc/machine-id").stdout != sandbox_host.exec(
            "cat /etc/machine-id").stdout
    finally:
        other.remove()


def test_password_login_is_off(sandbox_host):
    cfg = sandbox_host.exec(["sshd", "-T"]).stdout.lower().splitlines()
    assert "permitrootlogin without-password" in cfg or "permitrootlogin prohibit-password" in cfg
    assert "passwordauthentication no" in cfg


def test_deploy_user_has_passwordless_sudo(sandbox_host):
    cp = ssh(sandbox_host, "sudo", "-n", "true", user="deploy")
    assert cp.returncode == 0, cp.stderr
    assert ssh(sandbox_host, "sudo", "-n", "id", "-u", user="deploy").stdout.strip() == "0"


def test_docker_is_installed_but_not_running(sandbox_host):
    # Later roles enable it; booting every sandbox host with dockerd is slow.
    assert sandbox_host.exec("command -v dockerd", check=False).stdout.strip() == "/usr/sbin/dockerd"
    for unit in ("docker.service", "containerd.service"):
        state = sandbox_host.exec(["systemctl", "is-enabled", unit], check=False).stdout.strip()
        assert state == "disabled", f"{unit}: {state}"


def test_remove_leftovers(sandbox_image, sandbox_host):
    # As an interrupted earlier session leaves them: one running, one never started.
    running = docker("run", "-d", "--label", f"{harness.LABEL}=1", sandbox_image,
                     "sleep", "infinity")
    created = docker("create", "--label", f"{harness.LABEL}=1", sandbox_image, "true")
    assert running.returncode == 0 and created.returncode == 0, running.stderr + created.stderr
    ids = {running.stdout.strip(), created.stdout.strip()}
    # A session this process cannot see (its pid is gone here), started a moment ago: a concurrent run's.
    young = docker("create", "--label", f"{harness.LABEL}=1", "--label", f"{harness.SESSION_LABEL}=999999999-0ff",
                   sandbox_image, "true").stdout.strip()

    removed = harness.remove_leftovers()

    assert ids <= set(removed) and young not in removed
    docker("rm", "-f", young)
    left = docker("ps", "-a", "--no-trunc", "--filter", f"label={harness.LABEL}=1",
                  "--format", "{{.ID}}").stdout.split()
    assert not ids & set(left)
    # This session's own hosts are not leftovers.
    assert ssh(sandbox_host, "true").returncode == 0
    # Images are the cache: kept.
    assert docker("image", "inspect", sandbox_image).returncode == 0


@pytest.mark.parametrize("when", ["at once", "after the first docker exec"])
def test_a_host_that_dies_at_start_is_reported_with_its_own_last_log_lines(sandbox_image, tmp_path, monkeypatch,
                                                                            when):
    # PID 1 a script that says why it stops, as systemd does when the machine is out of inotify instances.
    wait = "sleep 3; " if when != "at once" else ""
    monkeypatch.setattr(harness.host, "LIGHT_COMMAND",
                        ("/bin/sh", "-c", f"{wait}echo early line; echo 'Failed to allocate manager object' >&2; "
                         "echo 'Freezing execution.'; exit 3"))
    with pytest.raises(harness.SandboxError) as e:
        harness.start_host("dies-at-start", workdir=tmp_path, image=sandbox_image, light=True, restart="no",
                           timeout=60)
    line = str(e.value)
    assert "\n" not in line and "cannot exec" not in line and "not running" not in line, line
    assert line.startswith("dies-at-start: container ") and "stopped while booting (exited, exit 3)" in line, line
    assert "Failed to allocate manager object" in line and "Freezing execution." in line, line
    # Removed, as every host that did not start.
    assert docker("ps", "-aq", "--filter", "name=bringup-sandbox-dies-at-start-").stdout.strip() == ""


def test_second_build_reuses_the_cache(sandbox_image, monkeypatch):
    before = docker("image", "inspect", "--format", "{{.Id}}", sandbox_image).stdout.strip()
    ran: list[list[str]] = []
    real_popen = subprocess.Popen

    def spy(argv, *a, **kw):
        ran.append(list(argv))
        return real_popen(argv, *a, **kw)

    monkeypatch.setattr(subprocess, "Popen", spy)
    t0 = time.monotonic()
    tag = harness.build_image()
    elapsed = time.monotonic() - t0

    assert tag == sandbox_image
    assert not [a for a in ran if a and a[0] in ("debootstrap", "tar")]
    assert docker("image", "inspect", "--format", "{{.Id}}", tag).stdout.strip() == before
    assert elapsed < 5, f"cached build took {elapsed:.1f}s"


def test_restart_brings_ssh_back(sandbox_host_factory):
    host = sandbox_host_factory("restart")
    key_before = host.known_hosts.read_text().split()[1:]
    started = docker("inspect", "--format", "{{.State.StartedAt}}", host.container).stdout
    host.exec("touch /root/survives-restart")

    host.restart()

    assert docker("inspect", "--format", "{{.State.StartedAt}}", host.container).stdout != started
    assert host.exec(["cat", "/proc/1/comm"]).stdout.strip() == "systemd"
    host.exec("test -e /root/survives-restart")
    assert host.known_hosts.read_text().startswith(f"[127.0.0.1]:{host.port} ")
    # Same container, same host key: clients that trusted it still do.
    assert host.known_hosts.read_text().split()[1:] == key_before
    cp = ssh(host, "true")
    assert cp.returncode == 0, cp.stderr


def test_inventory(sandbox_host, sandbox_dir):
    path = harness.write_inventory(sandbox_dir / "inventory.yml", [sandbox_host],
                                   extra_vars={"role": "test"})
    data = yaml.safe_load(path.read_text())
    group = data["all"]["children"]["sandbox"]
    assert group["vars"] == {"gpu_profile": "cpu", "role": "test"}
    hv = group["hosts"][sandbox_host.name]
    assert hv == {
        "ansible_host": "127.0.0.1",
        "ansible_port": sandbox_host.port,
        "ansible_user": "root",
        "ansible_ssh_private_key_file": str(sandbox_host.key_file),
        "ssh_known_hosts": str(sandbox_host.known_hosts),
    }
    assert Path(hv["ansible_ssh_private_key_file"]).stat().st_mode & 0o777 == 0o600


def test_ensure_docker_without_dockerd_says_what_to_install(monkeypatch):
    monkeypatch.setattr(harness_docker, "_docker_ok", lambda: False)
    monkeypatch.setattr(harness_docker, "_dockerd_pid", lambda: None)
    monkeypatch.setattr(harness_docker.shutil, "which", lambda name: "/usr/bin/docker" if name == "docker" else None)
    monkeypatch.setattr(harness_docker.os.path, "exists", lambda p: False)
    with pytest.raises(harness.SandboxError, match=r"^docker is not installed: apt-get install docker.io$"):
        harness.ensure_docker()


def test_ensure_docker_starts_dockerd_and_waits(monkeypatch, tmp_path):
    # A stand-in dockerd: the real one is shared by the whole machine.
    fake = tmp_path / "dockerd"
    fake.write_text("#!/bin/sh\necho fake dockerd up\nexec sleep 30\n")
    fake.chmod(0o755)
    answers = iter([False, False, False, True])
    monkeypatch.setattr(harness_docker, "_docker_ok", lambda: next(answers))
    monkeypatch.setattr(harness_docker, "_dockerd_pid", lambda: None)
    monkeypatch.setattr(harness_docker.shutil, "which", lambda name: str(fake) if name == "dockerd" else "/usr/bin/docker")
    monkeypatch.setenv("BRINGUP_SANDBOX_DIR", str(tmp_path / "state"))
    started: list[subprocess.Popen] = []
    real_popen = subprocess.Popen

    def spy(argv, *a, **kw):
        started.append(real_popen(argv, *a, **kw))
        return started[-1]

    monkeypatch.setattr(subprocess, "Popen", spy)
    try:
        harness.ensure_docker(timeout=10)
        assert [p.args for p in started] == [[str(fake)]]
        time.sleep(0.2)
        assert "fake dockerd up" in (tmp_path / "state" / "dockerd.log").read_text()
    finally:
        for p in started:
            p.kill()
            p.wait()


def test_ensure_docker_reports_a_dockerd_that_dies(monkeypatch, tmp_path):
    fake = tmp_path / "dockerd"
    fake.write_text("#!/bin/sh\necho 'failed to start daemon: boom' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(harness_docker, "_docker_ok", lambda: False)
    monkeypatch.setattr(harness_docker, "_dockerd_pid", lambda: None)
    monkeypatch.setattr(harness_docker.shutil, "which", lambda name: str(fake) if name == "dockerd" else "/usr/bin/docker")
    monkeypatch.setenv("BRINGUP_SANDBOX_DIR", str(tmp_path / "state"))
    with pytest.raises(harness.SandboxError, match=r"dockerd exited with 1: failed to start daemon: boom"):
        harness.ensure_docker(timeout=10)
