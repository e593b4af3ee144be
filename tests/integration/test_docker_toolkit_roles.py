"""docker and container_toolkit roles on a real sandbox host: Debian's docker.io for real, the
NVIDIA Container Toolkit from the signed `file:` mirror of TEST DOUBLES (nvidia-ctk edits
daemon.json as the real one does).  Checks go through `docker exec`.
"""
from __future__ import annotations

import json

import pytest

from harness import write_inventory
from roles.container_toolkit import PACKAGES

from .helpers import invoke, recap
from harness.doubles.nvidia_mirror import build_mirror, running_kernel

pytestmark = pytest.mark.integration

H = "docker-tk-01"
STALE = "/etc/apt/sources.list.d/libnvidia-container.list"
COMPOSE_V1 = "#!/bin/sh\necho 'docker-compose version 1.29.2, build unknown (TEST DOUBLE)'\n"


@pytest.fixture(scope="module")
def host(sandbox_host_factory):
    return sandbox_host_factory(H)


@pytest.fixture(scope="module")
def project(host, tmp_path_factory):
    d = tmp_path_factory.mktemp("dtk")
    mirror = build_mirror(d / "build", running_kernel(host))
    mirror.copy_to(host)
    write_inventory(d / "hosts", [host], extra_vars={
        "nvidia_without_gpu": "install",
        "docker_daemon_config": {"log-driver": "json-file", "log-opts": {"max-size": "10m"}},
        **mirror.inventory_vars(),
    })
    # What an operator left behind: a hand-set daemon key, the guide's list without signed-by
    # (apt refuses two sources differing in Signed-By), and docker-compose v1.
    host.exec("mkdir -p /etc/docker && echo '{\"live-restore\": true}' > /etc/docker/daemon.json")
    host.exec(f"echo 'deb file:/srv/mirror/toolkit ./' > {STALE}")
    host.exec("cat > /usr/local/bin/docker-compose && chmod 755 /usr/local/bin/docker-compose", input=COMPOSE_V1)
    return d


def daemon_json(host) -> dict:
    return json.loads(host.exec(["cat", "/etc/docker/daemon.json"]).stdout)


def docker_stops(host) -> int:
    out = host.exec("journalctl -u docker.service -o cat --no-pager | grep -c '^Stopping' || true").stdout
    return int(out.strip() or 0)


def runtimes(host) -> dict:
    return json.loads(host.exec(["docker", "info", "--format", "{{json .Runtimes}}"]).stdout)


def run(project, *args):
    return invoke("provision", "--host", H, "--roles", "docker,container_toolkit", *args, cwd=project, timeout=400)


def test_converges_merging_daemon_json_and_restarting_docker_once(host, project):
    assert host.exec(["systemctl", "is-active", "docker"], check=False).stdout.strip() == "inactive"
    r = run(project, "--verbose")
    assert r.returncode == 0, r.stdout + r.stderr
    assert host.exec(["systemctl", "is-enabled", "docker"]).stdout.strip() == "enabled"
    cfg = daemon_json(host)
    assert cfg["live-restore"] is True and cfg["log-opts"] == {"max-size": "10m"}  # kept and merged
    assert cfg["runtimes"]["nvidia"] == {"args": [], "path": "nvidia-container-runtime"}  # nvidia-ctk's
    assert "nvidia" in runtimes(host)
    # Started once by the docker role (with its merged file), restarted once for the runtime.
    assert docker_stops(host) == 1
    backups = host.exec("ls /etc/docker/ | grep -c '^daemon.json.*.bak$'").stdout.strip()
    assert int(backups) == 2  # one per change of the file
    assert [host.exec(["dpkg-query", "-W", "-f=${Version}", p]).stdout for p in PACKAGES] == ["1.17.6-1"] * 4
    assert sorted(host.exec(["apt-mark", "showhold"]).stdout.split()) == sorted(PACKAGES)
    # The stale list was moved away, not deleted; our list has the keyring fetched from key_url.
    assert host.exec(["test", "-e", STALE], check=False).returncode == 1
    assert host.exec(["test", "-f", "/var/backups/bringup-apt/libnvidia-container.list"], check=False).returncode == 0
    assert "signed-by=/usr/share/keyrings/nvidia-container-toolkit.gpg" in host.exec(
        ["cat", "/etc/apt/sources.list.d/nvidia-container-toolkit.list"]).stdout
    # compose v1 found: used as it is, nothing installed for it.
    assert "check passed: docker compose version || command -v docker-compose" in r.stdout


def test_second_run_is_a_noop_and_restarts_nothing(host, project):
    pid = host.exec(["systemctl", "show", "-p", "MainPID", "--value", "docker"]).stdout
    r = run(project)
    assert r.returncode == 0, r.stdout + r.stderr
    assert recap(r.stdout)[H]["changed"] == 0
    assert docker_stops(host) == 1
    assert host.exec(["systemctl", "show", "-p", "MainPID", "--value", "docker"]).stdout == pid


def test_default_runtime_restarts_once_more(host, project):
    r = run(project, "--set", "container_toolkit_default_runtime=true")
    assert r.returncode == 0, r.stdout + r.stderr
    assert daemon_json(host)["default-runtime"] == "nvidia"
    assert host.exec(["docker", "info", "--format", "{{.DefaultRuntime}}"]).stdout.strip() == "nvidia"
    assert docker_stops(host) == 2
    r = run(project, "--set", "container_toolkit_default_runtime=true")
    assert recap(r.stdout)[H]["changed"] == 0 and docker_stops(host) == 2


def test_rotated_key_is_refused_against_its_pinned_hash(host, project):
    before = host.exec(["sha256sum", "/usr/share/keyrings/nvidia-container-toolkit.gpg"]).stdout
    r = run(project, "--set", "container_toolkit_repo={url: 'file:/srv/mirror/toolkit', suite: ./, "
                              "key_url: 'file:///srv/mirror/toolkit/gpgkey', key_sha256: '" + "0" * 64 + "'}")
    assert r.returncode == 2
    assert "not the pinned 0000" in r.stdout and "update key_sha256" in r.stdout
    assert host.exec(["sha256sum", "/usr/share/keyrings/nvidia-container-toolkit.gpg"]).stdout == before


def test_invalid_daemon_json_is_an_error_and_left_alone(host, project):
    good = host.exec(["cat", "/etc/docker/daemon.json"]).stdout
    host.exec("echo '{\"runtimes\": ' > /etc/docker/daemon.json")
    try:
        r = run(project)
        assert r.returncode == 2
        assert "/etc/docker/daemon.json is not valid JSON" in r.stdout and "never overwritten" in r.stdout
        assert host.exec(["cat", "/etc/docker/daemon.json"]).stdout == '{"runtimes": \n'
    finally:
        host.exec("cat > /etc/docker/daemon.json", input=good)


def test_toolkit_skips_without_gpu_on_cpu_profile(host, project):
    r = run(project, "--set", "nvidia_without_gpu=skip")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "skip:container toolkit  no NVIDIA GPU on this host" in r.stdout


FLAKY_SERVER = r'''
import http.server, os, sys
seen = set()
class H(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        # Every file fails once with 503 (a mirror restarting): clients must retry.
        if self.path not in seen:
            seen.add(self.path)
            self.send_error(503, "flaky TEST DOUBLE mirror")
            return
        super().do_GET()
    def log_message(self, fmt, *args):
        sys.stderr.write((fmt % args) + "\n"); sys.stderr.flush()
os.chdir("/srv/mirror")
http.server.ThreadingHTTPServer(("127.0.0.1", 8089), H).serve_forever()
'''


def test_http_mirror_with_transient_failures_is_retried(host, project):
    host.exec("cat > /root/flaky.py", input=FLAKY_SERVER)
    host.exec("systemd-run --unit flaky-mirror --property StandardError=file:/root/flaky.log python3 /root/flaky.py")
    host.exec("for i in $(seq 50); do curl -s -o /dev/null http://127.0.0.1:8089/ && break; sleep 0.1; done")
    host.exec("rm /usr/share/keyrings/nvidia-container-toolkit.gpg")  # fetched again, through the flaky server
    try:
        r = run(project, "--set", "container_toolkit_repo={url: 'http://127.0.0.1:8089/toolkit', suite: ./, "
                                  "key_url: 'http://127.0.0.1:8089/toolkit/gpgkey'}",
                "--set", "container_toolkit_version=1.16.2-1")
        assert r.returncode == 0, r.stdout + r.stderr
        assert [host.exec(["dpkg-query", "-W", "-f=${Version}", p]).stdout for p in PACKAGES] == ["1.16.2-1"] * 4
        log = host.exec(["cat", "/root/flaky.log"]).stdout
        for path in ("/toolkit/gpgkey", "/toolkit/./InRelease", "/toolkit/./nvidia-container-toolkit_1.16.2-1_all.deb"):
            assert f'"GET {path} HTTP/1.1" 503' in log and f'"GET {path} HTTP/1.1" 200' in log, log
        assert "http://127.0.0.1:8089/toolkit ./" in host.exec(
            ["cat", "/etc/apt/sources.list.d/nvidia-container-toolkit.list"]).stdout
    finally:
        host.exec("systemctl stop flaky-mirror", check=False)


AUTH_SERVER = r'''
import base64, http.server, os, sys
WANT = "Basic " + base64.b64encode(b"bob:Apt-S3cret-77").decode()
class H(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        got = self.headers.get("Authorization")
        sys.stderr.write("AUTH %s %s\n" % (self.path, "right" if got == WANT else got)); sys.stderr.flush()
        if got != WANT:
            self.send_response(401); self.send_header("WWW-Authenticate", 'Basic realm="TEST DOUBLE mirror"')
            self.send_header("Content-Length", "0"); self.end_headers(); return
        super().do_GET()
    def log_message(self, fmt, *args):
        pass
os.chdir("/srv/mirror")
http.server.ThreadingHTTPServer(("127.0.0.1", 8090), H).serve_forever()
'''
AUTH_FILE = "/etc/apt/auth.conf.d/nvidia-container-toolkit.conf"
TK_LIST = "/etc/apt/sources.list.d/nvidia-container-toolkit.list"


def _toolkit_repo(url: str) -> str:
    return f"container_toolkit_repo={{url: '{url}', suite: ./, key_url: 'file:///srv/mirror/toolkit/gpgkey'}}"


@pytest.mark.reliability(item=2, fault="apt repository url with user:password (a private mirror)",
                         checks=("secret never shown", "files root-only", "others' files kept"))
def test_repository_credentials_go_to_a_root_only_auth_file(host, project):
    host.exec("cat > /root/auth.py", input=AUTH_SERVER)
    host.exec("systemd-run --unit auth-mirror --property StandardError=file:/root/auth.log python3 /root/auth.py")
    host.exec("for i in $(seq 50); do curl -s -o /dev/null http://127.0.0.1:8090/ && break; sleep 0.1; done")
    try:
        r = run(project, "--set", _toolkit_repo("http://bob:Apt-S3cret-77@127.0.0.1:8090/toolkit"), "--diff")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "Apt-S3cret-77" not in r.stdout + r.stderr
        assert "AUTH /toolkit/./InRelease right" in host.exec(["cat", "/root/auth.log"]).stdout  # apt sent them
        # The world-readable list names the mirror without them; the auth file is root's alone.
        assert host.exec(["stat", "-c", "%a %U", TK_LIST]).stdout.split() == ["644", "root"]
        assert "Apt-S3cret-77" not in host.exec(["cat", TK_LIST]).stdout
        assert "deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit.gpg] http://127.0.0.1:8090/toolkit ./" \
            in host.exec(["cat", TK_LIST]).stdout
        assert host.exec(["stat", "-c", "%a %U %G", AUTH_FILE]).stdout.split() == ["600", "root", "root"]
        assert "machine http://127.0.0.1:8090/toolkit login bob password Apt-S3cret-77" in host.exec(
            ["cat", AUTH_FILE]).stdout
        assert not host.exec("ls -A /etc/apt/auth.conf.d | grep -v '^nvidia-container-toolkit.conf$' || true").stdout
        # Back to the credential-free mirror: bringup's auth file goes, an operator's is never touched.
        r = run(project)
        assert r.returncode == 0, r.stdout + r.stderr
        assert host.exec(["test", "-e", AUTH_FILE], check=False).returncode == 1
        host.exec(f"printf 'machine example.invalid login me password mine\\n' > {AUTH_FILE}")
        r = run(project, "--set", _toolkit_repo("http://bob:Apt-S3cret-77@127.0.0.1:8090/toolkit"))
        assert r.returncode == 2
        assert f"{AUTH_FILE} exists and was not written by bringup" in r.stdout
        assert host.exec(["cat", AUTH_FILE]).stdout == "machine example.invalid login me password mine\n"
        assert run(project).returncode == 0  # the operator's file stays when the url has no credentials
        assert host.exec(["cat", AUTH_FILE]).stdout == "machine example.invalid login me password mine\n"
    finally:
        host.exec(f"rm -f {AUTH_FILE}; systemctl stop auth-mirror", check=False)


def test_audit_passes_then_names_drift(host, project):
    r = run(project)  # back to the inventory's toolkit (the test above moved it)
    assert r.returncode == 0, r.stdout + r.stderr
    audit = ["audit", "--host", H, "--roles", "docker,container_toolkit"]
    r = invoke(*audit, cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    host.exec("apt-mark unhold libnvidia-container1 >/dev/null && systemctl disable --quiet docker")
    try:
        r = invoke(*audit, cwd=project)
        assert r.returncode != 0
        assert f"{H}: hold:" in r.stdout and "libnvidia-container1" in r.stdout, r.stdout
        assert f"{H}: service:docker: enabled is disabled, want enabled" in r.stdout, r.stdout
    finally:
        assert run(project).returncode == 0
