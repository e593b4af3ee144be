"""testinfra over bringup's hosts, on real sandbox hosts (issue 22): a site's tests beside `invoke audit`
(one recap, one JUnit file, one JSON summary), the bringup:// backend's host keys, become and local
connection, an unreachable host, the roles' audit exported as testinfra modules, and an installed copy."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from harness import SANDBOX_VARS, write_inventory
from tests.processes import holding

from .helpers import REPO, free_port, install_copy, invoke
from .test_connection import _sudo_user

pytestmark = pytest.mark.integration

CONF = "/etc/sysctl.d/90-trt-latency.conf"
#: A site's policy file: one test that holds on a provisioned host, one that does not.
SITE = """\
def test_persisted_sysctl_file(host, bringup_vars):
    f = host.file("/etc/sysctl.d/90-trt-latency.conf")
    assert f.is_file and f.user == "root" and f.mode == 0o644
    assert bringup_vars["gpu_profile"] == "cpu"          # the inventory's group variable
    assert bringup_vars["cpu_dma_latency_us"] == 10      # a role's default
    assert host.file("/proc/sys/net/ipv4/tcp_slow_start_after_idle").content_string.strip() == "0"


def test_somaxconn_is_one(host):
    assert host.file("/proc/sys/net/core/somaxconn").content_string.strip() == "1"
"""


@pytest.fixture(scope="module")
def project(sandbox_host, tmp_path_factory):
    d = tmp_path_factory.mktemp("ti")
    write_inventory(d / "hosts", [sandbox_host], extra_vars=SANDBOX_VARS)
    r = invoke("provision", "--host", sandbox_host.name, "--roles", "sysctl,cpu_tuning", cwd=d)
    assert r.returncode == 0, r.stdout + r.stderr
    (d / "test_policy.py").write_text(SITE)
    return d


def pytest_run(cwd: Path, *args: str, python: str = sys.executable, plugin: bool = True,
               timeout: float = 300) -> subprocess.CompletedProcess:
    """Plain pytest with testinfra and bringup's plugin (loaded with -p from this checkout; else its entry
    point); no cache folder, no .benchmarks folder of this machine's pytest-benchmark, and no __pycache__ of the
    rewritten test modules beside them (whether the environment has PYTHONDONTWRITEBYTECODE or not)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)} if plugin else dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    argv = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:benchmark",
            *(["-p", "bringup.testinfra.plugin"] if plugin else []), *args]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def latest(d: Path, ext: str) -> Path:
    return sorted((d / "reports").glob(f"*-audit.{ext}"))[-1]


def somaxconn(host) -> str:
    return host.exec("cat /proc/sys/net/core/somaxconn").stdout.strip()


def test_site_tests_beside_the_audit_one_recap_one_line_per_failure_junit_and_json_hold_both(sandbox_host, project):
    h = sandbox_host.name
    r = invoke("audit", "--host", h, "--roles", "sysctl", "--testinfra", "test_policy.py", cwd=project)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert all(l.startswith(h) for l in lines) and "Traceback" not in r.stdout + r.stderr, r.stdout
    line = f"{h}: test_somaxconn_is_one: assert '{somaxconn(sandbox_host)}' == '1'"
    failed = [l for l in lines if not l.startswith(f"{h} : ")]
    assert len(failed) == 1 and failed[0].startswith(line), r.stdout
    summary = json.loads(latest(project, "json").read_text())
    assert summary["exit"] == 2 and summary["failed"] == 1 and summary["unreachable"] == 0
    assert summary["testinfra"]["hosts"] == {h: {"passed": 1, "failed": 1, "skipped": 0, "unreachable": 0}}
    builtin = [i for i in summary["results"] if i["role"] == "sysctl"]
    assert builtin and all(i["outcome"] in ("passed", "skipped") for i in builtin)
    assert lines[-1] == f"{h} : passed={summary['passed']} failed=1 skipped={summary['skipped']} unreachable=0"
    assert summary["passed"] == 1 + sum(i["outcome"] == "passed" for i in builtin)
    cases = {c.get("name"): c for c in ET.parse(latest(project, "xml")).getroot().iter("testcase")
             if c.get("classname") == f"{h}.testinfra"}
    assert sorted(cases) == ["test_policy.py::test_persisted_sysctl_file", "test_policy.py::test_somaxconn_is_one"]
    assert cases["test_policy.py::test_persisted_sysctl_file"].find("failure") is None
    assert cases["test_policy.py::test_somaxconn_is_one"].find("failure").get("message") == failed[0]
    assert any(c.get("classname") == f"{h}.sysctl" for c in ET.parse(latest(project, "xml")).getroot().iter("testcase"))

    # The passing test alone: exit 0, and the recap counts it.
    (project / "test_policy_ok.py").write_text(SITE.split("\n\n\ndef test_somaxconn")[0] + "\n")
    r = invoke("audit", "--host", h, "--roles", "sysctl", "--testinfra", "test_policy_ok.py", cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(latest(project, "json").read_text())["testinfra"]["hosts"][h]["passed"] == 1


def _keys_inventory(tmp_path: Path, sandbox_host, known: Path) -> Path:
    inv = tmp_path / "hosts"
    inv.write_text(yaml.safe_dump({"all": {"hosts": {"h": dict(sandbox_host.inventory_vars(),
                                                                ssh_known_hosts=str(known))}}}))
    (tmp_path / "test_k.py").write_text("def test_k(host):\n    assert host.file('/etc').is_directory\n")
    return inv


def _one_failure(out: str) -> list[str]:
    """The lines pytest printed for its one failure (-q, no summary)."""
    return [l for l in out.split("FAILURES ===")[1].splitlines()[1:] if l.strip() and not l.startswith("___")][:-1]


def test_unknown_and_changed_host_keys_are_refused_through_the_backend(sandbox_host, tmp_path):
    known = tmp_path / "known_hosts"
    inv = _keys_inventory(tmp_path, sandbox_host, known)
    r = pytest_run(tmp_path, "--hosts=bringup://h", f"--bringup-inventory={inv}", "-rN",
                   f"--bringup-report={tmp_path / 'r.json'}", "test_k.py")
    assert r.returncode == 1, r.stdout + r.stderr
    assert _one_failure(r.stdout) == [
        f"h: unreachable: unknown host key for 127.0.0.1:{sandbox_host.port}: not in {known}; verify it and add "
        "it, or pass --accept-new-host-keys"], r.stdout
    assert not known.exists()
    assert json.loads((tmp_path / "r.json").read_text())["tests"][0]["unreachable"] is True

    other = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")],
                           capture_output=True)
    assert other.returncode == 0
    fake = (tmp_path / "k.pub").read_text().split()
    known.write_text(f"[127.0.0.1]:{sandbox_host.port} {fake[0]} {fake[1]}\n")
    r = pytest_run(tmp_path, "--hosts=bringup://h", f"--bringup-inventory={inv}", "-rN", "test_k.py")
    assert r.returncode == 1, r.stdout + r.stderr
    (line,) = _one_failure(r.stdout)
    assert line.startswith(f"h: unreachable: host key for 127.0.0.1:{sandbox_host.port} CHANGED"), r.stdout
    assert known.read_text() == f"[127.0.0.1]:{sandbox_host.port} {fake[0]} {fake[1]}\n"


BECOME = """\
def test_root_through_sudo(host):
    assert host.check_output("id -u") == "0"
    assert host.file("/etc/shadow").content_string.startswith("root:")
"""


def _as(tmp_path: Path, sandbox_host, user: str, password: str | None, become: bool = True) -> Path:
    hv = dict(sandbox_host.inventory_vars(), ansible_user=user, ansible_become=become)
    if password is not None:
        hv["ansible_become_password"] = password
    inv = tmp_path / "hosts"
    inv.write_text(yaml.safe_dump({"all": {"vars": {"gpu_profile": "cpu"}, "hosts": {"h": hv}}}))
    return inv


@pytest.mark.reliability(item=1, fault="become password with NOPASSWD sudo, through the testinfra backend",
                         checks=("nothing executed",))
def test_become_with_a_password_answers_only_sudos_prompt(sandbox_host, tmp_path):
    (tmp_path / "test_become.py").write_text(BECOME)
    _sudo_user(sandbox_host, "pwuser", "Right-pw-42", nopasswd=False)
    inv = _as(tmp_path, sandbox_host, "pwuser", "Right-pw-42")
    r = pytest_run(tmp_path, "--hosts=bringup://h", f"--bringup-inventory={inv}", "test_become.py")
    assert r.returncode == 0, r.stdout + r.stderr

    # NOPASSWD: sudo asks nothing, so the password (here a shell command) is never sent.
    _sudo_user(sandbox_host, "nopw", "unused-pw", nopasswd=True)
    sandbox_host.exec("rm -f /tmp/pwned-by-password")
    inv = _as(tmp_path, sandbox_host, "nopw", "touch /tmp/pwned-by-password; true")
    r = pytest_run(tmp_path, "--hosts=bringup://h", f"--bringup-inventory={inv}", "test_become.py")
    assert r.returncode == 0, r.stdout + r.stderr
    assert sandbox_host.exec("test -e /tmp/pwned-by-password", check=False).returncode == 1

    # A wrong password: sudo's own words in one line, never the password.
    inv = _as(tmp_path, sandbox_host, "pwuser", "Wrong-pw-13")
    r = pytest_run(tmp_path, "--hosts=bringup://h", f"--bringup-inventory={inv}", "-rN", "test_become.py")
    assert r.returncode == 1, r.stdout + r.stderr
    (line,) = _one_failure(r.stdout)
    assert line.startswith("h: h: sudo -u root refused ansible_become_password (sudo says:") and "try again" in line
    assert "Wrong-pw-13" not in r.stdout + r.stderr

    # testinfra's own `with host.sudo()` becomes root through the same handshake, on a login without become.
    (tmp_path / "test_sudo.py").write_text(
        "def test_sudo(host):\n"
        "    assert host.check_output('id -un') == 'pwuser'\n"
        "    with host.sudo():\n"
        "        assert host.check_output('id -u') == '0'\n"
        "    assert host.check_output('id -un') == 'pwuser'\n")
    inv = _as(tmp_path, sandbox_host, "pwuser", "Right-pw-42", become=False)
    r = pytest_run(tmp_path, "--hosts=bringup://h", f"--bringup-inventory={inv}", "test_sudo.py")
    assert r.returncode == 0, r.stdout + r.stderr


def test_local_connection(tmp_path):
    (tmp_path / "hosts").write_text("all:\n  hosts:\n    me: {ansible_connection: local, command_timeout: 2}\n")
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    (tmp_path / "test_local.py").write_text(
        "import pytest\n"
        "from bringup.errors import Unreachable\n\n"
        "def test_here(host):\n"
        f"    assert host.check_output('cat /proc/sys/kernel/random/boot_id') == {boot!r}\n"
        "    assert type(host.backend.transport()).__name__ == 'LocalTransport'\n\n"
        "def test_command_timeout(host):\n"
        "    with pytest.raises(Unreachable, match=r'me stopped answering: no result within 2 s'):\n"
        "        host.run('sleep 20')\n")
    r = pytest_run(tmp_path, "--hosts=bringup://me", "test_local.py")  # ./hosts, the default inventory
    assert r.returncode == 0 and "2 passed" in r.stdout, r.stdout + r.stderr


@pytest.mark.reliability(item=18, fault="invoke audit --testinfra of an unreachable host",
                         checks=("one clear line", "exit code", "recap and report"))
def test_an_unreachable_host_is_one_line_and_exit_4(tmp_path):
    port = free_port()
    (tmp_path / "hosts").write_text("all:\n  hosts:\n    gone: {ansible_host: 127.0.0.1, ansible_port: %d, "
                                    "ssh_connect_timeout: 3}\n" % port)
    (tmp_path / "test_policy.py").write_text(SITE)
    r = invoke("audit", "--host", "gone", "--testinfra", "test_policy.py", cwd=tmp_path)
    assert r.returncode == 4, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith(f"gone: unreachable: ssh to 127.0.0.1:{port} failed"), r.stdout
    assert lines[1] == "gone : passed=0 failed=0 skipped=0 unreachable=1"
    assert "Traceback" not in r.stdout + r.stderr
    summary = json.loads(latest(tmp_path, "json").read_text())
    assert summary["exit"] == 4 and summary["testinfra"]["not_run"] == {"gone": "the host's audit ended unreachable"}


def test_exported_modules_pass_on_a_provisioned_host_and_fail_naming_the_key_on_a_drifted_one(sandbox_host,
                                                                                              project):
    h = sandbox_host.name
    r = invoke("audit", "--host", h, "--roles", "sysctl,cpu_tuning", "--export-testinfra", "exported", cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    where = project / "exported" / h.replace("-", "_")
    assert sorted(p.name for p in where.iterdir()) == ["__init__.py", "test_cpu_tuning.py", "test_sysctl.py"]
    assert r.stdout.splitlines()[0].startswith(f"{h}: wrote exported/{where.name}/test_")
    text = (where / "test_sysctl.py").read_text()
    assert "'key': 'net.ipv4.tcp_slow_start_after_idle', 'value': '0'" in text and "'sha256': '" in text
    assert "def test_sysctl(host, item):" in text and "def test_file(host, item):" in text
    assert "def test_expect(host, item):" in (where / "test_cpu_tuning.py").read_text()  # the hook's promise

    r = pytest_run(project, "--bringup-inventory=hosts", "exported", "-rs")  # each module's own testinfra_hosts
    assert r.returncode == 0, r.stdout + r.stderr
    assert " passed" in r.stdout and "failed" not in r.stdout

    sandbox_host.exec(f"echo 1 > /proc/sys/net/ipv4/tcp_slow_start_after_idle && chmod 600 {CONF}")
    try:
        r = pytest_run(project, f"--hosts=bringup://{h}", "--bringup-inventory=hosts", "exported")
        assert r.returncode == 1, r.stdout + r.stderr
        assert "\nnet.ipv4.tcp_slow_start_after_idle is 1, want 0\n" in r.stdout, r.stdout
        assert f"\nfile:{CONF}: mode is 600, want 644\n" in r.stdout, r.stdout
        assert "2 failed" in r.stdout, r.stdout
        # The same modules as a site suite of the audit: one line each, the audit's own words.
        r = invoke("audit", "--host", h, "--roles", "cpu_tuning", "--testinfra", "exported", cwd=project)
        assert r.returncode == 2, r.stdout + r.stderr
        assert (f"{h}: test_sysctl[net.ipv4.tcp_slow_start_after_idle]: net.ipv4.tcp_slow_start_after_idle is 1, "
                f"want 0\n") in r.stdout, r.stdout
        assert f"{h}: test_file[{CONF}]: file:{CONF}: mode is 600, want 644\n" in r.stdout
    finally:
        assert invoke("provision", "--host", h, "--roles", "sysctl", cwd=project).returncode == 0
    # What the inventory declares now differs from the export: said, with the value, and no pass.
    r = pytest_run(project, f"--hosts=bringup://{h}", "--bringup-inventory=hosts", "--bringup-set",
                   "cpu_dma_latency_us=20", str(where / "test_cpu_tuning.py"), "-rN")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "role cpu_tuning now declares" in r.stdout and "export again (invoke audit --host" in r.stdout, r.stdout


def test_the_three_ways_from_an_installed_copy(sandbox_host, project, tmp_path):
    """pip-installed bringup: the backend's entry point (plain pytest, no -p), --testinfra, --export-testinfra."""
    venv = install_copy(tmp_path)
    py = str(venv / "bin" / "python")
    ops = tmp_path / "ops"
    ops.mkdir()
    shutil.copy(project / "hosts", ops / "hosts")
    (ops / "test_policy.py").write_text(SITE)
    where = subprocess.run([py, "-c", "import bringup.testinfra.plugin as p; print(p.__file__)"], cwd=ops,
                           capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(venv)), where
    h = sandbox_host.name

    r = pytest_run(ops, f"--hosts=bringup://{h}", "test_policy.py", python=py, plugin=False)  # the entry point
    assert r.returncode == 1 and "1 failed, 1 passed" in r.stdout, r.stdout + r.stderr

    bringup = str(venv / "bin" / "bringup")
    r = subprocess.run([bringup, "audit", "--host", h, "--roles", "sysctl", "--testinfra", "test_policy.py"], cwd=ops,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{h}: test_somaxconn_is_one: assert '{somaxconn(sandbox_host)}' == '1'" in r.stdout, r.stdout

    r = subprocess.run([bringup, "audit", "--host", h, "--roles", "sysctl", "--export-testinfra", "exp"], cwd=ops,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    r = pytest_run(ops, "exp", python=py, plugin=False)
    assert r.returncode == 0 and " passed" in r.stdout, r.stdout + r.stderr
    assert sorted(p.name for p in ops.iterdir()) == ["exp", "hosts", "reports", "test_policy.py"]


# -- issue 34 item 15: a site test that hangs, signals, odd host names, secrets ------------------------------

def _hang_suite(d: Path, seconds: str) -> Path:
    """A suite whose second test hangs in `sleep <seconds>` on the host."""
    (d / "test_hang.py").write_text(
        "def test_first(host):\n    assert host.run('true').rc == 0\n\n"
        f"def test_hangs(host):\n    host.run('sleep {seconds}; echo late')\n\n"
        "def test_after(host):\n    pass\n")
    return d / "test_hang.py"


def _on_host(sandbox_host, seconds: str) -> list[str]:
    """The host's processes running `sleep <seconds>` (the probe's own command line spells it otherwise)."""
    n, frac = seconds.split(".")
    script = (f"m=\"sleep $(({n})).{frac}\"; for p in /proc/[0-9]*; do c=$(tr '\\000' ' ' < $p/cmdline 2>/dev/null); "
              "case \"$c\" in *\"$m\"*) echo \"${p#/proc/} $c\";; esac; done; true")
    return [l for l in sandbox_host.exec(script).stdout.splitlines() if l.strip()]


def _within(seconds: float, cond) -> bool:
    deadline = time.monotonic() + seconds
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.25)
    return cond()


@pytest.fixture
def hang(sandbox_host, tmp_path):
    write_inventory(tmp_path / "hosts", [sandbox_host], extra_vars=SANDBOX_VARS)
    seconds = f"{4000 + os.getpid() % 1000}.{int(time.time()) % 1000}"
    yield tmp_path, _hang_suite(tmp_path, seconds), seconds
    for line in _on_host(sandbox_host, seconds):  # a failed test's leftovers, by their process ids
        sandbox_host.exec(f"kill -KILL {int(line.split()[0])}", check=False)


@pytest.mark.reliability(item=34, fault="audit --testinfra: a site test hangs in a command on a real host",
                         checks=("no hang", "no leftovers", "recap and report", "exit code"))
def test_a_site_test_hanging_on_the_host_ends_at_the_bound_there_and_here(sandbox_host, hang):
    d, suite, seconds = hang
    h = sandbox_host.name
    started = time.monotonic()
    r = invoke("audit", "--host", h, "--roles", "window_tuner", "--testinfra", str(suite), "--testinfra-timeout", "5",
               cwd=d, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert time.monotonic() - started < 5 + 5 + 40
    assert (f"{h}: testinfra: ended after 5 s (--testinfra-timeout): test_hangs was still running; 2 of 3 tests not "
            "finished") in r.stdout.splitlines(), r.stdout
    assert _within(5, lambda: not _on_host(sandbox_host, seconds)), _on_host(sandbox_host, seconds)
    assert holding(str(suite)) == []
    assert json.loads(latest(d, "json").read_text())["testinfra"]["not_run"] == {h: "ended at --testinfra-timeout 5 s"}


def _audit_bg(sandbox_host, d: Path, suite: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "invoke", "--search-root", str(REPO), "audit", "--host",
                             sandbox_host.name, "--roles", "window_tuner", "--testinfra", str(suite)], cwd=d,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.reliability(item=34, fault="audit --testinfra: SIGTERM, and SIGKILL, while a site test hangs on a real "
                                        "host", checks=("no hang", "no leftovers", "exit code"))
def test_sigterm_or_sigkill_of_the_audit_ends_the_hanging_test_here_and_on_the_host(sandbox_host, hang):
    d, suite, seconds = hang
    p = _audit_bg(sandbox_host, d, suite)
    assert _within(90, lambda: _on_host(sandbox_host, seconds)), "the test never started its command"
    p.send_signal(signal.SIGTERM)  # once: the default bound is 600 s
    out, err = p.communicate(timeout=60)
    assert p.returncode == 143, out + err
    assert (f"{sandbox_host.name}: testinfra: interrupted by SIGTERM: test_hangs was still running; 2 of 3 tests "
            "not finished") in out.splitlines(), out
    assert _within(5, lambda: not _on_host(sandbox_host, seconds)), _on_host(sandbox_host, seconds)
    assert holding(str(suite)) == []

    p = _audit_bg(sandbox_host, d, suite)
    assert _within(90, lambda: _on_host(sandbox_host, seconds)), "the test never started its command"
    p.kill()
    p.communicate(timeout=30)
    assert _within(15, lambda: not holding(str(suite))), holding(str(suite))
    assert _within(5, lambda: not _on_host(sandbox_host, seconds)), _on_host(sandbox_host, seconds)


ODD = ["fd00::2", "a,b", "x;y z%", "p%41q"]


@pytest.mark.reliability(item=34, fault="audit --testinfra of inventory aliases named fd00::2, a,b, x;y z%, p%41q",
                         checks=("exit code", "recap and report"))
def test_hosts_with_names_that_are_not_url_or_pattern_safe(sandbox_host, tmp_path):
    hv = sandbox_host.inventory_vars()
    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"vars": dict(SANDBOX_VARS, gpu_profile="cpu"),
                                                            "hosts": {n: dict(hv) for n in ODD}}}))
    (tmp_path / "test_name.py").write_text(
        "def test_name(host, bringup_vars):\n"
        "    assert host.backend.name == bringup_vars['inventory_hostname']\n"
        f"    assert host.backend.name in {ODD!r}\n"
        "    assert host.file('/etc').is_directory\n")
    r = invoke("audit", "--group", "all", "--roles", "window_tuner", "--forks", "4", "--testinfra", "test_name.py",
               cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(latest(tmp_path, "json").read_text())["testinfra"]["hosts"] == {
        n: {"passed": 1, "failed": 0, "skipped": 0, "unreachable": 0} for n in ODD}, r.stdout
    for n in ODD:
        assert f"{n} : passed=" in r.stdout, r.stdout


@pytest.mark.reliability(item=34, fault="plain pytest over bringup:// on a real host: a failing test shows the "
                                        "become password", checks=("secret never shown",))
def test_plain_pytest_masks_the_become_password_in_a_failing_assertion(sandbox_host, tmp_path):
    _sudo_user(sandbox_host, "pwuser", "Right-pw-42", nopasswd=False)
    inv = _as(tmp_path, sandbox_host, "pwuser", "Right-pw-42")
    (tmp_path / "test_pw.py").write_text(
        "def test_pw(host):\n"
        "    pw = host.backend.inventory_host.connection.ansible_become_password.get_secret_value()\n"
        "    assert host.check_output('id -u') == '0'\n"
        "    assert host.run('echo %s', pw).stdout == 'the password'\n")
    r = pytest_run(tmp_path, "--hosts=bringup://h", f"--bringup-inventory={inv}", "-rA", "-l",
                   f"--junitxml={tmp_path / 'j.xml'}", "test_pw.py")
    assert r.returncode == 1 and "1 failed" in r.stdout, r.stdout + r.stderr
    assert "Right-pw-42" not in r.stdout + r.stderr + (tmp_path / "j.xml").read_text(), r.stdout
    assert "assert '********\\n' == 'the password'" in r.stdout, r.stdout
