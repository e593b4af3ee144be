"""Issue 40 item 4: no value a vault held, of any length, is shown: not in a plan's "is, want" values or diff, the
console, the JSON report, the audit's lines and JUnit, a testinfra export's wanted values, a checklist page, or an
error line.

The values are encrypted by ansible-core's own ``ansible-vault`` and read back through a real inventory; the role is
the shipped sysctl role planned offline on the real H200 VM's facts (tests/unit/h200_offline.py).  The masker used
to skip secrets under 4 characters (a "1" secret would have hidden every 1 of the output), so a 1- or 2-character
value, a common word or a small number showed wherever the role wrote it: ``net.core.somaxconn is 4096, want 7``.
A value is now ``********`` by its type (:class:`bringup.secrets.Vaulted`) wherever it is rendered whole, and where a
role made a line of it, as a value standing alone in that line (``= 7``), never as a digit inside another number.
"""
from __future__ import annotations

import io
import os
import json
import xml.etree.ElementTree as ET

import pytest
from rich.console import Console

from bringup.checklist import audit
from bringup.checklist import pages as checklist
from bringup.checklist.html import render_html
from bringup.checks import line
from bringup.errors import InputError
from bringup.inventory.hosts import load_inventory
from bringup.engine.report import Report, print_host
from bringup.engine.results import HostResult
from bringup.secrets import HIDDEN, MASK, Masker, Vaulted
from bringup.tasks.context import fail
from bringup.testinfra.declared import item_of
from bringup.testinfra.export import module_text
from bringup.inventory.vault import vault_from_options

from .h200_offline import check_plan, declare
from .test_vault import _indent, ansible_vault

PASSWORD = "never-shown-vault-pw"
#: sysctl key -> what the vault holds: 1 character, 2 characters, a common word, a small number (a substring of
#: the host's 131072), a long value that is also part of other text.
VALUES = {"net.core.somaxconn": "7", "net.core.busy_poll": "x7", "net.core.busy_read": "yes",
          "vm.swappiness": "13", "net.ipv4.tcp_fastopen": "tuned-fastopen"}


@pytest.fixture
def own_masker(monkeypatch):
    """The run's masker, put back as it was after the test: the short secrets learnt here stay here."""
    fresh = Masker()
    for name in ("_texts", "_short"):
        monkeypatch.setattr(MASK, name, type(getattr(fresh, name))(getattr(MASK, name)))
    return MASK


@pytest.fixture
def vaulted_sysctl(tmp_path, own_masker):
    """The host's ``sysctl`` variable read from a real inventory whose values are ``!vault`` texts."""
    (tmp_path / "pw").write_text(PASSWORD + "\n")
    lines = []
    for key, text in VALUES.items():
        out = ansible_vault(tmp_path, "encrypt_string", "--vault-password-file", "pw", text)
        lines.append(f"          {key}: !vault |\n{_indent(out.split('!vault |', 1)[1], 12)}")
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    h200-vm:\n      sysctl:\n" + "\n".join(lines) + "\n")
    inv = load_inventory(tmp_path / "hosts.yml", vault=vault_from_options([str(tmp_path / "pw")], environ={}))
    got = inv.host("h200-vm").vars["sysctl"]
    assert {k: str.__str__(v) for k, v in got.items()} == VALUES and all(isinstance(v, Vaulted) for v in got.values())
    return got


def _leaks(text: str) -> list[str]:
    """Each place ``text`` shows a vaulted value as the value of its key."""
    out = []
    for key, s in VALUES.items():
        for shown in (f"{key} = {s}", f"want {s}", f"→ {s}", f"'{s}'", f'"{s}"', f"{key}: {s}"):
            if shown in text:
                out.append(shown)
    return out


@pytest.mark.reliability(item=40, fault="vault values of 1 and 2 characters, a common word, a small number: plan "
                                        "values, diff, console, JSON report, audit lines and JUnit, testinfra export",
                         variants=5, checks=("secret never shown",))
def test_short_vault_values_never_in_plan_audit_report_or_export(vaulted_sysctl, tmp_path):
    role, resources = declare("sysctl", sysctl=vaulted_sysctl)
    # The host gets the text itself: the file the role writes holds it.
    conf = next(r for r in resources if r.id.startswith("file:"))
    assert b"net.core.somaxconn = 7\n" in conf.content and b"vm.swappiness = 13\n" in conf.content
    result = HostResult("h200-vm", resources=check_plan(role, resources))

    # The plan: each change's wanted value, and the file's diff.
    changed = {r.id: r for r in result.resources if r.status == "changed"}
    for key in VALUES:
        assert changed[f"sysctl:{key}"].changes[key][1] == HIDDEN, changed[f"sysctl:{key}"]
    # The file holds the secrets: no hash of it (a short secret is found from it); its diff, each line masked.
    conf_plan = changed["file:/etc/sysctl.d/90-trt-latency.conf"]
    diff = conf_plan.diff
    assert f"+net.core.somaxconn = {HIDDEN}" in diff and f"+vm.swappiness = {HIDDEN}" in diff, diff
    assert list(conf_plan.changes["content"]) == ["absent", HIDDEN]
    assert not _leaks(diff)

    # The console (--diff), the JSON report.
    buf = io.StringIO()
    print_host(result, Console(file=buf, width=200), check=True, diff=True)
    assert f"net.core.somaxconn: 4096 → {HIDDEN}" in buf.getvalue() and not _leaks(buf.getvalue())
    report = Report(tmp_path / "reports", command="plan", args={}, hosts=["h200-vm"])
    report.add(result)
    text = "".join(p.read_text() for p in (tmp_path / "reports").rglob("*.json"))
    assert HIDDEN in text and not _leaks(text)

    # The audit's lines and its JUnit file.
    found = audit.items(result)
    by_id = {i.item: i.message for i in found}
    assert by_id["sysctl:net.core.somaxconn"] == f"net.core.somaxconn is 4096, want {HIDDEN}"
    assert by_id["sysctl:vm.swappiness"] == f"vm.swappiness is 60, want {HIDDEN}"
    junit = ET.tostring(audit.junit_xml({"h200-vm": found}).getroot(), encoding="unicode")
    assert not _leaks(junit) and not _leaks("\n".join(by_id.values()))

    # testinfra's export: the values each test wants, and what the test compares them with.
    items = [item_of(r) for r in resources if r.kind == "sysctl"]
    assert {i["key"]: i["value"] for i in items if i["key"] in VALUES} == {k: HIDDEN for k in VALUES}
    module = module_text("h200-vm", "sysctl", items, "hosts.yml", "out")
    assert not _leaks(module)
    compile(module, "test_sysctl.py", "exec")


@pytest.mark.reliability(item=40, fault="short vault values in checklist lines (HTML, Markdown, JSON) and in error "
                                        "lines", variants=2, checks=("secret never shown", "one clear line"))
def test_short_vault_values_never_on_a_page_or_in_an_error(vaulted_sysctl):
    one, two = vaulted_sysctl["net.core.somaxconn"], vaulted_sysctl["net.core.busy_poll"]
    # A role's checklist line made of the inventory's value (an f-string: the type is gone by then).
    checks = [line("tuning", "somaxconn", "WARN", f"net.core.somaxconn is 4096, want {one}",
                   f"set net.core.somaxconn = {one}"),
              line("gpu", "GPUs", "PASS", "7 GPUs of 17, 8 NVLinks at 70 GB/s")]
    pages = (checklist.render_markdown("h200-vm", checks), checklist.render_json("h200-vm", checks),
             render_html("h200-vm", checks, ""))
    for page in pages:
        assert not _leaks(page) and f"want {HIDDEN}" in page
    # The price of the second net, paid only while a secret that short is known: a 7 standing alone in a line is
    # hidden even where the host said it; a 7 inside 17 or 70 is not.
    assert checks[1].seen == f"{HIDDEN} GPUs of 17, 8 NVLinks at 70 GB/s"

    # Error lines: a vars check quoting the value, and a role's line with the value formatted in.
    from bringup.inventory.vars import _shown

    assert _shown(two) == f"'{HIDDEN}'" and _shown([one]) == f"['{HIDDEN}']"
    said = fail(InputError(f"host h200-vm, role sysctl: net.core.busy_poll {two} is not a number")).message
    assert said == f"error: host h200-vm, role sysctl: net.core.busy_poll {HIDDEN} is not a number"
    assert str(two) == "x7" and f"{two}" == "x7"  # the text itself, for the host


def test_masker_hides_short_secrets_only_as_whole_values():
    m = Masker()
    m.add(Vaulted("1"))
    m.add("ab")
    # The output at large keeps its 1s: "1 changed" is not a secret.
    assert m.mask("1 changed, 0 failed; ab") == "1 changed, 0 failed; ab"
    assert m.mask(Vaulted("anything")) == HIDDEN
    assert m.mask_value("1") == HIDDEN and m.mask_value("10") == "10" and m.mask_value(Vaulted("zz")) == HIDDEN
    assert m.mask_lines("+vm.x = 1\n+vm.y = 10\n+a.b = 1.5\n-ab\n") == f"+vm.x = {HIDDEN}\n+vm.y = 10\n+a.b = 1.5\n-{HIDDEN}\n"
    assert m.mask_obj({"changes": {"k": ("4", "1")}, "diff": "+k = ab"}) == {
        "changes": {"k": ("4", HIDDEN)}, "diff": f"+k = {HIDDEN}"}


def test_a_json_file_holding_a_short_secret_is_exported_by_its_hash_only(own_masker):
    from bringup.resources.jsonfile import JsonFile
    from bringup.testinfra.declared import values

    own_masker.add(Vaulted("x7"))
    r = JsonFile("/etc/app.json", {"auth": {"pin": Vaulted("x7")}, "level": 3})
    got = values(r)
    assert "keys" not in got and got["keys_sha256"] == HIDDEN  # not even its hash: a 2-character pin is found from it
    assert values(JsonFile("/etc/app.json", {"level": 3}))["keys"] == {"level": 3}


@pytest.mark.reliability(item=40, fault="a 1-character vault value through the commands: plan (console, --diff, "
                                        "reports/*.json), audit (console, JSON, JUnit), checklist pages",
                         variants=3, checks=("secret never shown", "nothing touched", "report written"))
def test_short_vault_value_never_shown_by_the_commands(tmp_path):
    """The second channel: the real commands in check mode on this machine (`ansible_connection: local`; plan and
    audit change nothing), their console and every file they write."""
    from .test_vault import _invoke

    (tmp_path / "pw").write_text(PASSWORD + "\n")
    out = ansible_vault(tmp_path, "encrypt_string", "--vault-password-file", "pw", "7")
    (tmp_path / "hosts").write_text("all:\n  vars: {gpu_profile: cpu}\n  hosts:\n    h1:\n      ansible_connection: local\n"
                                    f"      sysctl:\n        net.core.somaxconn: !vault |\n"
                                    f"{_indent(out.split('!vault |', 1)[1], 10)}\n")
    flags = ["--host", "h1", "-i", "hosts", "--vault-password-file", "pw"]
    runs = [_invoke(tmp_path, "plan", "--roles", "sysctl", *flags),
            _invoke(tmp_path, "audit", "--roles", "sysctl", *flags),
            _invoke(tmp_path, "checklist", "--roles", "sysctl", "--out", "pages", *flags)]
    said = "".join(r.stdout + r.stderr for r in runs)
    assert runs[0].returncode == 0 and runs[1].returncode in (0, 2) and runs[2].returncode == 0, said
    written = [p for d in ("reports", "pages") for p in (tmp_path / d).rglob("*") if p.is_file()]
    assert {p.suffix for p in written} >= {".json", ".xml", ".html", ".md"}, written
    said += "".join(p.read_text() for p in written)
    assert f"content: absent → {HIDDEN}" in said, said  # the file the role writes: no hash of it
    from pathlib import Path

    here = Path("/proc/sys/net/core/somaxconn").read_text().strip()
    if here != "7":  # the audit's line, where this machine's own value differs
        assert f"net.core.somaxconn is {here}, want {HIDDEN}" in said, said
    for shown in ("somaxconn = 7", "want 7", "→ 7", "somaxconn: 7"):
        assert shown not in said, shown


def test_numbers_of_a_file_encrypted_whole_are_masked_too(own_masker):
    """A whole vaulted file's `db_port: 5433` stays a number for the role, and its text is a secret's."""
    from bringup.inventory.vault import Vault

    got = Vault(masker=own_masker).hide({"db_port": 5433, "replicas": 3, "tls": True, "name": "x7"})
    assert got == {"db_port": 5433, "replicas": 3, "tls": True, "name": "x7"} and isinstance(got["name"], Vaulted)
    assert own_masker.mask("connect to db:5433") == f"connect to db:{HIDDEN}"
    assert own_masker.mask_lines("replicas is 1, want 3") == f"replicas is 1, want {HIDDEN}"
    assert own_masker.mask_lines("tls: True") == "tls: True"


def _vaulted(tmp_path, text: str, indent: int) -> str:
    out = ansible_vault(tmp_path, "encrypt_string", "--vault-password-file", "pw", text)
    return "!vault |\n" + _indent(out.split("!vault |", 1)[1], indent)


@pytest.mark.reliability(item=40, fault="a vaulted ansible_user of 2 characters in `invoke hosts`; vaulted ssh "
                                        "arguments in the error lines that quote their parts (-o Q7, a vaulted "
                                        "Port, a vaulted HostName); a vault value with a newline quoted by repr",
                         variants=5, checks=("secret never shown", "one clear line"))
def test_vaulted_connection_values_never_shown_by_hosts_or_ssh_errors(tmp_path, own_masker):
    from bringup.errors import InventoryError
    from bringup.ssh.sshconfig import route
    from .test_vault import _invoke

    (tmp_path / "pw").write_text(PASSWORD + "\n")
    (tmp_path / "hosts").write_text(
        "all:\n  hosts:\n"
        f"    h1:\n      ansible_host: 10.0.0.1\n      ansible_user: {_vaulted(tmp_path, 'Q7', 8)}\n"
        f"    h2:\n      ansible_host: 10.0.0.2\n      ansible_ssh_common_args: {_vaulted(tmp_path, '-o Q7', 8)}\n"
        f"    h3:\n      ansible_host: 10.0.0.3\n      ansible_ssh_common_args: "
        f"{_vaulted(tmp_path, '-o Port=longersecretvalue', 8)}\n"
        f"    h4:\n      ansible_host: 10.0.0.4\n      ansible_ssh_common_args: "
        f"{_vaulted(tmp_path, '-o HostName=Q7z -o Port=9', 8)}\n")
    r = _invoke(tmp_path, "hosts", "-i", "hosts", "--vault-password-file", "pw")
    assert r.returncode == 0 and "h1" in r.stdout and f"{HIDDEN}@10.0.0.1" in r.stdout, r.stdout + r.stderr
    assert "Q7" not in r.stdout + r.stderr, r.stdout
    inv = load_inventory(tmp_path / "hosts", vault=vault_from_options([str(tmp_path / "pw")], environ={}))
    for name in ("h2", "h3"):
        with pytest.raises(InventoryError) as e:
            route(inv.host(name), default_config=str(tmp_path / "none"))
        line_ = str(e.value)
        assert "Q7" not in line_ and "longersecretvalue" not in line_ and HIDDEN in line_, line_
    # A route that holds: the vaulted HostName is hidden wherever the endpoint names itself.
    target = route(inv.host("h4"), default_config=str(tmp_path / "none")).target
    assert target.hostname == "Q7z" and target.port == 9 and "Q7z" not in target.where, target.where
    # A secret holding a newline, quoted by repr in a message, is masked in its quoted form too.
    MASK.add("line-one\nline-two")
    assert "line-one" not in MASK.mask(f"got {'line-one' + chr(10) + 'line-two'!r}")


@pytest.mark.reliability(item=40, fault="a vaulted short ansible_port / ansible_user in a failed login's line",
                         variants=4, checks=("secret never shown",))
def test_a_failed_logins_line_never_shows_a_vaulted_port_user_or_address():
    """Found by a hostile-input review: paramiko's own words ("Unable to connect to port 22 on ...") and
    bringup's ("port 99 of ...", "authentication to ab@...") showed a vault's port and user, however short."""
    import paramiko

    from bringup.ssh.jumps import Way, unreachable
    from bringup.ssh.sshconfig import Endpoint

    ep = Endpoint(name="h1", hostname=Vaulted("10.1.2.3"), port=22, user=Vaulted("ab"),
                  hidden=frozenset({"port", "hostname", "user"}))
    way = Way(known_hosts=("/nonexistent/kh",), accept_new=False, connect_timeout=3, keepalive=0)
    errors = [paramiko.ssh_exception.NoValidConnectionsError({("10.1.2.3", 22): OSError(111, "refused")}),
              paramiko.SSHException("Error reading SSH protocol banner"),
              paramiko.AuthenticationException("Authentication failed."),
              OSError(111, "Connection refused to 10.1.2.3 port 22")]
    for e in errors:
        said = str(unreachable(e, ep=ep, way=way, host="h1"))
        assert "22" not in said and "10.1.2.3" not in said and "ab@" not in said, said
        assert HIDDEN in said, said
    # Values a vault did not hold are shown as they are.
    plain = Endpoint(name="h1", hostname="127.0.0.1", port=2222, user="root")
    assert "127.0.0.1:2222" in str(unreachable(OSError(111, "refused"), ep=plain, way=way, host="h1"))


def _vault_arg(tmp_path, text: str, indent: int) -> str:
    """``text`` (which may open with ``-``, an ssh option) as a ``!vault`` value."""
    out = ansible_vault(tmp_path, "encrypt_string", "--vault-password-file", "pw", "--", text)
    return "!vault |\n" + _indent(out.split("!vault |", 1)[1], indent)


@pytest.mark.reliability(item=40, fault="jump hosts a vault named: !vault \"-J ju@127.0.0.1:PORT\", -J rendered from "
                                        "a vaulted {{ jp }}, !vault \"-o ProxyJump=127.0.0.1:PORT\" (the jump host's "
                                        "address, port and user were shown when its login failed)", variants=3,
                         checks=("secret never shown", "one clear line"))
def test_a_jump_host_a_vault_named_is_never_shown(tmp_path, own_masker):
    import socket
    import threading

    from bringup.errors import Unreachable
    from bringup.ssh.jumps import Jumps, Way
    from bringup.ssh.sshconfig import route

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def answer() -> None:  # a port that answers, but not SSH: paramiko's banner error names port and address
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.sendall(b"not ssh at all\r\n" * 4)
            conn.close()

    threading.Thread(target=answer, daemon=True).start()
    (tmp_path / "pw").write_text(PASSWORD + "\n")
    (tmp_path / "hosts").write_text(
        "all:\n  hosts:\n"
        f"    h1:\n      ansible_host: 10.0.0.1\n      ssh_connect_timeout: 5\n"
        f"      ansible_ssh_common_args: {_vault_arg(tmp_path, f'-J ju@127.0.0.1:{port}', 8)}\n"
        f"    h2:\n      ansible_host: 10.0.0.2\n      ssh_connect_timeout: 5\n      jp: {_vault_arg(tmp_path, str(port), 8)}\n"
        "      ansible_ssh_common_args: '-J ju@127.0.0.1:{{ jp }}'\n"
        f"    h3:\n      ansible_host: 10.0.0.3\n      ssh_connect_timeout: 5\n"
        f"      ansible_ssh_common_args: {_vault_arg(tmp_path, f'-o ProxyJump=127.0.0.1:{port}', 8)}\n")
    inv = load_inventory(tmp_path / "hosts", vault=vault_from_options([str(tmp_path / "pw")], environ={}))
    try:
        for name in ("h1", "h2", "h3"):
            r = route(inv.host(name), default_config=str(tmp_path / "none"))
            assert r.target.jumps and r.target.jumps[0].port == port and r.target.jumps[0].hidden, name
            way = Way(known_hosts=(str(tmp_path / "kh"),), accept_new=False, connect_timeout=5, keepalive=0)
            with pytest.raises(Unreachable) as e:
                Jumps().reach(r.target, way, name)
            said = str(e.value)
            assert "\n" not in said and HIDDEN in said and "not SSH" in said, said
            assert "127.0.0.1" not in said and str(port) not in said and "ju@" not in said, said
    finally:
        server.close()


@pytest.mark.reliability(item=40, fault="a vaulted ssh_known_hosts / UserKnownHostsFile path in an unknown or changed "
                                        "host key's line and in a refused known_hosts file's line", variants=3,
                         checks=("secret never shown", "one clear line"))
def test_a_known_hosts_path_a_vault_gave_is_never_shown(tmp_path, own_masker):
    import os

    import paramiko

    from bringup.errors import BringupError
    from bringup.ssh.jumps import Way, unreachable
    from bringup.ssh.sshconfig import Endpoint, route

    fifo = tmp_path / "kh-secretname"
    (tmp_path / "pw").write_text(PASSWORD + "\n")
    (tmp_path / "hosts").write_text(
        "all:\n  hosts:\n"
        f"    h1:\n      ansible_host: 127.0.0.1\n      ssh_known_hosts: {_vault_arg(tmp_path, str(fifo), 8)}\n"
        f"    h2:\n      ansible_host: 127.0.0.1\n      ansible_ssh_common_args: "
        f"{_vault_arg(tmp_path, f'-o UserKnownHostsFile={fifo}', 8)}\n")
    inv = load_inventory(tmp_path / "hosts", vault=vault_from_options([str(tmp_path / "pw")], environ={}))
    for name in ("h1", "h2"):
        r = route(inv.host(name), default_config=str(tmp_path / "none"))  # not there yet: bringup would make it
        assert str.__str__(r.known_hosts[0]) == str(fifo), r.known_hosts
        os.mkfifo(fifo)  # refused by the input check (the route), and again by the login
        with pytest.raises(BringupError) as e:
            route(inv.host(name), default_config=str(tmp_path / "none"))
        lines = [str(e.value)]
        way = Way(known_hosts=r.known_hosts, accept_new=False, connect_timeout=3, keepalive=0)
        with pytest.raises(BringupError) as e:
            way.prepare(paramiko.SSHClient())
        lines.append(str(e.value))
        fifo.unlink()
        ep = Endpoint(name="h1", hostname="127.0.0.1", port=98, user="root")
        lines.append(str(unreachable(paramiko.SSHException("Server '[127.0.0.1]:98' not found in known_hosts"),
                                     ep=ep, way=way, host=name)))
        for said in lines:
            assert "secretname" not in said and "the known_hosts file (vaulted)" in said and "\n" not in said, said


def _sealed_value(text: str, indent: int) -> str:
    """``text`` as a ``!vault`` value of the password :data:`PASSWORD` (bringup's own envelope: no ansible run)."""
    from .test_vault import _encrypt
    return "!vault |\n" + _indent(_encrypt(PASSWORD.encode(), text), indent)


@pytest.mark.parametrize("config, said", [
    ("~/corp-S3CRET-bastion.cfg", "-F: ssh config file ******** does not exist; fix the path (or give -F none)"),
    ("/dev/zero", "-F: ssh config file ******** is not a regular file (a folder, a pipe or a device); name the "
                  "config file itself"),
    ("{tmp}/S3CRET-passwd", "-F: ssh config ******** line 1 is not 'Keyword value': is this an ssh config file? "
                            "Fix the path or the line"),
    ("{tmp}/S3CRET-include.cfg", "ssh config ******** sets include for 10.0.0.1: paramiko's SSHConfig does not "
                                 "read Include; name the included file with ssh_config or -F, or copy its hosts "
                                 "into the file"),
    ("{tmp}/S3CRET-match.cfg", "ssh config ******** cannot be read for 10.0.0.1: ConfigParseError; check the "
                               "file's syntax"),
])
def test_a_config_file_a_vault_named_with_dash_f_is_never_shown(tmp_path, own_masker, config, said):
    """Found by a hostile-input review: `-F PATH` in vaulted ssh arguments lost its masking (the path, ~ expanded,
    was printed: `ssh config file /home/u/corp-S3CRET-bastion.cfg does not exist`); ssh_config vaulted alike."""
    from bringup.errors import InventoryError
    from bringup.ssh.sshconfig import route

    (tmp_path / "S3CRET-passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    (tmp_path / "S3CRET-include.cfg").write_text("Include /etc/S3CRET/extra\n")
    (tmp_path / "S3CRET-match.cfg").write_text("Match foo\n")
    (tmp_path / "pw").write_text(PASSWORD + "\n")
    path = config.format(tmp=tmp_path)
    (tmp_path / "hosts").write_text(
        "all:\n  hosts:\n"
        f"    h1:\n      ansible_host: 10.0.0.1\n      ansible_ssh_common_args: {_sealed_value(f'-F {path}', 8)}\n"
        f"    h2:\n      ansible_host: 10.0.0.1\n      ssh_config: {_sealed_value(path, 8)}\n")
    inv = load_inventory(tmp_path / "hosts", vault=vault_from_options([str(tmp_path / "pw")], environ={}))
    for name, var in (("h1", "ansible_ssh_common_args -F"), ("h2", "ssh_config")):
        with pytest.raises(InventoryError) as e:
            route(inv.host(name), default_config=str(tmp_path / "none"))
        expected = said.replace("-F:", f"{var}:") if said.startswith("-F:") else said
        assert str(e.value) == f"host {name!r}: {expected}", str(e.value)


@pytest.mark.reliability(item=40, fault="a vaulted ProxyCommand's words in the proxy's own error (sh: exec: PROGRAM: "
                                        "not found), on the console and in the report", variants=1,
                         checks=("secret never shown", "one clear line"))
def test_the_words_of_vaulted_ssh_arguments_are_masked_in_what_they_run_print(tmp_path, own_masker, monkeypatch):
    """Found by a hostile-input review: the words of vaulted ssh arguments were hidden where bringup printed them
    itself, but never taught to the run's masker, so the ProxyCommand's own stderr showed its program and token."""
    from bringup.errors import Unreachable
    from bringup.ssh.connection import connect

    args = '-o ProxyCommand="/opt/S3CRET-tool/connect --token S3CRETTOKEN %h %p" -F ~/corp-S3CRET.cfg -l ab'
    (tmp_path / "corp-S3CRET.cfg").write_text("Host *\n  ConnectTimeout 5\n")
    (tmp_path / "pw").write_text(PASSWORD + "\n")
    (tmp_path / "hosts").write_text(f"all:\n  hosts:\n    h1:\n      ansible_host: 127.0.0.1\n      ansible_port: 9\n"
                                    f"      ansible_ssh_common_args: {_sealed_value(args, 8)}\n")
    monkeypatch.setenv("HOME", str(tmp_path))
    inv = load_inventory(tmp_path / "hosts", vault=vault_from_options([str(tmp_path / "pw")], environ={}))
    with pytest.raises(Unreachable) as e:
        connect(inv.host("h1"))
    said = str(e.value)
    assert "ProxyCommand for" in said and "not found" in said, said
    for shown in (own_masker.mask(said), json.dumps(own_masker.mask_obj({"error": said}))):
        assert "S3CRET" not in shown and HIDDEN in shown, shown
    # Each word, however the output cuts it out (the token alone, the config's path expanded or not); not ssh's
    # own words, options and tokens (the run's other lines keep them).
    for word in ("S3CRETTOKEN", "/opt/S3CRET-tool/connect", f"{tmp_path}/corp-S3CRET.cfg", "~/corp-S3CRET.cfg"):
        assert own_masker.mask(f"x {word} y") == f"x {HIDDEN} y", word
    assert own_masker.mask_value("ab") == HIDDEN and own_masker.mask("a tab is ab-normal") == "a tab is ab-normal"
    for word in ("ProxyCommand", "--token", "%h", "%p", "-F", "-o"):
        assert own_masker.mask_lines(f"x {word} y") == f"x {word} y", word


@pytest.mark.reliability(item=40, fault="the values of vaulted ssh arguments' options of behaviour (ControlMaster=auto, "
                                        "User=root, UserKnownHostsFile=/dev/null) taught to the run's masker: 'auto', "
                                        "'root', '/dev/null' hidden in every line of the run", variants=2,
                         checks=("secret never shown",))
def test_only_the_secret_bearing_words_of_vaulted_ssh_arguments_are_masked(tmp_path, own_masker):
    """remember_words taught every word of the arguments: `-C -o ControlMaster=auto -o User=root -o
    UserKnownHostsFile=/dev/null` made 'default runtime auto; ran as root; 2>/dev/null' print as '********' thrice.
    Only what may be secret is learnt: a ProxyCommand's words, HostName and ProxyJump hosts, a user that is no common
    account, the paths of keys, config and known_hosts files."""
    from bringup.ssh.sshargs import parse_ssh_args

    plain = "default runtime auto; ran as root; 2>/dev/null; ControlPersist 600s; StrictHostKeyChecking no; 30 s; 15"
    ordinary = ("-C -o ControlMaster=auto -o ControlPersist=600s -o User=root -o UserKnownHostsFile=/dev/null -o "
                "StrictHostKeyChecking=no -o ConnectTimeout=30 -o ServerAliveInterval=15 -o Compression=yes "
                "-o LogLevel=ERROR -p 2222")
    parse_ssh_args(Vaulted(ordinary), "host 'h1': ansible_ssh_common_args")
    assert own_masker.mask(plain) == plain and own_masker.mask("ERROR: port 2222") == "ERROR: port 2222"
    secret = ('-o ProxyCommand="/opt/S3CRET-tool/connect --token=S3CRETTOKEN %h %p" -J ops-S3CRET@bast-S3CRET.corp '
              "-o HostName=10.77.66.55 -i ~/id_S3CRET -o User=deploy-S3CRET -o UserKnownHostsFile='~/kh-S3CRET "
              "/dev/null' -o ControlMaster=auto")
    parse_ssh_args(Vaulted(secret), "host 'h1': ansible_ssh_common_args")
    for word in ("/opt/S3CRET-tool/connect", "S3CRETTOKEN", "ops-S3CRET", "bast-S3CRET.corp", "10.77.66.55",
                 "~/id_S3CRET", os.path.expanduser("~/id_S3CRET"), "deploy-S3CRET", "~/kh-S3CRET"):
        assert own_masker.mask(f"sh: {word}: not found") == f"sh: {HIDDEN}: not found", word
    assert own_masker.mask(plain) == plain
