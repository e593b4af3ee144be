"""The bringup:// testinfra backend and its plugin, on this machine (``ansible_connection: local``) and 127.0.0.1:
host patterns, quoting, bytes, become, an unreachable host, the merged variables, one-line failures, the
exported modules' text, and ``invoke audit --testinfra`` / ``--export-testinfra`` refusing bad input."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import testinfra

from bringup.errors import BringupError, InputError, Unreachable
from bringup.testinfra import PLUGIN, backend
from bringup.testinfra.export import folder, module_text, refuse_foreign, target
from bringup.testinfra.plugin import expand_hosts, one_line
from bringup.testinfra.suite import Suite
from tests.processes import gone, holding

REPO = Path(__file__).resolve().parents[2]

INVENTORY = """\
all:
  vars: {gpu_profile: cpu}
  children:
    l40s:
      hosts:
        h1: {ansible_connection: local}
        h2: {ansible_connection: local}
        h3: {ansible_connection: local}
    rack2:
      hosts: {h2: {}, h3: {}}
    a10:
      hosts:
        a1: {ansible_connection: local, sysctl_profile: none}
"""


@pytest.fixture
def inv(tmp_path, monkeypatch) -> Path:
    p = tmp_path / "hosts"
    p.write_text(INVENTORY)
    monkeypatch.setattr(backend.SETTINGS, "inventory", (str(p),))
    monkeypatch.setattr(backend.SETTINGS, "overrides", ())
    return p


def test_hosts_take_names_groups_and_ansible_patterns_as_limit_does(inv):
    assert expand_hosts("bringup://l40s:&rack2:!h3") == "bringup://h2"
    assert expand_hosts("bringup://l40s") == "bringup://h1,bringup://h2,bringup://h3"
    # Wildcards and classes that testinfra's URL parsing would cut (`?` a query, `[12]` an IPv6 address).
    assert expand_hosts("bringup://h?:!h1") == "bringup://h2,bringup://h3"
    assert expand_hosts("bringup://h[!2]") == "bringup://h1,bringup://h3"
    assert expand_hosts("bringup://l40s[0:1]") == "bringup://h1,bringup://h2"  # Ansible's subscript, as --limit's
    assert expand_hosts("bringup://~(a|h)1") == "bringup://a1,bringup://h1"
    # Other backends' hosts pass through; a host named twice is one host.
    assert expand_hosts("bringup://a1,paramiko://root@x,bringup://a10") == "bringup://a1,paramiko://root@x"
    with pytest.raises(BringupError, match=r"'l40z' matches no host or group of the inventory; did you mean l40s"):
        expand_hosts("bringup://l40z")


def test_the_inventory_option_or_environment_names_the_file(tmp_path, monkeypatch):
    monkeypatch.setattr(backend.SETTINGS, "inventory", ())
    monkeypatch.setenv(backend.INVENTORY_ENV, str(tmp_path / "elsewhere"))
    assert backend.SETTINGS.paths() == [tmp_path / "elsewhere"]
    with pytest.raises(BringupError, match="elsewhere: no such inventory file"):
        expand_hosts("bringup://h1")
    monkeypatch.delenv(backend.INVENTORY_ENV)
    assert backend.SETTINGS.paths() == [Path("hosts")]


def test_commands_run_through_bringups_transport_quoted_and_byte_exact(inv):
    from bringup.ssh.connection import LocalTransport

    host = testinfra.get_host("bringup://h1")
    assert host.backend.get_pytest_id() == "bringup://h1"
    # Arguments are quoted (bringup.ssh.command.sh): the `;` is printed, not run.
    r = host.run("printf '%%s|' %s %s", "a b", "x; touch /nonexistent-bringup-ti")
    assert (r.rc, r.stdout) == (0, "a b|x; touch /nonexistent-bringup-ti|")
    assert host.run("printf '\\377\\n'; exit 3").stdout_bytes == b"\xff\n"
    assert host.run("exit 3").rc == 3
    t = host.backend.transport()
    assert isinstance(t, LocalTransport) and t.round_trips == 3 and host.backend.transport() is t
    assert host.file(str(inv)).content_string == INVENTORY


def test_sudo_becomes_as_bringups_become_does(inv):
    host = testinfra.get_host("bringup://h2")
    b = host.backend
    t = b.transport()
    assert b.command("id -u") == ("id -u", None) and b.becoming(t, None) is t
    with host.sudo():
        assert b.command("cat %s", "/a b") == ("cat '/a b'", "root")
        with host.sudo("alice"):  # nested: the innermost user
            script, user = b.command("id -u")
    assert (script, user) == ("id -u", "alice")
    view = b.becoming(t, "alice")
    assert view is not t and view._entry()[0].startswith("sudo -n -H -u alice -- ")
    assert not t._entry()[0].startswith("sudo") and not t.host.connection.ansible_become
    assert b.command("id -u") == ("id -u", None)  # after the with blocks


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_host_is_said_once_and_not_dialled_again(tmp_path, monkeypatch):
    port = free_port()
    (tmp_path / "hosts").write_text("all:\n  hosts:\n    gone: {ansible_host: 127.0.0.1, ansible_port: %d, "
                                    "ssh_connect_timeout: 3}\n" % port)
    monkeypatch.setattr(backend.SETTINGS, "inventory", (str(tmp_path / "hosts"),))
    host = testinfra.get_host("bringup://gone")
    with pytest.raises(Unreachable, match=f"ssh to 127.0.0.1:{port} failed") as first:
        host.run("true")
    started = time.monotonic()
    with pytest.raises(Unreachable) as again:
        host.file("/etc/passwd").exists
    assert again.value is first.value and time.monotonic() - started < 0.5


def test_one_line_of_a_failure():
    try:
        assert 1 == 2, "ntp is down"
    except AssertionError as e:
        line = one_line(e)
    assert line.startswith("ntp is down; assert 1 == 2"), line
    assert one_line(Unreachable("ssh to 127.0.0.1:9 failed: Connection refused")) == \
        "unreachable: ssh to 127.0.0.1:9 failed: Connection refused"
    assert one_line(ValueError("bad\nvalue")) == "ValueError: bad; value"
    assert one_line(AssertionError()) == "assertion failed"
    assert len(one_line(AssertionError("x" * 5000))) == 400


def pytest_run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", PLUGIN, *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_plain_pytest_the_merged_variables_and_the_report(inv, tmp_path):
    (tmp_path / "test_site.py").write_text(
        "def test_vars(host, bringup_vars):\n"
        "    assert bringup_vars['inventory_hostname'] == host.backend.name\n"
        "    assert bringup_vars['gpu_profile'] == 'cpu'\n"          # the inventory's
        "    assert bringup_vars['cpu_dma_latency_us'] == 10\n"      # a role's default
        "    assert bringup_vars['irq_cpus_per_node'] == 3\n"        # --bringup-set, over the default
        "    assert bringup_vars['sysctl_profile'] == ('none' if host.backend.name == 'a1' else 'network-latency')\n"
        "def test_fails(host):\n"
        "    assert host.run('exit 3').rc == 0\n")
    r = pytest_run(tmp_path, "--hosts=bringup://a10:h1", f"--bringup-inventory={inv}", "--bringup-set",
                   "irq_cpus_per_node=3", f"--bringup-report={tmp_path / 'r.json'}", "test_site.py")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "2 failed, 2 passed" in r.stdout, r.stdout
    got = json.loads((tmp_path / "r.json").read_text())
    assert got["collected"] == 4 and got["exit"] == 1
    assert sorted((t["host"], t["test"], t["outcome"]) for t in got["tests"]) == [
        ("a1", "test_fails", "failed"), ("a1", "test_vars", "passed"),
        ("h1", "test_fails", "failed"), ("h1", "test_vars", "passed")]
    assert all(t["message"].startswith("assert 3 == 0") for t in got["tests"] if t["outcome"] == "failed")


def test_plain_pytest_a_bad_pattern_is_one_usage_line(inv, tmp_path):
    (tmp_path / "test_x.py").write_text("def test_x(host):\n    pass\n")
    r = pytest_run(tmp_path, "--hosts=bringup://l40s:&rakc2", f"--bringup-inventory={inv}", "test_x.py")
    assert r.returncode == 4, r.stdout + r.stderr
    assert r.stderr.strip() == ("ERROR: --hosts bringup://l40s:&rakc2: 'rakc2' matches no host or group of the "
                                "inventory; did you mean rack2? (`invoke hosts` lists them)"), r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "test_x.py").write_text("def test_x(host):\n    pass\n")
    r = pytest_run(tmp_path / "bare", "--hosts=bringup://h1", "test_x.py")  # no ./hosts there
    assert r.returncode == 4 and r.stderr.strip() == (
        "ERROR: hosts: no such inventory file (pass --inventory PATH); bringup:// hosts read --bringup-inventory "
        "PATH, else $BRINGUP_INVENTORY, else ./hosts"), r.stderr


def test_plain_pytest_an_unreachable_host_is_one_line(tmp_path):
    port = free_port()
    (tmp_path / "hosts").write_text("all:\n  hosts:\n    gone: {ansible_host: 127.0.0.1, ansible_port: %d, "
                                    "ssh_connect_timeout: 3}\n" % port)
    (tmp_path / "test_x.py").write_text("def test_x(host):\n    assert host.file('/etc').is_directory\n")
    r = pytest_run(tmp_path, "--hosts=bringup://gone", "test_x.py", "-rN")
    assert r.returncode == 1, r.stdout + r.stderr
    failure = r.stdout.split("FAILURES ===")[1].splitlines()[2:]
    assert failure[0].startswith(f"gone: unreachable: ssh to 127.0.0.1:{port} failed: "), r.stdout
    assert failure[1].startswith("1 failed"), r.stdout
    assert "Traceback" not in r.stdout and "paramiko" not in r.stdout


def test_exported_module_text_compiles_and_groups_items_by_kind():
    items = [{"id": "sysctl:net.core.somaxconn", "kind": "sysctl", "name": "net.core.somaxconn", "key":
              "net.core.somaxconn", "value": "4096", "proc": "/proc/sys/net/core/somaxconn"},
             {"id": "apt-repo:nvidia", "kind": "apt-repo", "name": "nvidia"},
             {"id": "sysctl:vm.swappiness", "kind": "sysctl", "name": "vm.swappiness", "key": "vm.swappiness",
              "value": "10", "proc": "/proc/sys/vm/swappiness"}]
    text = module_text("trt-l40s-01", "sysctl", items, "/ops/hosts", "out/trt_l40s_01")
    ns: dict = {}
    exec(compile(text, "test_sysctl.py", "exec"), ns)
    assert ns["testinfra_hosts"] == ["bringup://trt-l40s-01"] and ns["ROLE"] == "sysctl"
    assert ns["SYSCTL"] == [items[0], items[2]] and ns["APT_REPO"] == [items[1]]
    assert callable(ns["test_sysctl"]) and callable(ns["test_apt_repo"])
    assert "pytest --hosts=bringup://trt-l40s-01 --bringup-inventory=/ops/hosts out/trt_l40s_01" in text
    assert text.splitlines()[0].startswith("# Written by bringup audit --export-testinfra")


@pytest.mark.reliability(item=40, fault="audit --export-testinfra: a link out of the working folder written through "
                                        "(--out refuses it), and a folder where nothing can be made (/proc/x) a "
                                        "traceback after the hosts were audited", variants=2,
                         checks=("nothing touched", "one clear line"))
def test_the_export_folder_is_checked_as_every_out_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "work").mkdir()
    os.chdir(tmp_path / "work")
    os.symlink(tmp_path / "elsewhere", "tests")
    with pytest.raises(InputError, match=r"^--export-testinfra 'tests' is a symbolic link to .*elsewhere', outside the "
                                         r"working folder; give a folder for the modules"):
        target("tests")
    with pytest.raises(InputError, match=r"^--export-testinfra '/proc/bringup-tests': cannot write in /proc"):
        target("/proc/bringup-tests")
    assert not list((tmp_path / "elsewhere").iterdir())


def test_export_folders_and_what_is_never_replaced(tmp_path, inv):
    from bringup.inventory.hosts import load_inventory

    assert [folder(n) for n in ("trt-l40s-01", "10.0.0.7", "web.a")] == ["trt_l40s_01", "h_10_0_0_7", "web_a"]
    (tmp_path / "file").write_text("")
    with pytest.raises(InputError, match="not a folder"):
        target(str(tmp_path / "file"))
    assert target(str(tmp_path / "no" / "such")) == tmp_path / "no" / "such"  # made when written, as an --out
    hosts = list(load_inventory(inv).hosts.values())
    out = tmp_path / "out"
    refuse_foreign(out, hosts)  # nothing there yet
    (out / "h1").mkdir(parents=True)
    (out / "h1" / "test_sysctl.py").write_text("# Written by bringup audit --export-testinfra (x)\n")
    refuse_foreign(out, hosts)
    (out / "h1" / "test_mine.py").write_text("def test_mine(host):\n    pass\n")
    with pytest.raises(InputError, match=r"test_mine.py was not written by bringup; it is never replaced"):
        refuse_foreign(out, hosts)


def test_a_suite_that_is_not_tests_is_bad_input(tmp_path, inv):
    from bringup.inventory.hosts import load_inventory

    with pytest.raises(InputError, match="no such file or folder"):
        Suite.of(str(tmp_path / "nope"), str(inv), ())
    (tmp_path / "notes.txt").write_text("")
    with pytest.raises(InputError, match="not a Python file"):
        Suite.of(str(tmp_path / "notes.txt"), str(inv), ())
    h1 = load_inventory(inv).host("h1")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no tests there"):
        Suite.of(str(tmp_path / "empty"), str(inv), ()).preflight(h1)
    (tmp_path / "test_broken.py").write_text("import no_such_module_here\n")
    with pytest.raises(InputError, match=r"test_broken.py cannot be collected: .*No module named "
                                         r"'no_such_module_here'"):
        Suite.of(str(tmp_path / "test_broken.py"), str(inv), ()).preflight(h1)
    (tmp_path / "good").mkdir()
    (tmp_path / "good" / "test_ok.py").write_text("def test_ok(host):\n    pass\n")
    Suite.of(str(tmp_path / "good"), str(inv), ()).preflight(h1)


def invoke(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_audit_testinfra_options_refuse_bad_input_in_one_line(tmp_path, inv):
    (tmp_path / "test_x.py").write_text("import no_such_module_here\n")
    for args, said in (
            (("--testinfra", "nowhere"), "error: --testinfra nowhere: no such file or folder"),
            (("--testinfra", "test_x.py", "--export-testinfra", "out"), "error: --testinfra and --export-testinfra"),
            (("--testinfra", "test_x.py"), "error: --testinfra "),
            (("--export-testinfra", "hosts"), "error: --export-testinfra 'hosts': it is not a folder")):
        r = invoke(tmp_path, "audit", "--host", "h1", "--roles", "sysctl", *args)
        assert r.returncode == 1, (args, r.stdout, r.stderr)
        lines = (r.stdout + r.stderr).strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(said), (args, lines)
    assert not (tmp_path / "reports").exists() and not (tmp_path / "out").exists()


def test_exported_values_never_carry_a_credential():
    from bringup.resources import JsonFile
    from bringup.resources.privatejson import PrivateJsonFile
    from bringup.secrets import MASK
    from bringup.testinfra.declared import values

    plain = values(JsonFile("/etc/docker/daemon.json", {"log-driver": "json-file"}, owned=True))
    assert plain == {"path": "/etc/docker/daemon.json", "owned": True, "keys": {"log-driver": "json-file"}}
    private = values(PrivateJsonFile("/root/.docker/config.json", {"auths": {"nvcr.io": {"auth": "c2VjcmV0"}}}))
    assert "keys" not in private and private["keys_sha256"] == "********" and "c2VjcmV0" not in repr(private)
    MASK.add("Token-42-xyz")
    secret = values(JsonFile("/etc/docker/daemon.json", {"registry-mirrors": ["https://u:Token-42-xyz@m"]}))
    assert "keys" not in secret and "Token-42-xyz" not in repr(secret)


@pytest.mark.reliability(item=40, fault="vault: --export-testinfra wrote the full sha256 of a file (or of the JSON keys) "
                                        "that holds a short vaulted value: the secret is found from the hash",
                         variants=3, checks=("secret never shown",))
def test_exported_values_never_carry_a_hash_of_a_secret(monkeypatch):
    import hashlib

    from bringup.resources import File, JsonFile
    from bringup.secrets import MASK
    from bringup.testinfra.declared import item_of, values

    monkeypatch.setattr(MASK, "_texts", set(MASK._texts))
    monkeypatch.setattr(MASK, "_short", dict(MASK._short))
    MASK.add("k9Q", alone=True)
    text = "user = app\npassword = k9Q\n"
    got = item_of(File("/etc/app.conf", content=text))
    assert got["sha256"] == "********" and hashlib.sha256(text.encode()).hexdigest() not in repr(got), got
    keys = {"registry-mirrors": ["k9Q"]}
    got = values(JsonFile("/etc/docker/daemon.json", keys))
    assert got["keys_sha256"] == "********", got
    plain = values(File("/etc/plain.conf", content="workers = 8\n"))
    assert plain["sha256"] == hashlib.sha256(b"workers = 8\n").hexdigest()


def test_audit_runs_the_hosts_tests_side_by_side_up_to_forks(tmp_path):
    """Two hosts, --forks 2: each host's test waits for the other's to have started, so run one after the
    other they would both fail; the recap and the JSON count each host's test with its own."""
    (tmp_path / "hosts").write_text("all:\n  vars: {gpu_profile: cpu}\n  hosts:\n"
                                    "    h1: {ansible_connection: local}\n    h2: {ansible_connection: local}\n")
    marks = tmp_path / "marks"
    marks.mkdir()
    (tmp_path / "test_both.py").write_text(
        "import time\nfrom pathlib import Path\n\n"
        "def test_the_other_host_runs_meanwhile(host):\n"
        f"    marks = Path({str(marks)!r})\n"
        "    (marks / host.backend.name).write_text('started')\n"
        "    deadline = time.monotonic() + 60\n"
        "    while len(list(marks.iterdir())) < 2 and time.monotonic() < deadline:\n"
        "        time.sleep(0.1)\n"
        "    assert sorted(p.name for p in marks.iterdir()) == ['h1', 'h2']\n")
    r = invoke(tmp_path, "audit", "--hosts", "h1,h2", "--roles", "window_tuner", "--forks", "2",
               "--testinfra", "test_both.py")
    assert r.returncode == 0, r.stdout + r.stderr
    for h in ("h1", "h2"):
        assert f"{h} : passed=1 failed=0 skipped=1 unreachable=0" in r.stdout, r.stdout
    summary = json.loads(next((tmp_path / "reports").glob("*-audit.json")).read_text())
    assert summary["testinfra"]["hosts"] == {h: {"passed": 1, "failed": 0, "skipped": 0, "unreachable": 0}
                                             for h in ("h1", "h2")}


@pytest.mark.parametrize("program", ["bringup", "invoke"])
def test_the_suites_tests_name_the_program_that_runs_the_audit(tmp_path, program):
    # Issue 25: `bringup audit --testinfra` ran its tests in a pytest of their own, whose hints (export
    # again with ...) said `invoke audit` whatever the user ran.  The suite's environment carries the name.
    (tmp_path / "test_name.py").write_text(
        "from bringup.process import command\n\n"
        f"def test_name():\n    assert command('audit') == {program + ' audit'!r}\n")
    env = subprocess.run([sys.executable, "-c", f"import json; from bringup.process import set_program; "
                          f"set_program({program!r}); from bringup.testinfra.suite import _env; "
                          "print(json.dumps(_env()))"], cwd=REPO, capture_output=True, text=True, check=True)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", PLUGIN,
                        str(tmp_path / "test_name.py")], cwd=tmp_path, env=json.loads(env.stdout),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout + r.stderr


#: Host names that are not URL-safe nor pattern-safe: an IPv6 address, a comma, a range's bracket, a shell's
#: `;`, a space, a `%` and what looks like a percent-escape.  A script inventory gives them as they are.
ODD_NAMES = ["web[1]", "fd00::2", "a,b", "x;y z%", "p%41q"]


def _odd_inventory(tmp_path: Path) -> Path:
    script = tmp_path / "inv.py"
    script.write_text(f"#!{sys.executable}\nimport json\nnames = {ODD_NAMES!r}\n"
                      "print(json.dumps({'all': {'hosts': names, 'vars': {'gpu_profile': 'cpu'}},\n"
                      "                  '_meta': {'hostvars': {n: {'ansible_connection': 'local'} for n in names}}}))\n")
    script.chmod(0o755)
    return script


@pytest.mark.reliability(item=34, fault="audit --testinfra of hosts named web[1], fd00::2, a,b, x;y z%, p%41q",
                         checks=("exit code", "recap and report"))
def test_audit_runs_the_tests_of_hosts_whose_names_are_not_url_or_pattern_safe(tmp_path):
    # Issue 34 item 15: the audit passed the host to its pytest as a quoted URL, which the plugin then matched
    # as a pattern: every one of these was "matches no host".  It now names the host exactly (--bringup-host).
    inv = _odd_inventory(tmp_path)
    (tmp_path / "test_name.py").write_text(
        "def test_name(host, bringup_vars):\n"
        "    assert host.backend.name == bringup_vars['inventory_hostname']\n"
        f"    assert host.backend.name in {ODD_NAMES!r}\n")
    r = invoke(tmp_path, "audit", "-i", str(inv), "--group", "all", "--roles", "window_tuner", "--forks", "5",
               "--testinfra", "test_name.py")
    assert r.returncode == 0, r.stdout + r.stderr
    summary = json.loads(next((tmp_path / "reports").glob("*-audit.json")).read_text())
    assert summary["testinfra"]["hosts"] == {n: {"passed": 1, "failed": 0, "skipped": 0, "unreachable": 0}
                                             for n in ODD_NAMES}, r.stdout
    # Plain pytest: --bringup-host takes a name exactly; one that is not the inventory's is one line.
    r = pytest_run(tmp_path, f"--bringup-inventory={inv}", "--bringup-host=a,b", "--bringup-host=fd00::2",
                   f"--bringup-report={tmp_path / 'r.json'}", "test_name.py")
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(t["host"] for t in json.loads((tmp_path / "r.json").read_text())["tests"]) == ["a,b", "fd00::2"]
    r = pytest_run(tmp_path, f"--bringup-inventory={inv}", "--bringup-host=web", "test_name.py")
    assert r.returncode == 4 and r.stderr.strip() == (
        "ERROR: --bringup-host 'web': no such host in the inventory (`invoke hosts` lists them)"), r.stderr


def _hanging_suite(tmp_path: Path) -> tuple[Path, str]:
    """A local host and a suite whose second test hangs in a command on the host; the command's own mark."""
    (tmp_path / "hosts").write_text("all:\n  vars: {gpu_profile: cpu}\n  hosts:\n    h1: {ansible_connection: local}\n")
    hang = f"sleep {int(time.time() * 1000) % 90000 + 10000}.{os.getpid()}"  # unique to this test's run
    (tmp_path / "test_hang.py").write_text(
        "def test_first(host):\n    assert host.run('true').rc == 0\n\n"
        f"def test_hangs(host):\n    host.run({hang + '; echo late'!r})\n\n"
        "def test_after(host):\n    pass\n")
    return tmp_path / "test_hang.py", hang


def _audit(cwd: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "invoke", "--search-root", str(REPO), "audit", "--host", "h1",
                             "--roles", "window_tuner", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _running(command: str) -> list[str]:
    """The processes running ``command`` itself (not a shell whose script holds it)."""
    return [line for line in holding(command) if line.split(": ", 1)[1].startswith(command)]


def _until(cond, within: float = 60.0) -> bool:
    deadline = time.monotonic() + within
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.1)
    return cond()


@pytest.mark.reliability(item=34, fault="audit --testinfra: a site test hangs in a command on the host",
                         checks=("no hang", "no leftovers", "recap and report", "exit code"))
def test_a_hanging_site_test_ends_at_the_bound_with_what_it_ran(tmp_path):
    # Issue 34 item 15: nothing bounded a site's test; its pytest, and the command it ran, ran on.
    suite, hang = _hanging_suite(tmp_path)
    started = time.monotonic()
    p = _audit(tmp_path, "--testinfra", str(suite), "--testinfra-timeout", "3")
    out, err = p.communicate(timeout=120)
    took = time.monotonic() - started
    assert p.returncode == 2, out + err
    assert ("h1: testinfra: ended after 3 s (--testinfra-timeout): test_hangs was still running; 2 of 3 tests not "
            "finished") in out.splitlines(), out
    assert "h1 : passed=1 failed=1 skipped=1 unreachable=0" in out, out
    assert took < 3 + 5 + 30, took  # the bound, pytest's grace, and an audit's own time on a busy machine
    assert gone(hang, str(suite), within=2) == []
    summary = json.loads(next((tmp_path / "reports").glob("*-audit.json")).read_text())
    assert summary["testinfra"]["not_run"] == {"h1": "ended at --testinfra-timeout 3 s"}
    assert summary["testinfra"]["hosts"]["h1"] == {"passed": 1, "failed": 1, "skipped": 0, "unreachable": 0}


@pytest.mark.reliability(item=34, fault="audit --testinfra: SIGTERM, then SIGKILL, while a site test hangs",
                         checks=("no hang", "no leftovers", "exit code"))
def test_sigterm_ends_a_hanging_site_test_and_sigkill_of_the_audit_leaves_nothing_running(tmp_path):
    suite, hang = _hanging_suite(tmp_path)
    p = _audit(tmp_path, "--testinfra", str(suite))  # the default bound: 600 s
    assert _until(lambda: _running(hang)), "the hanging test never started"
    p.send_signal(signal.SIGTERM)  # once
    out, err = p.communicate(timeout=60)
    assert p.returncode == 143, out + err
    assert "h1: testinfra: interrupted by SIGTERM: test_hangs was still running; 2 of 3 tests not finished" in out, out
    assert gone(hang, str(suite), within=5) == []

    # The audit killed outright: its pytest, and the command on the host, end with it.
    p = _audit(tmp_path, "--testinfra", str(suite))
    assert _until(lambda: _running(hang)), "the hanging test never started"
    p.kill()
    p.communicate(timeout=30)
    assert gone(hang, str(suite), within=15) == []


def test_the_bound_option_is_checked(tmp_path, inv):
    from bringup.testinfra.suite import TIMEOUT_S, parse_timeout

    assert parse_timeout(None) == TIMEOUT_S and parse_timeout("2.5") == 2.5
    for bad in ("0", "-1", "nan", "inf", "ten", ""):
        with pytest.raises(InputError, match=r"--testinfra-timeout .*: give the seconds a host's tests may take"):
            parse_timeout(bad)
    r = invoke(tmp_path, "audit", "--host", "h1", "--roles", "sysctl", "--testinfra-timeout", "5")
    assert r.returncode == 1 and r.stderr.strip() == (
        "error: --testinfra-timeout and --testinfra-become go with --testinfra PATH"), r.stdout + r.stderr


@pytest.mark.reliability(item=34, fault="plain pytest over bringup://: a failing test compares the become password "
                                        "and a secret variable", checks=("secret never shown",))
def test_plain_pytest_never_prints_the_inventorys_secrets(tmp_path, monkeypatch):
    # Issue 34 item 15: the audit masked its one line, but plain pytest printed the values in the assertion's
    # explanation, the captured output, the short summary and the JUnit file.
    monkeypatch.setenv("TI_SITE_TOKEN", "Tok-77-zz-site")
    (tmp_path / "hosts").write_text(
        "all:\n  vars: {gpu_profile: cpu}\n  hosts:\n    h1: {ansible_connection: local, ansible_become_password: "
        "Sekret-pw-913, site_token: {env: TI_SITE_TOKEN}}\n")
    (tmp_path / "test_pw.py").write_text(
        "def test_pw(host):\n"
        "    pw = host.backend.inventory_host.connection.ansible_become_password.get_secret_value()\n"
        "    print('the password is', pw)\n"
        "    assert pw == 'other'\n\n"
        "def test_token(host):\n"
        "    token = host.backend.inventory_host.vars['site_token'].get_secret_value()\n"
        "    assert host.run('echo %s', token).stdout == 'x'\n")
    r = pytest_run(tmp_path, "--hosts=bringup://h1", "-rA", "-l", f"--junitxml={tmp_path / 'j.xml'}",
                   f"--bringup-report={tmp_path / 'r.json'}", "test_pw.py")
    assert r.returncode == 1 and "2 failed" in r.stdout, r.stdout + r.stderr
    said = r.stdout + r.stderr + (tmp_path / "j.xml").read_text() + (tmp_path / "r.json").read_text()
    assert "Sekret-pw-913" not in said and "Tok-77-zz-site" not in said, said
    assert "assert '********' == 'other'" in r.stdout and "the password is ********" in r.stdout, r.stdout
    assert "assert '********\\n' == 'x'" in r.stdout, r.stdout


def test_site_tests_run_without_become_unless_asked_and_the_audit_says_when_they_run_as_root(tmp_path):
    # Issue 34 item 15: an audit is check mode, yet the site's tests ran with the inventory's become (root).
    # They now run as the login user; --testinfra-become gives them the become; root either way is said.
    # A stand-in sudo on PATH marks what it runs (the built-in audit reads through it either way).
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "sudo").write_text(
        "#!/bin/sh\nwhile [ $# -gt 0 ]; do case $1 in -n|-H) shift;; -u) shift 2;; --) shift; break;; *) break;; "
        "esac; done\nBECAME=yes exec \"$@\"\n")
    (tmp_path / "bin" / "sudo").chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    (tmp_path / "hosts").write_text("all:\n  vars: {gpu_profile: cpu}\n  hosts:\n    h1: {ansible_connection: local, "
                                    "ansible_become: true}\n")
    (tmp_path / "test_who.py").write_text("def test_who(host):\n    assert host.check_output('echo \"$BECAME\"') == ''\n")

    def audit(*more: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), "audit", "--host", "h1",
                               "--roles", "window_tuner", "--testinfra", "test_who.py", *more], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)

    r = audit()
    assert r.returncode == 0, r.stdout + r.stderr
    assert "h1 : passed=1 failed=0 skipped=1 unreachable=0" in r.stdout, r.stdout
    said = ("note: --testinfra runs the site's tests as root on h1 ({}): the audit's check mode binds its own items "
            "only, a test that writes changes the host; log in as a user without root to keep them read-only")
    assert (said.format("their login user is root") in r.stderr.splitlines()) == (os.geteuid() == 0), r.stderr
    assert json.loads(next((tmp_path / "reports").glob("*-audit.json")).read_text())["testinfra"]["become"] is False
    r = audit("--testinfra-become")  # asked for: the inventory's become applies
    assert r.returncode == 2, r.stdout + r.stderr
    assert any(l.startswith("h1: test_who: assert 'yes' == ''") for l in r.stdout.splitlines()), r.stdout
    assert said.format("--testinfra-become") in r.stderr.splitlines(), r.stderr


@pytest.mark.parametrize("shell", ["/bin/sh", "dash", "bash"])
def test_the_end_of_an_interrupted_command_finds_its_group_by_the_mark_and_ends_it(shell, tmp_path):
    # What an interrupted test runs on its host (bringup.testinfra.backend.END_MARKED), run here: the command as
    # the transport starts it (its timeout leads its group), and a second one, not marked, that must stay.
    import shutil

    from bringup.ssh.command import sh

    if shutil.which(shell) is None:
        pytest.fail(f"{shell} is not installed here: the host's shells are what this checks")
    marked = subprocess.Popen(["timeout", "-s", "TERM", "-k", "10", "600", "sh", "-c",
                               ": bringup-testinfra-0abc; sleep 4711.25; echo late"], start_new_session=True)
    other = subprocess.Popen(["timeout", "600", "sh", "-c", ": bringup-testinfra-0abd; sleep 4711.5"],
                             start_new_session=True)
    try:
        assert _until(lambda: len(_running("sleep 4711.")) == 2, within=10), holding("sleep 4711.")
        r = subprocess.run([shell, "-c", sh(backend.END_MARKED, "bringup-testinfra-0abc")], capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 0 and r.stderr == "", r.stderr
        assert gone("sleep 4711.25", within=5) == []
        assert marked.wait(timeout=5) != 0 and other.poll() is None and holding("sleep 4711.5")
    finally:
        for p in (marked, other):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def test_plain_pytest_with_a_deadline_ends_each_command_at_it_and_runs_none_after(inv, tmp_path):
    (tmp_path / "test_slow.py").write_text(
        "def test_slow(host):\n    host.run('sleep 31.25')\n\n"
        "def test_later(host):\n    import time; time.sleep(0.5)\n    host.run('true')\n")
    started = time.monotonic()
    r = pytest_run(tmp_path, "--hosts=bringup://h1", f"--bringup-inventory={inv}", "--bringup-deadline=2", "-rN",
                   "test_slow.py")
    assert r.returncode == 1 and "2 failed" in r.stdout, r.stdout + r.stderr
    assert time.monotonic() - started < 25
    assert "h1: ended at the session's bound of 2 s (--bringup-deadline): sleep 31.25" in r.stdout, r.stdout
    assert "h1: not run, the session's bound of 2 s (--bringup-deadline) has passed: true" in r.stdout, r.stdout
    assert gone("sleep 31.25", within=5) == []
    r = pytest_run(tmp_path, "--hosts=bringup://h1", f"--bringup-inventory={inv}", "--bringup-deadline=0",
                   "test_slow.py")
    assert r.returncode == 4 and r.stderr.strip() == "ERROR: --bringup-deadline 0: give a number of seconds > 0"


def test_a_local_command_an_interrupt_caught_while_it_started_is_ended_by_its_mark():
    # Ctrl-C (or the audit's bound) may come while the local transport is starting the command, before it holds
    # the process to end it: the backend finds it by its mark (its own session, `: MARK;` on its command line).
    p = subprocess.Popen(["/bin/sh", "-c", ": bringup-testinfra-0abe; sleep 4712.5; echo late"], start_new_session=True)
    try:
        assert _until(lambda: _running("sleep 4712.5"), within=10)
        backend._end_local("bringup-testinfra-0abd")  # another command's mark: not this one
        assert p.poll() is None
        backend._end_local("bringup-testinfra-0abe")
        assert p.wait(timeout=5) == -signal.SIGKILL and gone("sleep 4712.5", within=5) == []
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def test_a_site_test_that_prints_gigabytes_is_quoted_from_the_tail_of_its_output(tmp_path):
    # Every read has a size cap: the audit quotes the last lines of pytest's output when a run fails, and reads
    # only its last OUTPUT_KEPT bytes (a site test that printed without end is not read whole).
    from bringup.testinfra.suite import OUTPUT_KEPT, _last, _tail

    out = tmp_path / "output"
    with out.open("wb") as f:
        f.truncate(1 << 30)  # sparse: 1 GiB of NUL bytes, then the line pytest ended with
        f.seek(0, 2)
        f.write(b"\nE   AssertionError: the end\n")
    text = _tail(out, OUTPUT_KEPT)
    assert len(text) == OUTPUT_KEPT and _last(text).endswith("AssertionError: the end")
