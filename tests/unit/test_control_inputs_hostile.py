"""Issue 40 items 1, 3 and 4 on the control machine's inputs (inventories, ssh_config, vault, secret references),
tried through the real ``bringup`` program: every bad input is one line and exit 1 (never a traceback), and no
decrypted value shows, whatever its length."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bringup.userfile import home

REPO = Path(__file__).resolve().parents[2]


def bringup(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "import sys; from bringup.entry import main; main()", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=120, stdin=subprocess.DEVNULL,
                          env=dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="200"))


def one_line_refusal(p: subprocess.CompletedProcess, *words: str) -> str:
    out = p.stdout + p.stderr
    assert p.returncode == 1, out
    assert "Traceback" not in out and "Error:" not in out.replace("error:", ""), out
    lines = [x for x in out.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), out
    for w in words:
        assert w in lines[0], out
    return lines[0]


# --- a path starting with ~ of a user this machine does not know ------------------------------------------------

HOSTS = "all:\n  hosts:\n    h1:\n      ansible_host: 127.0.0.1\n      ansible_port: 9\n"

#: name -> (extra lines of the host, the command's flags after the inventory, a word the line must hold).  Each
#: was a Python traceback: pathlib's expanduser() raises RuntimeError for ~nouser, os.path.expanduser ValueError
#: for a NUL byte in the user's name.
UNKNOWN_HOME = {
    "secret file ~nouser": ('      db_password: {bringup_secret: {file: "~nouser-x9/pw"}}\n', ("hosts",),
                            "secret file ~nouser-x9/pw does not exist"),
    "--vault-password-file ~nouser": ("", ("hosts", "--vault-password-file", "~nouser-x9/pw"),
                                      "--vault-password-file ~nouser-x9/pw: no such file"),
    "--vault-id label@~nouser": ("", ("hosts", "--vault-id", "prod@~nouser-x9/pw"),
                                 "--vault-id prod@~nouser-x9/pw: no such file"),
    "-F ~user with a NUL byte": ('      ansible_ssh_common_args: "-F ~no\\0user/cfg"\n', ("plan", "--host", "h1"),
                                 "a path holding a NUL byte"),
    "-i ~nouser": (None, ("hosts", "--inventory", "~nouser-x9/hosts"), "no such inventory file"),
}


@pytest.mark.reliability(item=40, fault="control inputs: a path of ~user this machine does not know (secret file, "
                                        "vault password file, --vault-id, -F, -i)", variants=len(UNKNOWN_HOME),
                         checks=("one clear line", "nothing touched"))
@pytest.mark.parametrize("case", sorted(UNKNOWN_HOME))
def test_a_home_of_an_unknown_user_is_one_line(case, tmp_path):
    extra, args, want = UNKNOWN_HOME[case]
    (tmp_path / "hosts.yml").write_text(HOSTS + (extra or ""))
    if extra is None:
        p = bringup(*args, cwd=tmp_path)
    else:
        p = bringup(args[0], "--inventory", str(tmp_path / "hosts.yml"), *args[1:], cwd=tmp_path)
    one_line_refusal(p, want)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["hosts.yml"]  # nothing written, no report


@pytest.mark.parametrize("text", ["~nouser-x9/k", "~no\x00user/k", "~\x00", "~", "~/k", "/abs/~x", "rel"])
def test_home_never_raises_and_expands_what_it_can(text):
    got = home(text)
    assert isinstance(got, str)
    if text in ("~", "~/k"):
        assert got == os.path.expanduser(text)
    elif text.startswith("~") and text.split("/")[0] not in ("~",):
        assert got == text


# --- a short vaulted value in the hosts listing and a checklist line's name ------------------------------------

FACTS = REPO / "tests" / "fixtures" / "hosts" / "h200-vm" / "facts-raw.json"


def vaulted_inventory(tmp_path: Path, host: str, values: dict[str, str]) -> tuple[Path, Path]:
    """hosts.yml with each of ``values`` a ``!vault`` text of ansible-core's own ansible-vault; (inventory, pw)."""
    from .test_vault import _indent, ansible_vault

    (tmp_path / "pw").write_text("control-inputs-pw\n")
    body = f"all:\n  hosts:\n    {host}:\n      ansible_host: 127.0.0.1\n      ansible_port: 9\n"
    for name, text in values.items():
        out = ansible_vault(tmp_path, "encrypt_string", "--vault-password-file", "pw", text)
        body += f"      {name}: !vault |\n{_indent(out.split('!vault |', 1)[1], 8)}\n"
    (tmp_path / "hosts.yml").write_text(body)
    return tmp_path / "hosts.yml", tmp_path / "pw"


@pytest.mark.reliability(item=40, fault="vault: a short vaulted gpu_profile or ansible_connection in the hosts "
                                        "listing's columns", variants=2, checks=("secret never shown",))
def test_the_hosts_listing_never_shows_a_short_vaulted_column(tmp_path):
    """The listing's gpu_profile and connection columns printed the vault's text ('l4', 'ssh'): the console's
    masker hides only texts of 4 characters or more anywhere, and these cells were no whole value it saw."""
    inv, pw = vaulted_inventory(tmp_path, "gpu01", {"gpu_profile": "l4", "ansible_connection": "ssh"})
    p = bringup("hosts", "--inventory", str(inv), "--vault-password-file", str(pw), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    row = [x for x in p.stdout.splitlines() if x.startswith(" gpu01") or x.startswith("gpu01")]
    assert len(row) == 1, p.stdout
    cells = row[0].split()
    assert "l4" not in cells and "ssh" not in cells and cells[-2:] == ["********", "********"], p.stdout


@pytest.mark.reliability(item=40, fault="vault: a short vaulted value in a checklist line's name (console, "
                                        "Markdown, HTML, JSON)", variants=4, checks=("secret never shown",))
def test_a_vaulted_profile_never_shows_in_a_checklist_line_name(tmp_path):
    """'GPU class matches gpu_profile l4' and 'GPU profile l4' named a vaulted profile on every page: the line's
    seen and fix texts were masked, its name and subject were not."""
    inv, pw = vaulted_inventory(tmp_path, "h200-vm", {"gpu_profile": "l4"})
    out = tmp_path / "pages"
    p = bringup("checklist", "--inventory", str(inv), "--vault-password-file", str(pw), "--host", "h200-vm",
                "--facts", str(FACTS), "--out", str(out), cwd=tmp_path)
    assert p.returncode in (0, 2) and "Traceback" not in p.stderr, p.stdout + p.stderr
    texts = {"console": p.stdout + p.stderr, **{f.name: f.read_text() for f in out.iterdir()}}
    assert sorted(texts) == ["console", "h200-vm.html", "h200-vm.json", "h200-vm.md"]
    for where, text in texts.items():
        assert "gpu_profile ********" in text, where
        for shown in ("profile l4", "l4 ", " l4", "l4<", ">l4", '"l4"', "'l4'"):
            assert shown not in text, (where, shown)


@pytest.mark.reliability(item=40, fault="vault: a short vaulted value ending a sentence or a key's path", variants=4,
                         checks=("secret never shown",))
def test_a_short_secret_standing_alone_before_a_full_stop_or_after_a_key_path_is_masked():
    from bringup.secrets import HIDDEN, Masker

    m = Masker()
    for s in ("7", "l4", "yes"):
        m.add(s)
    assert m.mask_lines("sysctl value is 7.") == f"sysctl value is {HIDDEN}."
    assert m.mask_lines("pin it under gpu_profiles.l4") == f"pin it under gpu_profiles.{HIDDEN}"
    assert m.mask_lines("answer: yes.") == f"answer: {HIDDEN}."
    # Never a digit of another number, nor a word's part.
    assert m.mask_lines("1.7 7.5 4096 v7 l4x l4.x yes_no") == "1.7 7.5 4096 v7 l4x l4.x yes_no"


@pytest.mark.reliability(item=40, fault="vault: a short vaulted value holding a newline, quoted by an error's repr()",
                         variants=3, checks=("one clear line", "secret never shown"))
@pytest.mark.parametrize("secret", ["q\nq", "\x1b", "é\n"])
def test_a_short_vaulted_value_with_a_newline_is_masked_in_an_error_that_quotes_it(secret, tmp_path):
    """A vaulted item of a sysctl list (``[!vault 'q\\nq', 1]``) was joined into plain text and the error quoted it
    with repr(): 'q\\nq 1'.  The masker knew a short secret only as its raw text, never as repr() writes it."""
    from .test_vault import _indent, ansible_vault

    (tmp_path / "pw").write_text("control-inputs-pw\n")
    out = ansible_vault(tmp_path, "encrypt_string", "--vault-password-file", "pw", "--", secret)
    (tmp_path / "hosts.yml").write_text(
        HOSTS + "      sysctl:\n        net.core.somaxconn:\n          - !vault |\n"
        + _indent(out.split("!vault |", 1)[1], 14) + "\n          - 1\n")
    p = bringup("plan", "--inventory", str(tmp_path / "hosts.yml"), "--vault-password-file", str(tmp_path / "pw"),
                "--host", "h1", cwd=tmp_path)
    line = one_line_refusal(p, "sysctl net.core.somaxconn: value '******** 1'")
    assert repr(secret)[1:-1] not in line.replace("********", "")


@pytest.mark.reliability(item=40, fault="control inputs: an inventory script or vault password program ended by a "
                                        "signal", variants=2, checks=("one clear line",))
@pytest.mark.parametrize("what", ["inventory script", "vault password program"])
def test_a_child_ended_by_a_signal_is_named_by_its_signal(what, tmp_path):
    """'the inventory script --list exited with -9', 'the password program exited -9': Python's negative return
    code, which no program exits with, instead of the signal that ended it."""
    prog = tmp_path / "prog.sh"
    prog.write_text("#!/bin/sh\necho pw-or-json\nkill -KILL $$\n")
    prog.chmod(0o700)
    (tmp_path / "hosts.yml").write_text(HOSTS)
    if what == "inventory script":
        p = bringup("hosts", "--inventory", str(prog), cwd=tmp_path)
    else:
        p = bringup("hosts", "--inventory", str(tmp_path / "hosts.yml"), "--vault-password-file", str(prog),
                    cwd=tmp_path)
    line = one_line_refusal(p, "was killed by SIGKILL")
    assert "-9" not in line


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


@pytest.mark.reliability(item=40, fault="ssh: a ProxyCommand that floods bytes with no SSH banner (cat /dev/zero)",
                         variants=1, checks=("no hang", "nothing left running", "one clear line"))
def test_a_flooding_proxy_command_is_ended_with_its_failed_handshake(tmp_path):
    """A handshake that timed out left paramiko's transport running: Fabric closes only a connection that logged
    in, so the ProxyCommand kept flooding and paramiko's thread kept reading it (a CPU spun, the GIL held: 15 s of
    a 10 s deadline) until bringup exited."""
    import time

    from bringup.errors import Unreachable
    from bringup.inventory.hosts import load_inventory
    from bringup.ssh.connection import connect

    pidfile = tmp_path / "pid"
    args = f"-o ProxyCommand='sh -c \"echo $$ > {pidfile}; exec cat /dev/zero\"'"
    (tmp_path / "hosts.yml").write_text(
        HOSTS + f"      ssh_connect_timeout: 2\n      ssh_known_hosts: {tmp_path / 'kh'}\n"
        f"      ansible_ssh_common_args: {json.dumps(args)}\n")
    host = load_inventory(tmp_path / "hosts.yml").host("h1")
    t0 = time.monotonic()
    with pytest.raises(Unreachable) as e:
        connect(host)
    took = time.monotonic() - t0
    said = str(e.value)
    # Since the banner read is capped (jumps.BANNER_MAX): at once, not at the 2 s deadline.
    assert "\n" not in said and "256 KiB without an SSH version line" in said and took < 8, (took, said)
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 3
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(pid), "the ProxyCommand still runs after its connection failed"


@pytest.mark.reliability(item=40, fault="control inputs: a script or password program whose background child holds "
                                        "stdout, its zombie not yet reaped", variants=1, checks=("no hang",))
def test_a_child_left_holding_stdout_is_answered_without_waiting_for_its_zombie_to_be_reaped():
    """Ending what a child left in its group waited while the group existed, zombies included: under an init that
    reaps late (this container's PID 1; here the test process itself, made the subreaper), an inventory script or
    vault password program leaving `(sleep 300 &)` cost the whole end grace (1 s for capture's callers) after
    its answer, though nothing ran any more."""
    import time

    from bringup.child import capture
    from bringup.orphans import _subreaper, become_subreaper, kill_orphans

    assert become_subreaper()
    try:
        t0 = time.monotonic()
        done = capture(["sh", "-c", "(sleep 300 &); echo ok"], timeout=30, cap=1024, term_grace=5.0)
        took = time.monotonic() - t0
    finally:
        kill_orphans()
        _subreaper(False)
    assert (done.rc, done.out, done.why) == (0, b"ok\n", None)
    assert took < 2.5, took


@pytest.mark.reliability(item=40, fault="vault: a short vaulted value that is a dotfile's or an extension's name "
                                        "('ssh' in ~/.ssh), or a list number before a full stop ('1' in 'step 1. "
                                        "then')", variants=6, checks=("secret never shown",))
def test_a_short_secret_after_a_path_dot_or_a_list_number_before_a_full_stop_is_left_clear():
    # Before: with a vaulted 'ssh', 'key at ~/.ssh/id_ed25519' read '~/.********/id_ed25519'; with '1', 'step 1. then'
    # and '1. item' lost their numbers.
    from bringup.secrets import HIDDEN, Masker

    m = Masker()
    for s in ("ssh", "1", "gz", "l4"):
        m.add(s)
    for text in ("key at ~/.ssh/id_ed25519", "see /etc/.ssh and .ssh/config", "archive.tar .gz", "step 1. then",
                 "1. item\n2. other", "~/.gz and dir/.l4"):
        assert m.mask_lines(text) == text, text
    # Still masked: the value after a key's path (a dot after a word: 'x.gz' is one too, it cannot be told from
    # it), standing alone, and a number ending its line.
    assert m.mask_lines("a file x.gz") == f"a file x.{HIDDEN}"
    assert m.mask_lines("pin it under gpu_profiles.l4") == f"pin it under gpu_profiles.{HIDDEN}"
    assert m.mask_lines("connection is ssh.") == f"connection is {HIDDEN}."
    assert m.mask_lines("count is 1.\nnext") == f"count is {HIDDEN}.\nnext"
    assert m.mask_lines("value = 1") == f"value = {HIDDEN}"


@pytest.mark.reliability(item=40, fault="vault: a file encrypted whole registers '1' and 'docker' as secrets: "
                                        "checklist line names and subjects ('GPU 1 ...', 'mlx5_0 port 1') masked",
                         variants=3, checks=("one clear line",))
def test_a_short_secret_never_masks_a_check_name_or_its_device():
    # Before: every Check masked its name and subject: 'GPU ******** ECC volatile errors', subject 'GPU ********'
    # (a table heading of its own), 'mlx5_0 port ********', '******** daemon running'; saved lines matched by name
    # stopped matching.
    from bringup.checks import line
    from bringup.secrets import HIDDEN, MASK

    for s in ("1", "docker"):
        MASK.add(s)
    for name, subject in (("GPU 1 ECC volatile errors", "GPU 1"), ("port rate", "mlx5_0 port 1"),
                          ("docker daemon running", "")):
        c = line("health", name, "PASS", "errors: 1, docker", "restart docker", subject=subject)
        assert (c.name, c.subject) == (name, subject)
        # Its seen and fix texts still go through the masker.
        assert (c.seen, c.fix) == (f"errors: {HIDDEN}, {HIDDEN}", f"restart {HIDDEN}")


# --- a login's bounds, as ssh's: the connect timeout to the key exchange, then authentication's own ---------------

class _StallingAuth:
    """A paramiko server on 127.0.0.1 whose authentication never answers (sshd's PAM or user lookup frozen), or,
    given ``delay``, answers after that many seconds (op / pw-x logs in)."""

    def __init__(self, delay: "float | None" = None, login: tuple = ("op", "pw-x")) -> None:
        import socket
        import threading

        import paramiko

        self.release = threading.Event()
        release = self.release

        class Server(paramiko.ServerInterface):
            def get_allowed_auths(self, username):
                return "password"

            def check_auth_password(self, username, password):
                if delay is None:
                    release.wait(60)
                    return paramiko.AUTH_FAILED
                release.wait(delay)
                return paramiko.AUTH_SUCCESSFUL if (username, password) == login else paramiko.AUTH_FAILED

        self.key = paramiko.RSAKey.generate(1024)
        self.srv = socket.create_server(("127.0.0.1", 0))
        self.port = self.srv.getsockname()[1]
        self.transports: list = []

        def serve() -> None:
            try:
                sock = self.srv.accept()[0]
            except OSError:
                return
            t = paramiko.Transport(sock)
            t.set_log_channel("tests.sshd")  # its own log: a client's records are paramiko's alone
            t.add_server_key(self.key)
            self.transports.append(t)
            try:
                t.start_server(server=Server())
            except (paramiko.SSHException, EOFError, OSError):
                pass

        threading.Thread(target=serve, daemon=True).start()

    def known_hosts(self, path: Path) -> str:
        path.write_text(f"[127.0.0.1]:{self.port} {self.key.get_name()} {self.key.get_base64()}\n")
        return str(path)

    def close(self) -> None:
        self.release.set()
        for t in self.transports:
            t.close()
        self.srv.close()


@pytest.mark.reliability(item=40, fault="ssh: an sshd that answers the key exchange, then stalls authentication: "
                                        "held a 2 s ssh_connect_timeout for paramiko's 30 s auth_timeout",
                         variants=1, checks=("no hang", "one clear line"))
def test_a_login_stalled_in_authentication_ends_at_its_own_bound(tmp_path, monkeypatch):
    """Authentication is bounded apart from the connect timeout (ssh's ConnectTimeout does not cover it): the bound
    (30 s, jumps.AUTH_TIMEOUT, made 2 s here) ends a stalled login with one line naming that phase and bound."""
    import time

    from bringup.errors import Unreachable
    from bringup.inventory.hosts import ConnectionVars, Host
    from bringup.ssh import jumps
    from bringup.ssh.connection import connect

    monkeypatch.setattr(jumps, "AUTH_TIMEOUT", 2.0)
    srv = _StallingAuth()
    try:
        host = Host("h1", ["all"], {}, ConnectionVars(ansible_host="127.0.0.1", ansible_port=srv.port,
                                                      ansible_user="op", ansible_password="pw-x",
                                                      ssh_known_hosts=srv.known_hosts(tmp_path / "kh"),
                                                      ssh_connect_timeout=1))
        t0 = time.monotonic()
        with pytest.raises(Unreachable) as e:
            connect(host)
        took = time.monotonic() - t0
    finally:
        srv.close()
    said = str(e.value)
    assert said.startswith(f"authentication to op@127.0.0.1:{srv.port} did not finish within 2 s of the key "
                           "exchange (bringup's bound on ssh authentication)") and "\n" not in said, said
    assert "ssh_connect_timeout" not in said, said  # the connect timeout did not run out
    assert took < 12, took  # before: 30 s (paramiko's auth_timeout)


@pytest.mark.reliability(item=40, fault="ssh: a changed host key on a socket bringup dialed: the socket was closed "
                                        "under paramiko's running transport, whose thread logged 'Socket exception: "
                                        "Bad file descriptor (9)' as an ERROR beside the refusal (testinfra printed it)",
                         variants=1, checks=("one clear line",))
def test_a_refused_host_key_ends_the_login_without_a_socket_error_on_the_log(tmp_path, caplog):
    """The login's transport is closed before the socket bringup dialed for it (eight logins: the old order showed
    the error on about one in three, as the transport thread's read and the close raced)."""
    import logging
    import time

    import paramiko

    from bringup.errors import Unreachable
    from bringup.inventory.hosts import ConnectionVars, Host
    from bringup.ssh.connection import connect

    other = paramiko.RSAKey.generate(1024)
    caplog.set_level(logging.DEBUG, logger="paramiko")
    for i in range(8):
        srv = _StallingAuth(delay=0)
        known = tmp_path / f"kh{i}"
        known.write_text(f"[127.0.0.1]:{srv.port} {other.get_name()} {other.get_base64()}\n")
        try:
            host = Host("h1", ["all"], {}, ConnectionVars(ansible_host="127.0.0.1", ansible_port=srv.port,
                                                          ansible_user="op", ansible_password="pw-x",
                                                          ssh_known_hosts=str(known)))
            with pytest.raises(Unreachable) as e:
                connect(host)
            time.sleep(0.3)  # the transport thread's next read (paramiko polls its socket each 0.1 s)
        finally:
            srv.close()
        assert str(e.value).startswith(f"host key for 127.0.0.1:{srv.port} CHANGED"), str(e.value)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR and r.name.startswith("paramiko")]
    assert errors == [], errors


#: A ProxyCommand as a bastion is one: it connects only after its own login (``delay`` s), then relays.
RELAY = """import os, select, socket, sys, time
time.sleep(float(sys.argv[3]))
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
while True:
    r = select.select([0, s], [], [])[0]
    if 0 in r:
        d = os.read(0, 65536)
        if not d:
            break
        s.sendall(d)
    if s in r:
        d = s.recv(65536)
        if not d:
            break
        os.write(1, d)
"""


@pytest.mark.reliability(item=40, fault="ssh: a bastion ProxyCommand taking 1 s and an sshd authenticating in 2.5 s "
                                        "with ConnectTimeout 3: ssh logs in, bringup failed it as a stalled login at "
                                        "3 s (authentication counted in the connect timeout); a wrong password "
                                        "after the connect timeout was worded as that timeout",
                         variants=2, checks=("one clear line",))
@pytest.mark.parametrize("password", ["pw-x", "wrong"], ids=["logs-in", "wrong-password"])
def test_a_slow_bastion_and_a_slow_authentication_log_in_as_ssh_does(tmp_path, password):
    import time

    from bringup.errors import Unreachable
    from bringup.inventory.hosts import ConnectionVars, Host
    from bringup.ssh.connection import connect

    relay = tmp_path / "relay.py"
    relay.write_text(RELAY)
    config = tmp_path / "ssh_config"
    config.write_text(f"Host 127.0.0.1\n  ConnectTimeout 3\n  ProxyCommand {sys.executable} {relay} %h %p 1\n")
    srv = _StallingAuth(delay=2.5)
    t = None
    try:
        host = Host("h1", ["all"], {"ssh_config": str(config)},
                    ConnectionVars(ansible_host="127.0.0.1", ansible_port=srv.port, ansible_user="op",
                                   ansible_password=password, ssh_known_hosts=srv.known_hosts(tmp_path / "kh")))
        t0 = time.monotonic()
        if password == "wrong":
            with pytest.raises(Unreachable) as e:
                connect(host)
            said = str(e.value)
            assert said == f"authentication to op@127.0.0.1:{srv.port} failed: Authentication failed.", said
        else:
            t = connect(host)  # before: "authentication ... did not finish within 3 s (ssh_connect_timeout)"
            assert t.conn.transport.is_authenticated()
        assert 3 < time.monotonic() - t0 < 30  # the relay's 1 s, then authentication's 2.5 s: past the 3 s
    finally:
        if t is not None:
            t.close()
        srv.close()


@pytest.mark.reliability(item=40, fault="ssh: a ProxyCommand that never answers, its bound from ssh_config's "
                                        "ConnectTimeout: the line named ssh_connect_timeout and blamed sshd",
                         variants=1, checks=("no hang", "one clear line"))
def test_a_handshake_that_runs_out_names_connect_timeout_where_it_came_from(tmp_path):
    import time

    from bringup.errors import Unreachable
    from bringup.inventory.hosts import ConnectionVars, Host
    from bringup.ssh.connection import connect

    config = tmp_path / "ssh_config"
    config.write_text("Host 127.0.0.1\n  ConnectTimeout 1\n  ProxyCommand sleep 30\n")
    host = Host("h1", ["all"], {"ssh_config": str(config)},
                ConnectionVars(ansible_host="127.0.0.1", ansible_port=22, ssh_known_hosts=str(tmp_path / "kh")))
    t0 = time.monotonic()
    with pytest.raises(Unreachable) as e:
        connect(host)
    took = time.monotonic() - t0
    said = str(e.value)
    assert said.startswith("ssh to 127.0.0.1:22: no SSH handshake came through its ProxyCommand within 1 s "
                           "(ConnectTimeout): ") and said.endswith("or raise ConnectTimeout"), said
    assert "ssh_connect_timeout" not in said and "\n" not in said, said
    assert took < 10, took


@pytest.mark.reliability(item=40, fault="ssh: the login's watchdog firing as the login finished: the caller was given "
                                        "a client that the watchdog closed a moment later",
                         variants=1, checks=("one clear line",))
def test_the_login_watchdog_never_closes_a_login_that_finished():
    """The watchdog decides under a lock against the login's own end: either it cut the login (and log_in says
    so) or the login finished first (and the watchdog leaves it alone).  Here the watchdog is slowed (its look at
    the transport takes 0.6 s) past the 0.2 s deadline, while the login returns at 0.3 s."""
    import threading
    import time

    from bringup.ssh.jumps import LoginTimedOut, Way, log_in

    main = threading.current_thread()

    class Client:
        closed = False

        def get_transport(self):
            if threading.current_thread() is not main:
                time.sleep(0.6)
            return None

        def close(self):
            self.closed = True

    client = Client()
    way = Way(known_hosts=("/nonexistent/kh",), accept_new=False, connect_timeout=0.2)
    try:
        got = log_in(client, lambda bounds: time.sleep(0.3) or "logged in", way, None)  # type: ignore[arg-type]
    except LoginTimedOut:
        assert client.closed  # cut: said, and closed
        return
    assert got == "logged in"
    time.sleep(1.0)
    assert not client.closed, "the watchdog closed a login log_in had returned"


@pytest.mark.reliability(item=40, fault="ssh: ssh_connect_timeout under 1 s (0.5): int() made it 0, no timeout, "
                                        "and the login waited for paramiko's 15 s banner_timeout",
                         variants=1, checks=("no hang", "one clear line"))
def test_a_connect_timeout_under_one_second_is_kept(tmp_path):
    import time

    import tests.silent
    from bringup.errors import Unreachable
    from bringup.inventory.hosts import ConnectionVars, Host
    from bringup.ssh.connection import connect

    with tests.silent.silent_port() as (port, _):
        host = Host("h1", ["all"], {}, ConnectionVars(ansible_host="127.0.0.1", ansible_port=port,
                                                      ssh_known_hosts=str(tmp_path / "kh"), ssh_connect_timeout=0.5))
        t0 = time.monotonic()
        with pytest.raises(Unreachable) as e:
            connect(host)
        took = time.monotonic() - t0
    assert "no SSH handshake finished within 0.5 s (ssh_connect_timeout): " in str(e.value), str(e.value)
    assert took < 8, took  # before: 15 s


@pytest.mark.reliability(item=40, fault="ssh: a port that floods bytes with no line end (no SSH banner): paramiko "
                                        "grew one buffer 128 bytes at a time, a CPU spun until the deadline",
                         variants=2, checks=("no hang", "one clear line"))
@pytest.mark.parametrize("flood", [b"\0", b"x"], ids=["zeros", "letters"])
def test_a_port_flooding_before_any_banner_is_cut_at_once(tmp_path, flood):
    import socket
    import threading
    import time

    from bringup.errors import Unreachable
    from bringup.inventory.hosts import ConnectionVars, Host
    from bringup.ssh.connection import connect

    srv = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        try:
            c = srv.accept()[0]
            while not stop.is_set():
                c.sendall(flood * 65536)
        except OSError:
            pass

    threading.Thread(target=serve, daemon=True).start()
    try:
        host = Host("h1", ["all"], {}, ConnectionVars(ansible_host="127.0.0.1", ansible_port=srv.getsockname()[1],
                                                      ssh_known_hosts=str(tmp_path / "kh"), ssh_connect_timeout=30))
        t0 = time.monotonic()
        with pytest.raises(Unreachable) as e:
            connect(host)
        took = time.monotonic() - t0
    finally:
        stop.set()
        srv.close()
    said = str(e.value)
    assert "is not SSH" in said and "256 KiB came without an SSH version line" in said and "\n" not in said, said
    assert took < 10, took  # before: the whole 30 s, a CPU spinning


# --- a file that is no inventory ---------------------------------------------------------------------------------

@pytest.mark.reliability(item=40, fault="inventory: a file that is no inventory (/etc/shadow: a YAML mapping of empty "
                                        "groups named by its lines), or an empty one, listed 0 hosts and said nothing",
                         variants=3, checks=("one clear line", "secret never shown"))
@pytest.mark.parametrize("what", ["shadow", "empty", "shadow-in-a-folder"])
def test_a_file_that_is_no_inventory_is_one_warning_naming_it_without_its_text(tmp_path, what):
    text = "" if what == "empty" else \
        "root:$y$j9T$SeCrEtHaSh0123$pQ9vXz:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n"
    where = tmp_path / "inv" if what == "shadow-in-a-folder" else tmp_path
    where.mkdir(exist_ok=True)
    (where / "shadow").write_text(text)
    p = bringup("hosts", "-i", str(where if what == "shadow-in-a-folder" else where / "shadow"), cwd=tmp_path)
    out = p.stdout + p.stderr
    assert p.returncode == 0 and "Traceback" not in out, out
    warned = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(warned) == 1 and warned[0].startswith(f"warning: {where / 'shadow'}: no host found in it"), out
    assert "SeCrEtHaSh" not in out and "daemon" not in out and "19000" not in out, out


#: A file others may not read, passed as an inventory by mistake -> (its text, its mode, the line refused).  Each
#: refusal quoted the secret: "group name 'root:$6$...' holds '/'", "got 'SeCrEt...'", "host '...' ends in ':'".
PRIVATE_FILES = {
    "shadow (YAML)": ("root:$6$Salt$SeCrEt/HaSh.x:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n", 0o640, 1),
    "shadow (.ini)": ("root:$6$Salt$SeCrEt/HaSh.x:19000:0:99999:7:::\n", 0o600, 1),
    "dotenv": ("DB_USER=ops\nAPI_TOKEN=SeCrEt/token\n", 0o600, 1),  # a host name holding "=": refused at once
    "netrc": ("machine example.com login bob password SeCrEt\n", 0o600, 1),
    "ssh key": ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA SeCrEt\n", 0o600, 1),
}


@pytest.mark.reliability(item=40, fault="inventory: a file other users may not read (/etc/shadow, an ssh key, .netrc, "
                                        "a .env) given as -i: its refusal quoted a password hash or a token",
                         variants=len(PRIVATE_FILES), checks=("one clear line", "secret never shown"))
@pytest.mark.parametrize("case", sorted(PRIVATE_FILES))
def test_a_private_file_given_as_inventory_is_refused_without_its_text(tmp_path, case):
    text, mode, line = PRIVATE_FILES[case]
    f = tmp_path / ("creds.ini" if case.endswith("(.ini)") else "creds")
    f.write_text(text)
    f.chmod(mode)
    p = bringup("hosts", "-i", str(f), cwd=tmp_path)
    said = one_line_refusal(p, f"{f}:{line}: ", "its text is not shown", f"mode {mode:04o}")
    assert "SeCrEt" not in said and "token" not in said and "example.com" not in said, said


#: A vars file other users may not read (a copy of /etc/shadow, or a hard link to it, put in group_vars/) -> its text.
#: Its lines read as YAML keys `root:$6$...::` (null values): taken with a warning quoting each, and listed by
#: `hosts --host`; a key holding a space, or an unknown !tag, was refused quoting it.
PRIVATE_VARS = {
    "shadow": "root:$6$Salt$SeCrEt/HaSh.x:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n",
    "a key with a space": "SeCrEt token: 1\n",
    "an unknown tag": "x: !SeCrEt 1\n",
}


@pytest.mark.reliability(item=40, fault="group_vars: a vars file other users may not read (a copy of /etc/shadow) "
                                        "quoted in a warning (its lines as variable names), listed by hosts --host, "
                                        "or quoted in its refusal", variants=len(PRIVATE_VARS),
                         checks=("one clear line", "secret never shown"))
@pytest.mark.parametrize("case", sorted(PRIVATE_VARS))
def test_a_private_vars_file_is_refused_without_its_text(tmp_path, case):
    (tmp_path / "hosts.yml").write_text(HOSTS)
    (tmp_path / "group_vars").mkdir()
    f = tmp_path / "group_vars" / "all.yml"
    f.write_text(PRIVATE_VARS[case])
    f.chmod(0o600)
    p = bringup("hosts", "-i", "hosts.yml", "--host", "h1", cwd=tmp_path)
    said = one_line_refusal(p, "group_vars/all.yml:1", "its text is not shown", "mode 0600")
    assert "SeCrEt" not in said and "HaSh" not in said, said
    f.chmod(0o644)  # readable by all: the operator's own text, named as before (a warning, or the refusal quoting it)
    p = bringup("hosts", "-i", "hosts.yml", "--host", "h1", cwd=tmp_path)
    assert "SeCrEt" in p.stdout + p.stderr and "Traceback" not in p.stderr, p.stderr


@pytest.mark.reliability(item=40, fault="group_vars: a vars file other users may not read (umask 077, ansible-vault's "
                                        "own 0600) refused for a hyphenated variable name Ansible takes, and its vault "
                                        "errors told without how to fix them", variants=3,
                         checks=("one clear line", "secret never shown"))
def test_a_private_vars_file_keeps_ansibles_names_and_its_vault_lines(tmp_path):
    from .test_vault import _encrypt

    (tmp_path / "hosts.yml").write_text(HOSTS)
    (tmp_path / "group_vars").mkdir()
    f = tmp_path / "group_vars" / "all.yml"
    f.write_text("ntp_server: pool.ntp.org\nnvidia-driver-branch: '550'\n")
    f.chmod(0o600)
    p = bringup("hosts", "-i", "hosts.yml", "--host", "h1", cwd=tmp_path)
    assert p.returncode == 0 and "nvidia-driver-branch" in p.stdout, p.stdout + p.stderr
    assert "group_vars/all.yml:2: variable name 'nvidia-driver-branch' is not Ansible's form" in p.stderr, p.stderr
    f.write_text(_encrypt(b"right", "secret_x: hunter2zz\n"))  # encrypted whole, 0600 as ansible-vault leaves it
    (tmp_path / "pw").write_text("wrong\n")
    for extra, words in (([], "no vault password given; pass --vault-password-file"),
                         (["--vault-password-file", "pw"], "wrong vault password")):
        p = bringup("hosts", "-i", "hosts.yml", "--host", "h1", *extra, cwd=tmp_path)
        said = one_line_refusal(p, "group_vars/all.yml", words)
        assert "hunter2zz" not in said, said


#: Plain-text passwords where only a secret goes: Ansible's own aliases of its password variables (common in real
#: inventories), a variable named like a password, a registry's password.  `hosts --host` printed each in clear.
PLAIN_SECRETS = {"ansible_ssh_pass": "Pw-SshPass-1", "ansible_ssh_password": "Pw-SshPassword-2",
                 "ansible_become_pass": "Pw-BecomePass-3", "ansible_sudo_pass": "Pw-SudoPass-4",
                 "ansible_su_pass": "Pw-SuPass-5", "db_password": "Pw-Db-6", "api_token": "x9"}


@pytest.mark.reliability(item=40, fault="inventory: plain-text passwords under Ansible's aliases (ansible_ssh_pass, "
                                        "ansible_become_pass, ansible_sudo_pass, ...) or a name like db_password, "
                                        "nested or not, shown in clear by hosts --host (and --json)",
                         variants=len(PLAIN_SECRETS) + 1, checks=("secret never shown",))
@pytest.mark.parametrize("as_json", [False, True], ids=["table", "json"])
def test_a_plain_password_under_an_ansible_alias_or_a_secret_name_is_never_shown(tmp_path, as_json):
    lines = "".join(f"      {k}: {v}\n" for k, v in PLAIN_SECRETS.items())
    (tmp_path / "hosts.yml").write_text(
        HOSTS + lines + "      registry_auths: {nvcr.io: {username: $oauthtoken, password: Pw-Registry-7}}\n")
    p = bringup("hosts", "-i", "hosts.yml", "--host", "h1", *(["--json"] if as_json else []), cwd=tmp_path)
    out = p.stdout + p.stderr
    assert p.returncode == 0 and "Traceback" not in out, out
    for secret in [*PLAIN_SECRETS.values(), "Pw-Registry-7"]:
        assert secret not in out, (secret, out)
    for name in PLAIN_SECRETS:
        assert name in out, out  # listed, its value hidden
    if as_json:
        shown = json.loads(p.stdout)
        assert {shown[k]["value"] for k in PLAIN_SECRETS} == {"********"}, shown


def test_a_plain_password_of_a_common_word_hides_no_other_word(tmp_path):
    """A plain ``ansible_become_pass: root`` is a secret by its name alone: masked as a value, never inside other
    words (every "root" of ``/root/data`` and "rooted" was hidden)."""
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    h1:\n      ansible_become_pass: root\n"
                                        "      data_dir: /root/data\n      note: rooted tree\n")
    p = bringup("hosts", "-i", "hosts.yml", "--host", "h1", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    rows = {ln.split()[0]: ln.split()[1] for ln in p.stdout.splitlines()[2:] if ln.strip()}
    assert rows["ansible_become_pass"] == "********" and rows["data_dir"] == "/root/data", p.stdout
    assert "rooted tree" in p.stdout, p.stdout


def test_a_private_inventorys_mistake_still_says_where_and_how_to_look(tmp_path):
    """A 0600 inventory (a hardened host's umask) with a mistake: its line and column, what is wrong, and the
    command that shows the line to its owner; never its text (the refusal was 'is it an inventory?', no column)."""
    inv = tmp_path / "hosts.yml"
    inv.write_text("all:\n  hosts:\n    h1:\n      a: [1, 2\n")
    inv.chmod(0o600)
    p = bringup("hosts", "-i", "hosts.yml", cwd=tmp_path)
    assert p.returncode == 1 and p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.startswith("error: hosts.yml:5:1: a YAML syntax error; ") and "[1, 2" not in p.stderr, p.stderr
    assert "(`sed -n 5p -- hosts.yml` shows that line)" in p.stderr and "is it an inventory" not in p.stderr, p.stderr


@pytest.mark.parametrize("secret", ["CorrectHorseBatteryStaple9", "s3cr3t!"])
def test_a_plain_password_that_is_no_word_is_masked_inside_other_values(tmp_path, secret):
    """A plain ``ansible_become_pass`` that is no common word is masked wherever it appears (inside a command or a
    note), as it was before the common-word rule; a word is masked only standing alone."""
    (tmp_path / "hosts.yml").write_text(
        f"all:\n  hosts:\n    h1:\n      ansible_become_pass: '{secret}'\n"
        f"      cmd: 'echo {secret}|sudo -S id'\n      note: sshpass-{secret}-x\n")
    p = bringup("hosts", "-i", "hosts.yml", "--host", "h1", cwd=tmp_path)
    assert p.returncode == 0 and secret not in p.stdout + p.stderr, p.stdout
    assert "echo ********|sudo -S id" in p.stdout and "sshpass-********-x" in p.stdout, p.stdout


def test_the_hint_to_look_at_a_private_line_names_the_file_quoted(tmp_path):
    """The hint is a command the operator may paste: a file named ``my hosts;id.yml`` is quoted in it, so the
    pasted command runs no ``id.yml``."""
    inv = tmp_path / "my hosts;id.yml"
    inv.write_text("all:\n  hosts:\n    h1:\n      a: [1, 2\n")
    inv.chmod(0o600)
    p = bringup("hosts", "-i", inv.name, cwd=tmp_path)
    assert p.returncode == 1 and "(`sed -n 5p -- 'my hosts;id.yml'` shows that line)" in p.stderr, p.stderr


def test_the_hints_that_name_a_secret_or_password_file_quote_it(tmp_path):
    """``chmod 600 PATH`` and ``chmod -x PATH`` hints name a file whose name holds ';' quoted: pasted, they run
    nothing else (``pw;touch PWNED`` ran ``touch PWNED``)."""
    pw = tmp_path / "pw;touch PWNED"
    pw.write_text("s3cret-Pw-9\n")
    pw.chmod(0o644)
    (tmp_path / "hosts.yml").write_text(
        "all:\n  hosts:\n    h1:\n      ansible_become_password: {bringup_secret: {file: '" + str(pw) + "'}}\n")
    p = bringup("hosts", "-i", "hosts.yml", cwd=tmp_path)
    assert p.returncode == 1 and f"chmod 600 '{pw}'" in p.stderr, p.stderr
    vp = tmp_path / "vp;touch PWNED2"
    vp.write_text("#!/no/such/interpreter\n")
    vp.chmod(0o755)
    (tmp_path / "plain.yml").write_text("all:\n  hosts:\n    h1:\n")
    p = bringup("hosts", "-i", "plain.yml", "--vault-password-file", str(vp), cwd=tmp_path)
    assert p.returncode == 1 and f"chmod -x '{vp}' if it is a plain password file" in p.stderr, p.stderr


# --- what is derived from a vaulted value (a triton_image's release) -------------------------------------------

@pytest.mark.reliability(item=40, fault="vault: a vaulted triton_image showed its release and CUDA version ('Triton "
                                        "24.05 (CUDA 12.4)') in the checklist's Triton and driver lines (console, "
                                        "Markdown, HTML, JSON)", variants=4, checks=("secret never shown",))
def test_a_vaulted_triton_image_never_shows_its_release_in_the_checklist(tmp_path):
    """Any part of a decrypted value is the secret shown: the image's tag gave 'Triton 24.05' on every page."""
    inv, pw = vaulted_inventory(tmp_path, "h200-vm", {"triton_image": "registry.example/triton:24.05-secret"})
    out = tmp_path / "pages"
    p = bringup("checklist", "--inventory", str(inv), "--vault-password-file", str(pw), "--host", "h200-vm",
                "--facts", str(FACTS), "--out", str(out), cwd=tmp_path)
    assert p.returncode in (0, 2) and "Traceback" not in p.stderr, p.stdout + p.stderr
    texts = {"console": p.stdout + p.stderr, **{f.name: f.read_text() for f in out.iterdir()}}
    assert len(texts) == 4
    for where, text in texts.items():
        assert "Triton ******** (vaulted triton_image) needs R545+" in text, where
        for shown in ("24.05", "CUDA 12.4", "registry.example", "secret"):
            assert shown not in text, (where, shown)


@pytest.mark.reliability(item=40, fault="vault: a vaulted triton_image showed its release and TensorRT version in "
                                        "the engines' TensorRT mismatch refusal", variants=1,
                         checks=("secret never shown",))
def test_a_vaulted_image_never_shows_its_release_in_the_engines_refusal(tmp_path):
    from bringup.secrets import Vaulted
    from .test_engines import CHECK, engine_vars

    (tmp_path / "m.onnx").write_bytes(b"onnx")
    vars = {**engine_vars(tmp_path / "m.onnx"), "tensorrt_image": "nvcr.io/nvidia/tensorrt:24.06-py3",
            "triton_image": Vaulted("nvcr.io/nvidia/tritonserver:24.05-py3")}
    with pytest.raises(Exception) as e:
        CHECK(vars)
    assert "24.05" not in str(e.value) and "10.0.1" not in str(e.value), str(e.value)
    assert "triton_image ******** serves with TensorRT (vaulted, not shown)" in str(e.value), str(e.value)


# --- Ansible's other names of the connection variables ---------------------------------------------------------

ANSIBLE_ALIASES = {
    # name: (the inventory's connection lines, the password the sshd takes)
    "ssh_pass": ("ansible_ssh_host: 127.0.0.1\n      ansible_ssh_port: {port}\n      ansible_ssh_user: op\n"
                 "      ansible_ssh_pass: pw-x\n", "pw-x"),
    "ssh_password-int": ("ansible_host: 127.0.0.1\n      ansible_port: {port}\n      ansible_user: op\n"
                         "      ansible_ssh_password: 12345\n", "12345"),
    "int-password": ("ansible_host: 127.0.0.1\n      ansible_port: {port}\n      ansible_user: op\n"
                     "      ansible_password: 12345\n", "12345"),
    # Both names set: the ssh_ one wins, as in ansible's ssh plugin (its vars list, the last set).
    "both-set": ("ansible_host: 192.0.2.1\n      ansible_ssh_host: 127.0.0.1\n      ansible_port: 9\n"
                 "      ansible_ssh_port: {port}\n      ansible_user: nobody\n      ansible_ssh_user: op\n"
                 "      ansible_password: no\n      ansible_ssh_pass: no-either\n      ansible_ssh_password: pw-x\n",
                 "pw-x"),
}


@pytest.mark.reliability(item=40, fault="inventory: Ansible's connection aliases (ansible_ssh_host/_port/_user, "
                                        "ansible_ssh_pass/_password) were masked but not used to connect, and "
                                        "ansible_password: 12345 (a YAML int) was refused: an inventory written for "
                                        "Ansible did not log in as Ansible does", variants=len(ANSIBLE_ALIASES),
                         checks=("one clear line",))
@pytest.mark.parametrize("case", sorted(ANSIBLE_ALIASES))
def test_an_inventory_written_for_ansible_logs_in_with_its_aliases(case, tmp_path):
    from bringup.inventory.hosts import load_inventory
    from bringup.ssh.connection import connect

    lines, password = ANSIBLE_ALIASES[case]
    srv = _StallingAuth(delay=0, login=("op", password))
    t = None
    try:
        (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    h1:\n      " + lines.format(port=srv.port)
                                            + f"      ssh_known_hosts: {srv.known_hosts(tmp_path / 'kh')}\n")
        t = connect(load_inventory(tmp_path / "hosts.yml").host("h1"))
        assert t.conn.transport.is_authenticated()
    finally:
        if t is not None:
            t.close()
        srv.close()


def test_the_aliases_are_ansibles_own_and_become_aliases_are_taken(tmp_path):
    """bringup's alias table is the ssh and sudo plugins' vars lists of the installed ansible-core (the truth), and
    the sudo password and user under ansible_sudo_pass / ansible_become_pass / ansible_sudo_user are used."""
    from bringup.inventory.hosts import ALIASES, load_inventory

    code = ("import json; from ansible.plugins.loader import connection_loader, become_loader; "
            "from ansible import constants as C; connection_loader.get('ssh', class_only=True); "
            "become_loader.get('sudo', class_only=True); "
            "s = C.config.get_configuration_definitions('connection', 'ssh'); "
            "b = C.config.get_configuration_definitions('become', 'sudo'); "
            "print(json.dumps({k: [v['name'] for v in d[o].get('vars', []) if not v['name'].startswith(('inventory_', "
            "'delegated'))] for k, d, o in (('ansible_host', s, 'host'), ('ansible_port', s, 'port'), "
            "('ansible_user', s, 'remote_user'), ('ansible_password', s, 'password'), "
            "('ansible_ssh_private_key_file', s, 'private_key_file'), ('ansible_become_user', b, 'become_user'), "
            "('ansible_become_password', b, 'become_pass'), ('ansible_become_exe', b, 'become_exe'), "
            "('ansible_become_flags', b, 'become_flags'))}))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == {k: list(v) for k, v in ALIASES.items()}
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    h1:\n      ansible_become_pass: Sudo-pw-1\n"
                                        "      ansible_sudo_user: triton\n    h2:\n      ansible_become_password: a\n"
                                        "      ansible_sudo_pass: 4321\n")
    inv = load_inventory(tmp_path / "hosts.yml")
    h1, h2 = inv.host("h1").connection, inv.host("h2").connection
    assert (h1.ansible_become_password.get_secret_value(), h1.ansible_become_user) == ("Sudo-pw-1", "triton")
    assert h2.ansible_become_password.get_secret_value() == "4321"
    p = bringup("hosts", "-i", "hosts.yml", "--host", "h2", cwd=tmp_path)
    assert p.returncode == 0 and "4321" not in p.stdout + p.stderr, p.stdout + p.stderr


# --- a secrets file given as the inventory ----------------------------------------------------------------------

NOT_INVENTORIES = {
    ".env": ("DB_PASSWORD=hunter2x\nAPI_TOKEN=tok-abc-123\n", "holds '='"),
    ".pgpass": ("db.example:5432:db:user:pgpw-777\n", "holds ':' and is no IPv6 address"),
    "vars.yml": ("all:\n  hosts:\n    'DB_PASSWORD=hunter2x':\n", "holds '='"),
    "list.json": ('{"all": {"hosts": ["db.example:5432:db:user:pgpw-777"]}}', "holds ':'"),
}


@pytest.mark.reliability(item=40, fault="inventory: -i .env or -i ~/.pgpass (readable by all) listed their lines "
                                        "as host names: hosts printed DB_PASSWORD=hunter2x and the .pgpass password",
                         variants=len(NOT_INVENTORIES), checks=("secret never shown", "one clear line"))
@pytest.mark.parametrize("name", sorted(NOT_INVENTORIES))
def test_a_secrets_file_given_as_inventory_is_refused_without_its_lines(tmp_path, name):
    text, why = NOT_INVENTORIES[name]
    (tmp_path / name).write_text(text)
    (tmp_path / name).chmod(0o644)
    p = bringup("hosts", "-i", name, cwd=tmp_path)
    line = one_line_refusal(p, f"{name}:", "a host name (not shown)", why)
    for secret in ("hunter2x", "pgpw-777", "tok-abc", "DB_PASSWORD"):
        assert secret not in line, line


EXPORT_LINES = {
    "export": "export OPENAI_KEY=sk-proj-hunter2x\nexport DB_HOST=db.internal\n",
    "one line, two": "export FOO=hunter2x BAR=tok-abc-123\n",
    "readonly": "readonly FOO=hunter2x\n",
    "after a section": "[g]\nh1\nexport FOO=hunter2x\n",
}


@pytest.mark.reliability(item=40, fault="inventory: -i .env with `export NAME=value` lines listed a host 'export' "
                                        "(as ansible-inventory does): hosts --host export printed the values that "
                                        "no credential name marked, and plan dialed a host 'export'",
                         variants=len(EXPORT_LINES), checks=("secret never shown", "one clear line"))
@pytest.mark.parametrize("name", sorted(EXPORT_LINES))
def test_a_dotenv_of_export_lines_is_refused_without_its_lines(tmp_path, name):
    (tmp_path / ".env").write_text(EXPORT_LINES[name])
    (tmp_path / ".env").chmod(0o644)
    for args in (("hosts",), ("hosts", "--host", "export"), ("plan", "--host", "export")):
        p = bringup(*args, "-i", ".env", cwd=tmp_path)
        line = one_line_refusal(p, ".env:", "not an inventory host", "not shown")
        for secret in ("hunter2x", "sk-proj", "db.internal", "tok-abc", "OPENAI_KEY", "FOO"):
            assert secret not in line, line
    assert not (tmp_path / "reports").exists()
    # A host that is called export, with its connection variables, is still one; so is a host called local or
    # declare with its own (lower-case) variables, as ansible-inventory lists them.
    (tmp_path / "hosts").write_text("[g]\nexport ansible_host=10.0.0.1 note=x\nlocal rack=r12\ndeclare gpu_profile=l40s\n")
    p = bringup("hosts", "-i", "hosts", cwd=tmp_path)
    assert p.returncode == 0 and "root@10.0.0.1:22" in p.stdout, p.stdout + p.stderr
    assert "local" in p.stdout and "declare" in p.stdout, p.stdout


def test_ipv6_hosts_and_ports_are_still_host_names(tmp_path):
    (tmp_path / "hosts.ini").write_text("[web]\nfe80::1\n[::1]:2222\nh2:22\n")
    p = bringup("hosts", "-i", "hosts.ini", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "root@::1:2222" in p.stdout and "root@fe80::1:22" in p.stdout and "root@h2:22" in p.stdout, p.stdout


SECRET_LINES = {
    "my.cnf": ("[client]\npassword hunter2zz\n", 2),
    "vars-line": ("[g:vars]\ndb_password hunter2zz\n", 2),
    "aws": ("[default]\naws_secret_access_key = hunter2zz\n", 2),
    "netrc": ("machine h login u password hunter2zz\n", 1),
    "short-part": ("h1 ansible_host=127.0.0.1 ansible_ssh_pass=abc ;hunter2zz\n", 1),
    "short-part-2": ("h1 ansible_ssh_pass=abc ;x\n", 1),
}


@pytest.mark.reliability(item=40, fault="inventory: a config file given as the inventory (~/.my.cnf, ~/.aws/credentials, "
                                        ".netrc, readable by all) was refused quoting its line: 'expected key=value "
                                        "..., got 'password hunter2zz''", variants=len(SECRET_LINES),
                         checks=("secret never shown", "one clear line"))
@pytest.mark.parametrize("case", sorted(SECRET_LINES))
def test_a_refused_line_that_names_a_password_is_not_quoted(tmp_path, case):
    text, n = SECRET_LINES[case]
    (tmp_path / "inv").write_text(text)
    (tmp_path / "inv").chmod(0o644)
    p = bringup("hosts", "-i", "inv", cwd=tmp_path)
    line = one_line_refusal(p, f"inv:{n}: ")
    assert "hunter2zz" not in line, line
    assert ";x" not in line, line
    if case in ("my.cnf", "vars-line", "short-part", "short-part-2"):  # the refusal would quote the password
        assert "names a password, token or secret" in line and f"`sed -n {n}p -- inv`" in line, line


SHADOW = "root:$y$j9T$hunter2hash$zz:20228:0:99999:7:::\nalice:$6$salt$hunter3hash:19000:0:99999:7:::\n"
#: name -> (where the copy lies, its mode, the host's extra text).  Each listed the lines as variable names, hash and
#: all: one warning per line on stderr, and a row per line in `hosts --host h1`.
PRIVATE_KEYS = {
    "group_vars 0600": ("group_vars/all.yml", 0o600, SHADOW),
    "host_vars 0640": ("host_vars/h1", 0o640, SHADOW),
    "group_vars folder 0600": ("group_vars/all/x.yml", 0o600, SHADOW),
    "inventory 0600": ("hosts.yml", 0o600, "all:\n  hosts:\n    h1:\n      'pw:$6$hunter2hash': 1\n"),
    "ini 0600": ("hosts.yml", 0o600, "[g]\nh1 pw$hunter2hash=1\n"),
}


@pytest.mark.reliability(item=40, fault="inventory: a copy (or hard link) of /etc/shadow in group_vars/ or host_vars/, "
                                        "or a key not Ansible's form in a 0600 inventory: each line, password hash "
                                        "and all, was quoted as a variable name in a warning and in hosts --host",
                         variants=len(PRIVATE_KEYS), checks=("secret never shown", "one clear line"))
@pytest.mark.parametrize("case", sorted(PRIVATE_KEYS))
def test_a_key_of_a_file_others_may_not_read_is_never_quoted(tmp_path, case):
    where, mode, text = PRIVATE_KEYS[case]
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    h1:\n")
    f = tmp_path / where
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(text)
    f.chmod(mode)
    for args in (("hosts",), ("hosts", "--host", "h1")):
        line = one_line_refusal(bringup(*args, "-i", "hosts.yml", cwd=tmp_path), f"{where}:", "rename it",
                                f"mode {mode:04o}", "its text is not shown")
        assert "hunter" not in line and "$6$" not in line and "root" not in line, line
    # Readable by all, the same names are taken with a warning naming each, as ansible-core 2.19 takes them.
    f.chmod(0o644)
    p = bringup("hosts", "--host", "h1", "-i", "hosts.yml", cwd=tmp_path)
    assert p.returncode == 0 and "is not Ansible's form" in p.stderr, p.stdout + p.stderr


def test_a_refused_line_without_a_secret_word_is_still_quoted(tmp_path):
    (tmp_path / "inv").write_text("[g:vars]\nworkers 8\n")
    one_line_refusal(bringup("hosts", "-i", "inv", cwd=tmp_path), "expected key=value in [g:vars], got 'workers 8'")


@pytest.mark.reliability(item=40, fault="inventory sources: a line whose host name holds a credential's word (auth01, "
                                        "tokenizer-01, passport) was refused as 'names a password' instead of quoting "
                                        "what is wrong", variants=3, checks=("one clear line",))
@pytest.mark.parametrize("host", ["auth01", "tokenizer-01", "passport"])
def test_a_host_name_holding_a_credential_word_is_no_secret_line(tmp_path, host):
    (tmp_path / "inv").write_text(f"[auth]\n{host} ansible_host=10.0.0.1 foo\n")
    (tmp_path / "inv").chmod(0o644)
    line = one_line_refusal(bringup("hosts", "-i", "inv", cwd=tmp_path), "inv:2: ", "got 'foo'")
    assert "names a password" not in line, line


@pytest.mark.reliability(item=40, fault="inventory script: a failing script's stderr 'DB_PASSWORD=hunter6zz' was quoted "
                                        "in its refusal (a KEY=value naming a credential, no secret the run knew)",
                         variants=3, checks=("secret never shown",))
@pytest.mark.parametrize("said", ["DB_PASSWORD=hunter6zz", "connect --token=hunter6zz failed",
                                  "api_key = 'hunter6zz'"])
def test_a_credential_assignment_in_a_scripts_error_is_masked(tmp_path, said):
    script = tmp_path / "inv.sh"
    script.write_text(f"#!/bin/sh\necho \"{said}\" >&2\nexit 3\n")
    script.chmod(0o755)
    line = one_line_refusal(bringup("hosts", "-i", str(script), cwd=tmp_path), "exited 3")
    assert "hunter6zz" not in line and "********" in line, line


def test_the_masker_hides_a_credentials_value_only():
    from bringup.secrets import Masker

    m = Masker()
    assert m.mask("+password = hunter9\n") == "+password = ********\n"
    for kept in ("-o PasswordAuthentication=no", "a password == b", "token={env: X}", "ssh_key=/root/.ssh/id",
                 "net.core.somaxconn = 7", "password: prompt"):
        assert m.mask(kept) == kept


def test_an_inventory_path_under_home_is_expanded_as_ansible_does(tmp_path, monkeypatch):
    """``-i '~/hosts.yml'`` (quoted) is the file in the home folder, as for Ansible; it
    was "no such inventory file"."""
    from bringup.inventory.hosts import load_inventory

    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "hosts.yml").write_text(HOSTS)
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "all.yml").write_text("gpu_profile: l4\n")
    inv = load_inventory("~/hosts.yml")
    assert inv.host("h1").vars["gpu_profile"] == "l4" and inv.path == tmp_path / "hosts.yml"


def test_a_numeric_login_user_is_its_text_as_ansible_takes_it(tmp_path):
    """``ansible_user: 1000`` (or ansible_ssh_user) logs in as "1000" in Ansible; bringup said 'must be a valid
    value'.  ``true`` stays refused, now saying what the variable takes."""
    from bringup.errors import InventoryError
    from bringup.inventory.hosts import load_inventory

    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    h1:\n      ansible_user: 1000\n"
                                        "    h2:\n      ansible_ssh_user: 1001\n")
    inv = load_inventory(tmp_path / "hosts.yml")
    assert (inv.host("h1").connection.ansible_user, inv.host("h2").connection.ansible_user) == ("1000", "1001")
    (tmp_path / "bad.yml").write_text("all:\n  hosts:\n    h1:\n      ansible_user: true\n")
    with pytest.raises(InventoryError, match=r"ansible_user must be a user name as text \(got True\)"):
        load_inventory(tmp_path / "bad.yml")


@pytest.mark.reliability(item=40, fault="vault: a short vaulted value that merely appears in an ordinary image's name "
                                        "(nvidia in nvcr.io/nvidia/...) labelled it 'Triton ******** (vaulted "
                                        "triton_image)' and hid the engines' TensorRT mismatch", variants=2,
                         checks=("one clear line",))
def test_an_ordinary_image_holding_a_short_secrets_text_keeps_its_release(monkeypatch):
    from bringup.hardware.driver_matrix import triton_need
    from bringup.secrets import MASK, Vaulted
    from .test_engines import CHECK, engine_vars

    monkeypatch.setattr(MASK, "_texts", set(MASK._texts))
    monkeypatch.setattr(MASK, "_short", dict(MASK._short))
    MASK.add(Vaulted("nvidia"), alone=True)
    assert triton_need("nvcr.io/nvidia/tritonserver:24.05-py3").label == "Triton 24.05 (CUDA 12.4) needs R545+"
    assert triton_need(Vaulted("nvcr.io/nvidia/tritonserver:24.05-py3")).secret
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "m.onnx").write_bytes(b"onnx")
        vars = {**engine_vars(Path(d) / "m.onnx"), "tensorrt_image": "nvcr.io/nvidia/tensorrt:24.06-py3",
                "triton_image": "nvcr.io/nvidia/tritonserver:24.05-py3"}
        with pytest.raises(Exception) as e:
            CHECK(vars)
    said = str(e.value)
    assert "triton_image nvcr.io/nvidia/tritonserver:24.05-py3 serves with TensorRT 10.0.1" in said, said


# --- a become that is not sudo -------------------------------------------------------------------------------------

#: name -> (the host's become variables, the variable the line must name, its shown value).  Each was taken
#: silently and the host became root through sudo: su's root password went to sudo's prompt.
NOT_SUDO = {
    "method su": ("ansible_become_method: su", "ansible_become_method must be sudo", "got 'su'"),
    "method doas": ("ansible_become_method: doas", "ansible_become_method must be sudo", "got 'doas'"),
    "method pbrun": ("ansible_become_method: pbrun", "ansible_become_method must be sudo", "got 'pbrun'"),
    "exe": ("ansible_become_exe: /opt/bin/sudo", "ansible_become_exe must be sudo", "got '/opt/bin/sudo'"),
    "sudo_exe": ("ansible_sudo_exe: /opt/bin/sudo", "ansible_sudo_exe must be sudo", "--set ansible_sudo_exe=sudo"),
    "flags -E": ("ansible_become_flags: '-H -S -E'", "ansible_become_flags may hold only", "got '-H -S -E'"),
    "sudo_flags -i": ("ansible_sudo_flags: '-i'", "ansible_sudo_flags may hold only", "got '-i'"),
}


@pytest.mark.reliability(item=40, fault="control inputs: ansible_become_method su/doas, ansible_become_exe or "
                                        "ansible_become_flags were ignored and the host became root through sudo",
                         variants=len(NOT_SUDO), checks=("one clear line", "nothing touched"))
@pytest.mark.parametrize("case", sorted(NOT_SUDO))
def test_a_become_bringup_does_not_speak_is_one_line(case, tmp_path):
    from bringup.errors import InventoryError
    from bringup.inventory.hosts import load_inventory

    line, what, got = NOT_SUDO[case]
    inv = tmp_path / "hosts.yml"
    inv.write_text(f"all:\n  hosts:\n    h1:\n      ansible_become: true\n      ansible_become_password: rootpw9\n"
                   f"      {line}\n")
    with pytest.raises(InventoryError) as e:  # refused where bringup would become on it
        load_inventory(inv).hosts["h1"].refuse_become()
    msg = str(e.value)
    assert "\n" not in msg and "host 'h1'" in msg and what in msg and got in msg and "sudo only" in msg, msg
    assert "rootpw9" not in msg
    # Without become they are never read, as in Ansible; sudo's own default flags are what bringup passes.
    inv.write_text(f"all:\n  hosts:\n    h1:\n      {line}\n    h2:\n      ansible_become: true\n"
                   f"      ansible_become_flags: '-H -S -n'\n      ansible_become_method: sudo\n")
    assert sorted(load_inventory(inv).hosts) == ["h1", "h2"]


@pytest.mark.reliability(item=40, fault="control inputs: one host's su/doas become (an inventory shared with Ansible) "
                                        "refused every command on every host, and Ansible's own spellings of sudo "
                                        "(ansible.builtin.sudo, /usr/bin/sudo, -SH) were refused", variants=6,
                         checks=("one clear line", "nothing touched"))
def test_a_become_bringup_does_not_do_is_refused_on_that_host_only_and_sudos_spellings_are_sudo(tmp_path):
    from bringup.inventory.hosts import load_inventory

    (tmp_path / "hosts.ini").write_text(
        "[legacy]\nold1 ansible_host=127.0.0.1 ansible_port=9 ansible_become=true ansible_become_method=su\n"
        "[gpu]\nh1 ansible_host=127.0.0.1 ansible_port=9 ansible_become=true\n"
        "h2 ansible_host=127.0.0.1 ansible_port=9 ansible_become=true ansible_become_method=ansible.builtin.sudo "
        "ansible_become_exe=/usr/bin/sudo ansible_become_flags='-SH -nHS --non-interactive'\n")
    inv = load_inventory(tmp_path / "hosts.ini")
    assert inv.hosts["h1"].become_refused is None and inv.hosts["h2"].become_refused is None
    assert "ansible_become_method must be sudo" in inv.hosts["old1"].become_refused
    p = bringup("hosts", "-i", "hosts.ini", cwd=tmp_path)
    assert p.returncode == 0 and "old1" in p.stdout and "h2" in p.stdout, p.stdout + p.stderr
    p = bringup("plan", "-i", "hosts.ini", "--limit", "gpu", cwd=tmp_path)  # the gpu hosts: tried (port 9: unreachable)
    assert "must be sudo" not in p.stdout + p.stderr and "Traceback" not in p.stderr, p.stdout + p.stderr
    said = one_line_refusal(bringup("plan", "-i", "hosts.ini", "--host", "old1", cwd=tmp_path),
                            "hosts.ini:2: host 'old1': ansible_become_method must be sudo (got 'su')")
    assert "unreachable" not in said


@pytest.mark.reliability(item=40, fault="control inputs: a host whose become a run refuses (su) was listed by hosts and "
                                        "hosts --host as any other, the refusal first said when a run selected it",
                         variants=3, checks=("one clear line",))
def test_hosts_says_which_hosts_a_run_refuses(tmp_path):
    (tmp_path / "hosts.ini").write_text(
        "[legacy]\nold1 ansible_host=127.0.0.1 ansible_become=true ansible_become_method=su\n"
        "[gpu]\nh1 ansible_host=127.0.0.1 ansible_become=true\n")
    for extra in ((), ("--host", "old1"), ("--host", "old1", "--json")):
        p = bringup("hosts", "-i", "hosts.ini", *extra, cwd=tmp_path)
        assert p.returncode == 0 and "Traceback" not in p.stderr, p.stdout + p.stderr
        said = [x for x in p.stderr.splitlines() if x.strip()]
        assert len(said) == 1 and said[0].startswith("warning: a run refuses host 'old1' before connecting: "), said
        assert "ansible_become_method must be sudo (got 'su')" in said[0], said
        if extra[-1:] == ("--json",):
            assert json.loads(p.stdout)["ansible_become_method"]["value"] == "su"
    p = bringup("hosts", "-i", "hosts.ini", "--host", "h1", cwd=tmp_path)
    assert p.returncode == 0 and p.stderr.strip() == "", p.stderr


def test_a_vaulted_become_method_is_refused_without_showing_it(tmp_path):
    from bringup.errors import InventoryError
    from bringup.inventory.hosts import load_inventory
    from bringup.secrets import Vaulted

    inv = tmp_path / "hosts.yml"
    inv.write_text("all:\n  hosts:\n    h1: {ansible_become: true}\n")
    with pytest.raises(InventoryError) as e:
        load_inventory(inv, overrides={"ansible_become_method": Vaulted("dzdo")}).hosts["h1"].refuse_become()
    assert "dzdo" not in str(e.value) and "its value is not shown" in str(e.value), str(e.value)


# --- a "regular" file whose read waits (/proc/kmsg) ----------------------------------------------------------------

def _waiting_reads(monkeypatch, name: str) -> None:
    """Reads of files called ``name`` wait as /proc/kmsg's do (EAGAIN when the file is open O_NONBLOCK, else for
    ever: here 60 s, so a reader that made its file blocking again is caught, not hung).  /proc/kmsg itself is not
    read here: a read takes the kernel's messages away from the system log."""
    import time

    real_read, real_set_blocking = os.read, os.set_blocking
    blocking: set[int] = set()

    def is_it(fd: int) -> bool:
        try:
            return os.readlink(f"/proc/self/fd/{fd}").endswith(name)
        except OSError:
            return False

    def read(fd: int, n: int) -> bytes:
        if is_it(fd):
            if fd in blocking:
                time.sleep(60)
            raise BlockingIOError(11, "Resource temporarily unavailable")
        return real_read(fd, n)

    def set_blocking(fd: int, on: bool) -> None:
        if is_it(fd) and on:
            blocking.add(fd)
            raise AssertionError(f"{name} made blocking: its read would wait for ever")
        real_set_blocking(fd, on)

    monkeypatch.setattr(os, "read", read)
    monkeypatch.setattr(os, "set_blocking", set_blocking)


@pytest.mark.reliability(item=40, fault="control inputs: a kernel file that calls itself regular (/proc/kmsg) as a "
                                        "{file: PATH} secret, -i, --vault-password-file, --limit @FILE, ssh_config, "
                                        "ssh_known_hosts, IdentityFile or a model file to send: the read waited for ever",
                         variants=7, checks=("no hang", "one clear line"))
def test_a_regular_file_whose_read_waits_is_one_line_never_a_hang(tmp_path, monkeypatch):
    from bringup.errors import InputError
    from bringup.secrets import _from_file
    from bringup.ssh.keyfile import key_problem
    from bringup.ssh.knownhosts import _known_hosts_text
    from bringup.userfile import read_capped

    f = tmp_path / "kmsg"
    f.write_bytes(b"")
    f.chmod(0o600)
    _waiting_reads(monkeypatch, "/kmsg")
    with pytest.raises(InputError) as e:
        read_capped(f, 1024, InputError, missing="gone", unreadable="cannot read it: ", too_large="big")
    assert str(e.value) == "cannot read it: it waits for data (a kernel file such as /proc/kmsg), no file to read"
    with pytest.raises(Exception) as e:
        _from_file(str(f), "hosts.yml: host 'h1': ansible_become_password")
    assert "waits for data" in str(e.value) and "\n" not in str(e.value), str(e.value)
    assert "waits for data" in _known_hosts_text(f)
    assert key_problem(str(f)) == "empty (or a kernel file such as /proc/kmsg), no private key"
    # An ssh config's IdentityFile that is empty is passed over (ssh: "invalid format", then the next key), never
    # handed to paramiko, whose read would wait; the inventory's own ansible_ssh_private_key_file is refused.
    from bringup.ssh.keyfile import check_keys

    good = tmp_path / "id_ed25519"
    good.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    assert check_keys((str(f), str(good)), {}, "ssh config x", "h1") == (str(good),)
    from bringup.resources.upload import file_sha256  # a model or calibration file the inventory names (trt_engines)

    with pytest.raises(InputError) as e:
        file_sha256(f)
    assert "waits for data" in str(e.value) and "\n" not in str(e.value), str(e.value)


@pytest.mark.reliability(item=40, fault="control inputs: a bad connection variable was told as the inventory's error "
                                        "wherever it was set (--set ansible_port=1e308 named hosts.yml, host_vars/h1's "
                                        "value named the inventory)", variants=3, checks=("one clear line",))
def test_a_bad_connection_variable_names_the_place_that_set_it(tmp_path):
    from bringup.errors import InventoryError
    from bringup.inventory.hosts import load_inventory

    inv = tmp_path / "hosts.yml"
    inv.write_text("all:\n  hosts:\n    h1:\n      ansible_become: true\n")
    with pytest.raises(InventoryError) as e:
        load_inventory(inv, overrides={"ansible_port": "1e308"})
    assert str(e.value).startswith("--set: host 'h1': ansible_port must be"), str(e.value)
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "h1.yml").write_text("a: 1\nansible_sudo_flags: -E\n")
    with pytest.raises(InventoryError) as e:
        load_inventory(inv).hosts["h1"].refuse_become()
    assert str(e.value).startswith(f"{tmp_path / 'host_vars' / 'h1.yml'}:2: host 'h1': ansible_sudo_flags"), str(e.value)
    inv.write_text("all:\n  hosts:\n    h1:\n      x: 1\n      ansible_port: x\n")
    (tmp_path / "host_vars" / "h1.yml").unlink()
    with pytest.raises(InventoryError) as e:
        load_inventory(inv)
    assert str(e.value).startswith(f"{inv}:5: host 'h1': ansible_port must be"), str(e.value)
