"""Secrets and repository keys on a real sandbox host (issue 12, items 2 and 3).

Through the tool (``invoke provision`` in a subprocess), checked through ``docker exec``:
registry credentials from the environment and a 0600 file land in root's Docker config
(0600 root, other entries kept) and are what the host's ``docker pull`` sends; the secret
appears in no output, diff or report; a become password read from a file answers sudo;
a repository ``key:`` that is not an OpenPGP public key is refused before anything is sent.
"""
from __future__ import annotations

import base64
import json

import pytest

from harness import write_inventory

from .helpers import invoke, recap
from .test_connection import _sudo_user

pytestmark = pytest.mark.integration

NGC = "nvapi-IntegrationT0ken-5f3a9c"
LOCAL = "Loc4l-registry-pw-e2"
CONFIG = "/root/.docker/config.json"
OTHER = {"auths": {"other.example": {"auth": base64.b64encode(b"o:other-pw").decode()}}, "detachKeys": "ctrl-x"}

#: A registry that asks for Basic auth and logs what the client sent (a TEST DOUBLE: it serves no image).
FAKE_REGISTRY = r'''
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        sys.stderr.write("AUTH %s %s\n" % (self.path, self.headers.get("Authorization"))); sys.stderr.flush()
        if not self.headers.get("Authorization"):
            self.send_response(401); self.send_header("WWW-Authenticate", 'Basic realm="double"')
            self.send_header("Content-Length", "0"); self.end_headers(); return
        self.send_response(404); self.send_header("Content-Length", "0"); self.end_headers()
    do_HEAD = do_GET
http.server.ThreadingHTTPServer(("127.0.0.1", 5000), H).serve_forever()
'''


def b64(user: str, pw: str) -> str:
    return base64.b64encode(f"{user}:{pw}".encode()).decode()


@pytest.fixture(scope="module")
def project(sandbox_host, tmp_path_factory):
    d = tmp_path_factory.mktemp("secrets")
    key = d / "local.key"
    key.write_text(LOCAL + "\n")
    key.chmod(0o600)
    write_inventory(d / "hosts", [sandbox_host], extra_vars={
        "docker_compose": "none",
        "registry_auths": {"nvcr.io": {"username": "$oauthtoken", "password": {"env": "NGC_API_KEY"}},
                           "127.0.0.1:5000": {"username": "bob", "password": {"file": str(key)}}},
    })
    return d


def outputs(r, project) -> str:
    reports = "".join(p.read_text() for p in (project / "reports").glob("*.json"))
    return r.stdout + r.stderr + reports


@pytest.mark.reliability(item=2, fault='registry credentials from env: --check --diff, apply, report, docker pull',
                         checks=('secret never shown', 'files root-only', "others' files kept", 'next run converges'))
def test_registry_auths_land_root_only_and_never_show(sandbox_host, project, monkeypatch):
    h = sandbox_host
    monkeypatch.setenv("NGC_API_KEY", NGC)
    h.exec(f"mkdir -p /root/.docker && cat > {CONFIG} && chmod 0644 {CONFIG}", input=json.dumps(OTHER))
    run = ("provision", "--host", h.name, "--roles", "docker")

    r = invoke(*run, "--check", "--diff", cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"json:{CONFIG}" in r.stdout and '"nvcr.io": {' in r.stdout and '"auth": "********"' in r.stdout
    assert json.loads(h.exec(["cat", CONFIG]).stdout) == OTHER  # check mode wrote nothing

    r = invoke(*run, "--diff", cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    assert h.exec(["stat", "-c", "%a %U:%G", CONFIG]).stdout.strip() == "600 root:root"
    cfg = json.loads(h.exec(["cat", CONFIG]).stdout)
    assert cfg["auths"]["nvcr.io"] == {"auth": b64("$oauthtoken", NGC)}
    assert cfg["auths"]["127.0.0.1:5000"] == {"auth": b64("bob", LOCAL)}
    assert cfg["auths"]["other.example"] == OTHER["auths"]["other.example"] and cfg["detachKeys"] == "ctrl-x"

    seen = outputs(r, project)
    for secret in (NGC, LOCAL, b64("$oauthtoken", NGC), b64("bob", LOCAL), OTHER["auths"]["other.example"]["auth"]):
        assert secret not in seen, secret

    r = invoke(*run, cwd=project)
    assert r.returncode == 0 and recap(r.stdout)[h.name]["changed"] == 0, r.stdout + r.stderr

    # The host's own docker pull sends those credentials (read from root's config by the docker CLI).
    h.exec("cat > /root/registry.py", input=FAKE_REGISTRY)
    h.exec("systemd-run --unit fake-registry --property StandardError=file:/root/registry.log python3 /root/registry.py")
    try:
        h.exec("for i in $(seq 50); do curl -s -o /dev/null http://127.0.0.1:5000/ && break; sleep 0.1; done")
        h.exec("docker pull 127.0.0.1:5000/tritonserver:24.06-py3", check=False)
        log = h.exec(["cat", "/root/registry.log"]).stdout
        assert f"Basic {b64('bob', LOCAL)}" in log, log
    finally:
        h.exec("systemctl stop fake-registry", check=False)


@pytest.mark.reliability(item=2, fault='a secret from an unset environment variable',
                         checks=('one clear line', 'exit code', 'nothing touched', 'secret never shown'))
def test_unset_env_fails_before_connecting_with_one_line(sandbox_host, project, monkeypatch):
    monkeypatch.delenv("NGC_API_KEY", raising=False)
    before = sandbox_host.exec(["sha256sum", CONFIG], check=False).stdout
    r = invoke("provision", "--host", sandbox_host.name, "--roles", "docker", cwd=project)
    assert r.returncode == 1, r.stdout + r.stderr
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "registry_auths.nvcr.io.password: secret reference {env: 'NGC_API_KEY'}: environment variable NGC_API_KEY is not set" \
        in lines[0], r.stderr
    assert "PLAY RECAP" not in r.stdout and LOCAL not in r.stdout + r.stderr
    assert sandbox_host.exec(["sha256sum", CONFIG], check=False).stdout == before


@pytest.mark.reliability(item=2, fault='become password from a 0600 file, a wrong one from env, a 0644 file', variants=3,
                         checks=('secret never shown', 'exit code'))
def test_become_password_from_a_file_and_a_wrong_one_from_env(sandbox_host, tmp_path, monkeypatch):
    _sudo_user(sandbox_host, "pwfile", "File-pw-31", nopasswd=False)
    pw = tmp_path / "sudo.pw"
    pw.write_text("File-pw-31\n")
    pw.chmod(0o600)
    hv = dict(sandbox_host.inventory_vars(), ansible_user="pwfile", ansible_become=True)
    inv = {"all": {"vars": {"gpu_profile": "cpu", "sysctl_profile": "none"}, "hosts": {"h": hv}}}

    def provision(become_password, fastopen):
        inv["all"]["hosts"]["h"]["ansible_become_password"] = become_password
        (tmp_path / "hosts").write_text(json.dumps(inv))
        return invoke("provision", "--roles", "sysctl", "--host", "h", "--set",
                      f"sysctl={{net.ipv4.tcp_fastopen: {fastopen}}}", cwd=tmp_path)

    r = provision({"file": str(pw)}, 3)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sandbox_host.exec(["cat", "/proc/sys/net/ipv4/tcp_fastopen"]).stdout.strip() == "3"

    monkeypatch.setenv("SUDO_PW", "Wrong-pw-from-env-64")
    r = provision({"env": "SUDO_PW"}, 1)
    assert r.returncode == 2 and "refused ansible_become_password" in r.stdout, r.stdout + r.stderr
    assert "Wrong-pw-from-env-64" not in outputs(r, tmp_path)

    pw.chmod(0o644)
    r = provision({"file": str(pw)}, 1)
    assert r.returncode == 1 and f"chmod 600 {pw}" in r.stderr and "File-pw-31" not in r.stdout + r.stderr


@pytest.mark.reliability(item=3, fault='repository key that is not OpenPGP (a passwd file), real host',
                         checks=('one clear line', 'exit code', 'nothing sent'))
def test_a_key_that_is_not_openpgp_is_refused_before_anything_is_sent(sandbox_host, tmp_path):
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n")
    write_inventory(tmp_path / "hosts", [sandbox_host], extra_vars={
        "nvidia_without_gpu": "install",
        "container_toolkit_repo": {"url": "file:/srv/nothing", "suite": "./", "key": str(passwd)}})
    keyrings = sandbox_host.exec("ls -la --time-style=full-iso /usr/share/keyrings").stdout
    r = invoke("provision", "--host", sandbox_host.name, "--roles", "container_toolkit", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.strip() == (f"error: host {sandbox_host.name}, role container_toolkit: container_toolkit_repo: "
                                f"key file {passwd} is not an OpenPGP public key: it is text (its content is not "
                                "shown); give the repository's public key (armored or binary, e.g. its gpgkey file)")
    assert "root:x" not in r.stdout + r.stderr
    assert sandbox_host.exec("ls -la --time-style=full-iso /usr/share/keyrings").stdout == keyrings
    assert sandbox_host.exec("test -e /etc/apt/sources.list.d/nvidia-container-toolkit.list",
                             check=False).returncode == 1
