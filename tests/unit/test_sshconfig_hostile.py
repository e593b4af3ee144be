"""Issue 40 items 1, 3 and 4: inventory data that reaches the ssh config never runs on the control machine,
the config file is read bounded, and a file that is no ssh config is never quoted back.

The ProxyCommand bringup would run is run here for real (``sh -c 'exec ...'``, as
:func:`bringup.ssh.jumps.proxy_command` runs it) with ``printf`` in place of ``ssh``: the words it prints are the
values as data, and the marker file a ``;``, ``$(...)`` or backtick would create stays absent.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from bringup.errors import InventoryError
from bringup.inventory.hosts import ConnectionVars, Host
from bringup.ssh.sshconfig import route


def host(name="gpu-01", **v) -> Host:
    # ansible_host is set past its own check (a host name or IP address): the host's inventory name stands in
    # for it where it is missing, and a name may hold what the check refuses, so the quoting is tested alone.
    conn = ConnectionVars.model_validate({k: x for k, x in v.items() if k != "ansible_host"})
    return Host(name, ["all"], v, conn.model_copy(update={"ansible_host": v.get("ansible_host")}))


def _hostile(marker: Path) -> list[str]:
    m = str(marker)
    return [f"x;touch {m}", f"$(touch {m})", f"`touch {m}`", f"x|touch {m}", f"x&&touch {m}", f"x\ntouch {m}",
            f"x' ; touch {m}; '", f'x" ; touch {m}; "', "x%r%p%%", f"x$IFS;touch$IFS{m}"]


@pytest.mark.reliability(item=40, fault="ansible_host / ansible_user expanded into a ProxyCommand (%h %r %p): "
                                        "; $() backticks | && quotes newline, in one shell and in a nested "
                                        "sh -c \"...\"", variants=10,
                         checks=("nothing executed", "one clear line"))
@pytest.mark.parametrize("nested", [False, True], ids=["one-shell", "nested-shell"])
@pytest.mark.parametrize("var", ["ansible_host", "ansible_user"])
def test_proxy_command_refuses_shell_characters_in_its_tokens(tmp_path, var, nested):
    """Quoting a token holds for one shell only: ``sh -c "printf %h"`` hands the quoted word to a second shell,
    which would run ``$(...)``.  So a token's value holding shell characters is refused (OpenSSH 9.6's rule),
    whatever the command does with it; the command is run for real to show nothing ran either way."""
    marker = tmp_path / "ran"
    args = ("-o ProxyCommand=\"sh -c \\\"printf '<%s>' %h %r %p\\\"\"" if nested
            else "-o ProxyCommand=\"printf '<%s>' %h %r %p\"")
    for value in _hostile(marker):
        v = {"ansible_host": "10.0.0.5", "ansible_user": "ops", var: value, "ansible_ssh_common_args": args}
        try:
            r = route(host(**v), default_config=str(tmp_path / "none"))
        except InventoryError as e:
            line = str(e)
            assert "\n" not in line and value not in line and not marker.exists(), line
            # "x%r%p%%" as the address: no host name, refused by the route's own address rule (before any
            # connection; the login refused it before), so its ProxyCommand is never made.
            assert ("control character" in line and var == "ansible_user") or (
                "ProxyCommand pastes %" in line and "plain host name" in line) or (
                "the address to connect to" in line and var == "ansible_host" and value == "x%r%p%%"), line
            continue
        # Only a value with nothing a shell reads gets through ("x%r%p%%" is letters and % signs).
        subprocess.run(["sh", "-c", "exec " + r.target.proxy_command], capture_output=True, timeout=30)
        assert value == "x%r%p%%" and not marker.exists(), (value, r.target.proxy_command)


@pytest.mark.reliability(item=40, fault="ansible_user starting with '-' pasted by %r before another word of a "
                                        "ProxyCommand (ssh %r@jump: an ssh option that runs a command)", variants=1,
                         checks=("nothing executed", "one clear line"))
def test_a_user_that_is_an_option_is_refused_in_a_proxy_command(tmp_path):
    # `ssh %r@jump` with the user `-oProxyCommand=touch...` hands ssh an option, not a user: ssh would run the
    # command (found by a hostile-input pass; OpenSSH refuses such users and hosts itself).  Run for real.
    marker = tmp_path / "ran"
    prog = tmp_path / "pwn.sh"
    prog.write_text(f"#!/bin/sh\ntouch {marker}\n")
    prog.chmod(0o755)
    v = {"ansible_host": "10.0.0.5", "ansible_user": f"-oProxyCommand={prog}",
         "ansible_ssh_common_args": "-o ProxyCommand=\"ssh %r@jump -W %h:%p\""}
    _route_refused(host(**v), tmp_path, "ProxyCommand pastes %r", "starts with '-'")
    assert not marker.exists()


def test_nested_proxy_command_expands_plain_values(tmp_path):
    r = route(host(ansible_host="10.0.0.5", ansible_user="ops",
                   ansible_ssh_common_args='-o ProxyCommand="sh -c \\"printf [%s] %h %r %p\\""'),
              default_config=str(tmp_path / "none"))
    out = subprocess.run(["sh", "-c", "exec " + r.target.proxy_command], capture_output=True, text=True, timeout=30)
    assert out.stdout == "[10.0.0.5][ops][22]", (r.target.proxy_command, out)


def test_plain_names_expand_as_ssh_does(tmp_path):
    r = route(host(ansible_host="gpu-01.example", ansible_port=2222,
                   ansible_ssh_common_args='-o ProxyCommand="ssh -W %h:%p -l %r jump %%"'),
              default_config=str(tmp_path / "none"))
    assert r.target.proxy_command == "ssh -W gpu-01.example:2222 -l root jump %"


@pytest.mark.reliability(item=40, fault="a newline or control character in ansible_user / ansible_port / key path "
                                        "(an ssh option smuggled into the config)", variants=3,
                         checks=("nothing executed", "one clear line"))
def test_a_value_cannot_add_a_line_to_the_config(tmp_path):
    marker = tmp_path / "ran"
    key = tmp_path / "k"
    key.write_text("x")
    for v in ({"ansible_user": f"root\n  ProxyCommand touch {marker}"},
              {"ansible_user": "root\x1b[2J"},
              {"ansible_ssh_private_key_file": f"{key}\nProxyCommand touch {marker}"}):
        with pytest.raises(InventoryError) as e:
            route(host(ansible_host="10.0.0.5", **v), default_config=str(tmp_path / "none"))
        assert "\n" not in str(e.value) and not marker.exists(), str(e.value)


@pytest.mark.reliability(item=40, fault="a Match exec of the operator's config with a hostile %h, plain and in a "
                                        "nested sh -c", variants=4, checks=("nothing executed", "one clear line"))
def test_match_exec_quotes_the_host(tmp_path):
    """paramiko runs ``Match exec`` through Invoke (which reads stdin: run in a process of its own here)."""
    marker = tmp_path / "ran"
    code = ("from bringup.inventory.hosts import ConnectionVars, Host; from bringup.ssh.sshconfig import route; "
            "from bringup.errors import InventoryError; import sys; "
            "v = {'ansible_host': sys.argv[1], 'ssh_config': sys.argv[2]}\n"
            "c = ConnectionVars.model_validate({'ssh_config': v['ssh_config']})"
            ".model_copy(update={'ansible_host': v['ansible_host']})\n"
            "try: print(route(Host('h', ['all'], v, c)).target.port)\n"
            "except InventoryError as e: print('refused:', e)")
    for i, line in enumerate(['Match exec "test %h = never"', 'Match exec "sh -c \\"test %h = never\\""']):
        cfg = tmp_path / f"cfg{i}"
        cfg.write_text(f"{line}\n  Port 2200\n")
        for address, want in ((f"x;touch {marker}", "refused: host 'h': Match exec pastes %h"),
                              (f"$(touch {marker})", "refused: host 'h': Match exec pastes %h"),
                              ("gpu-01.example", "22")):
            r = subprocess.run([sys.executable, "-c", code, address, str(cfg)], stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parents[2])
            assert not marker.exists() and r.stdout.strip().startswith(want), (line, address, r.stdout + r.stderr)


def _refused(tmp_path, config: str, *words: str) -> str:
    with pytest.raises(InventoryError) as e:
        route(host(ansible_host="10.0.0.5", ssh_config=config), default_config=str(tmp_path / "none"))
    line = str(e.value)
    assert "\n" not in line and all(w in line for w in words), line
    return line


@pytest.mark.reliability(item=40, fault="ssh_config naming /dev/zero, a FIFO with no writer, a folder, a 2 MiB "
                                        "file, binary", variants=5, checks=("one clear line",))
def test_ssh_config_reads_are_bounded(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    big = tmp_path / "big"
    big.write_text("# x\n" * (600 * 1024))
    binary = tmp_path / "bin"
    binary.write_bytes(b"\xff\xfe\x00\x01" * 10)
    done: list[str] = []
    t = threading.Thread(target=lambda: done.append(_refused(tmp_path, str(fifo), "not a regular file")),
                         daemon=True)
    t.start()
    t.join(20)
    assert done, "a FIFO with no writer made the read wait"
    _refused(tmp_path, "/dev/zero", "not a regular file")
    _refused(tmp_path, str(tmp_path), "not a regular file")
    _refused(tmp_path, str(big), "larger than")
    _refused(tmp_path, str(binary), "not UTF-8")


@pytest.mark.reliability(item=40, fault="a file that is no ssh_config (/etc/shadow-like) named as ssh_config",
                         variants=2, checks=("secret never shown", "one clear line"))
def test_a_file_that_is_no_ssh_config_is_never_quoted(tmp_path):
    shadow = tmp_path / "shadow"
    secret = "$y$j9T$Zm9vYmFyYmF6cXV4$SECRETHASHVALUE"
    shadow.write_text(f"root:{secret}:19700:0:99999:7:::\ndaemon:*:19700:0:99999:7:::\n")
    line = _refused(tmp_path, str(shadow), "line 1", "ssh config")
    assert "SECRETHASH" not in line and "root:" not in line
    # A line paramiko itself cannot parse (a keyword with no value) is named without its text too.
    odd = tmp_path / "odd"
    odd.write_text("Host a\n  PasswordFromHere\n")
    line = _refused(tmp_path, str(odd), "line 2")
    assert "PasswordFromHere" not in line


@pytest.mark.reliability(item=40, fault="ProxyCommand %h through the CLI: an inventory host whose ansible_host "
                                        "holds a command", variants=1,
                         checks=("nothing executed", "exit code"))
def test_through_the_cli_a_hostile_address_runs_nothing(tmp_path):
    repo = Path(__file__).resolve().parents[2]
    marker = tmp_path / "ran"
    # The host's name stands in for its missing ansible_host (an ansible_host like it is refused as no address).
    (tmp_path / "hosts").write_text(
        "all:\n  hosts:\n    'x$(touch ran)':\n"
        "      ssh_connect_timeout: 5\n"
        "      ansible_ssh_common_args: -o ProxyCommand=\"sh -c 'exit 3' %h\"\n")
    r = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(repo), "facts", "--host",
                        "x$(touch ran)"], cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert not marker.exists(), r.stdout + r.stderr
    assert r.returncode != 0 and "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr


@pytest.mark.reliability(item=40, fault="ssh_known_hosts naming a file that is no known_hosts file (a shadow file, "
                         "a folder, a FIFO, /dev/zero)", variants=4, checks=("one clear line", "nothing touched"))
def test_a_known_hosts_path_that_is_no_known_hosts_file_is_refused_unread_and_unwritten(tmp_path):
    """Found by a hostile-input review: --accept-new-host-keys appended a host key to /etc/shadow named as
    ssh_known_hosts, /dev/zero ended in MemoryError, a FIFO hung, a folder was a traceback."""
    import os

    import paramiko

    from bringup.errors import BringupError
    from bringup.ssh.jumps import Way

    shadow = tmp_path / "shadow"
    shadow.write_text("root:$6$secret-hash:20228:0:99999:7:::\n")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, words in ((shadow, "line 1 is not a known_hosts entry"), (tmp_path, "a folder"),
                        (fifo, "not a regular file"), ("/dev/zero", "not a regular file")):
        way = Way(known_hosts=(str(path),), accept_new=True, connect_timeout=3, keepalive=0)
        with pytest.raises(BringupError) as e:
            way.prepare(paramiko.SSHClient())
        said = str(e.value)
        assert words in said and "\n" not in said and "secret-hash" not in said, said
    assert shadow.read_text() == "root:$6$secret-hash:20228:0:99999:7:::\n"
    good = tmp_path / "kh"
    key = paramiko.ECDSAKey.generate()
    good.write_text(f"# made here\n[127.0.0.1]:2222 {key.get_name()} {key.get_base64()}\n")
    Way(known_hosts=(str(good),), accept_new=True, connect_timeout=3, keepalive=0).prepare(paramiko.SSHClient())


def _route_refused(h: Host, tmp_path: Path, *words: str) -> str:
    """``route(h)`` refused with one line holding ``words``, within 20 s (a FIFO read would wait for ever)."""
    done: list[str] = []

    def run() -> None:
        try:
            route(h, default_config=str(tmp_path / "none"))
            done.append("(taken)")
        except InventoryError as e:
            done.append(str(e))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(20)
    assert done, "a key file was read (a FIFO waits for a writer)"
    line = done[0]
    assert "\n" not in line and all(w in line for w in words), line
    return line


@pytest.mark.reliability(item=40, fault="a private key named as a FIFO, /dev/zero, a 2 MiB sparse file (ssh_config "
                                        "IdentityFile, -i, -o IdentityFile=, ansible_ssh_private_key_file, a jump "
                                        "host's IdentityFile): hung or read whole", variants=6,
                         checks=("no hang", "one clear line"))
def test_an_identity_file_that_is_no_private_key_is_refused_unread(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    big = tmp_path / "big"
    with open(big, "wb") as f:
        f.truncate(2 << 20)
    cfg = tmp_path / "cfg"
    cfg.write_text(f"Host gpu-01\n  IdentityFile {fifo}\nHost bastion\n  IdentityFile {big}\n")
    _route_refused(host(ssh_config=str(cfg)), tmp_path, f"IdentityFile {fifo}", f"ssh config {cfg}",
                   "not a regular file")
    _route_refused(host(ansible_ssh_common_args=f"-i {fifo}"), tmp_path, f"IdentityFile {fifo}",
                   "ansible_ssh_common_args", "not a regular file")
    _route_refused(host(ansible_ssh_extra_args="-o IdentityFile=/dev/zero"), tmp_path, "IdentityFile /dev/zero",
                   "ansible_ssh_extra_args", "not a regular file")
    _route_refused(host(ansible_ssh_common_args=f"-o IdentityFile={big}"), tmp_path, "larger than 1 MiB")
    _route_refused(host(ansible_ssh_private_key_file=str(big)), tmp_path, "ansible_ssh_private_key_file",
                   "larger than 1 MiB")
    _route_refused(host(ansible_ssh_private_key_file=str(fifo)), tmp_path, "ansible_ssh_private_key_file",
                   "not a regular file")
    _route_refused(host(ssh_config=str(cfg), ansible_ssh_common_args="-J bastion"), tmp_path,
                   "jump host bastion", f"IdentityFile {big}", "larger than 1 MiB")
    # A key of a key's size is taken, and a missing IdentityFile of the config is passed over, as ssh does.
    key = tmp_path / "key"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    assert route(host(ansible_ssh_common_args=f"-i {key} -i {tmp_path / 'gone'}"),
                 default_config=str(tmp_path / "none")).target.identity_files == (str(key), str(tmp_path / "gone"))


@pytest.mark.reliability(item=40, fault="an ssh_config Match exec that never ends (\"sleep 100\") or floods its output "
                                        "(\"yes\"): the run hung before connecting, Invoke keeping all the output",
                         variants=2, checks=("no hang", "one clear line"))
def test_match_exec_is_bounded_by_the_connect_timeout(tmp_path):
    import time

    for i, command in enumerate(("sleep 100", "yes")):
        cfg = tmp_path / f"cfg{i}"
        cfg.write_text(f'Match exec "{command}"\n  Port 2200\n')
        t0 = time.monotonic()
        _route_refused(host(ansible_host="10.0.0.5", ssh_config=str(cfg), ssh_connect_timeout=2), tmp_path,
                       "Match exec", f"ssh config {cfg}", "ran past 2 s", "ssh_connect_timeout")
        assert time.monotonic() - t0 < 12, command
    # A command that finishes decides the match as before.
    for command, port in (("true", 2200), ("false", 22)):
        cfg = tmp_path / "cfg"
        cfg.write_text(f'Match exec "{command}"\n  Port 2200\n')
        r = route(host(ansible_host="10.0.0.5", ssh_config=str(cfg), ssh_connect_timeout=2),
                  default_config=str(tmp_path / "none"))
        assert r.target.port == port, command


@pytest.mark.reliability(item=40, fault="a jump host whose address the resolver fills in as another host's "
                                        "(-J 10.1, a HostName of 0x10)", variants=2, checks=("one clear line",))
def test_a_jump_hosts_address_is_held_to_the_targets_rule(tmp_path):
    # inet_aton reads 10.1 as 10.0.0.1: the target's address was refused, a jump host's was dialled (review).
    _route_refused(host(ansible_ssh_common_args="-J ops@10.1"), tmp_path, "jump host 10.1",
                   "a number that is no dotted-quad IPv4 address")
    cfg = tmp_path / "cfg"
    cfg.write_text("Host bastion\n  HostName 0x10\n")
    _route_refused(host(ssh_config=str(cfg), ansible_ssh_common_args="-J bastion"), tmp_path,
                   "jump host bastion: its address '0x10'", "a number that is no dotted-quad IPv4 address")


@pytest.mark.reliability(item=40, fault="a path variable holding a NUL byte (ssh_config, -F, ssh_known_hosts, "
                                        "ansible_ssh_private_key_file): a ValueError traceback", variants=4,
                         checks=("one clear line",))
def test_a_path_holding_a_nul_byte_is_one_line_naming_the_variable(tmp_path):
    # os.open / os.stat raise ValueError for such a name (not OSError): read_capped, key_problem and
    # known_hosts_problem let it through as a traceback, or an "internal error" once connecting.
    assert _route_refused(host(ssh_config="/tmp\0x"), tmp_path) == (
        "host 'gpu-01': ssh_config: cannot read ssh config file /tmp\0x: a path holding a NUL byte")
    assert _route_refused(host(ansible_ssh_common_args="-F /tmp\0x"), tmp_path) == (
        "host 'gpu-01': ansible_ssh_common_args -F: cannot read ssh config file /tmp\0x: a path holding a NUL byte")
    assert _route_refused(host(ssh_known_hosts="/tmp/kh\0x"), tmp_path) == (
        "host 'gpu-01': known_hosts file /tmp/kh\0x (set by ssh_known_hosts): a path holding a NUL byte; name a "
        "known_hosts file (ssh_known_hosts, UserKnownHostsFile), or a path where bringup may make one")
    # A key's path goes into the config paramiko reads: refused there, as any control character.
    assert _route_refused(host(ansible_ssh_private_key_file="/tmp/k\0x"), tmp_path) == (
        "host 'gpu-01': the IdentityFile value '/tmp/k\\x00x' holds a control character (a newline would add an ssh "
        "option of its own); give it on one line, in plain text")
    from bringup.ssh.keyfile import key_problem
    assert key_problem("/tmp/k\0x") == "a path holding a NUL byte"  # and its look, should anything else ask


@pytest.mark.reliability(item=40, fault="a known_hosts file that is none (/etc/passwd, /dev/zero, a FIFO, a 1 GiB "
                                        "sparse file; ssh_known_hosts or -o UserKnownHostsFile=) or an address that "
                                        "is none (-o HostName=*, 10.99, HostName %r): refused only at the login",
                         variants=8, checks=("one clear line",))
def test_a_known_hosts_file_or_an_address_that_is_none_is_refused_by_the_route(tmp_path):
    # The route is the input check (check_routes): such a host used to pass it, and fail at its login with a run
    # report and exit 2, where docs/inventory.md promises one line before anything connects.
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\n")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    big = tmp_path / "big"
    with open(big, "wb") as f:
        f.truncate(1 << 30)
    fix = "; name a known_hosts file (ssh_known_hosts, UserKnownHostsFile), or a path where bringup may make one"
    for path, why in ((passwd, "line 1 is not a known_hosts entry (hosts, key type, key): not a known_hosts file"),
                      ("/dev/zero", "not a regular file"), (fifo, "not a regular file"),
                      (big, "larger than 64 MiB, not a known_hosts file")):
        assert _route_refused(host(ssh_known_hosts=str(path)), tmp_path) == (
            f"host 'gpu-01': known_hosts file {path} (set by ssh_known_hosts): {why}{fix}")
    assert _route_refused(host(ansible_ssh_common_args=f"-o UserKnownHostsFile={passwd}"), tmp_path) == (
        f"host 'gpu-01': known_hosts file {passwd} (set by UserKnownHostsFile): line 1 is not a known_hosts entry "
        f"(hosts, key type, key): not a known_hosts file{fix}")
    address = "; set ansible_host (or HostName in the ssh config) to the host's name or IP address"
    assert _route_refused(host(ansible_ssh_common_args="-o HostName=10.99"), tmp_path) == (
        "host 'gpu-01': the address to connect to is a number that is no dotted-quad IPv4 address: the resolver "
        "would read it as one, filling in zeros ('10.1' is 10.0.0.1, '1.5' 1.0.0.5) and hex or octal parts ('0x10', "
        f"'010'); write the address's four decimal parts, or the host's name{address}")
    pattern = ("host 'gpu-01': the address to connect to is not a host name or IP address (letters, digits, '.', '-', "
               "'_', or an IPv6 address; no port, user, space or pattern characters such as ',', '*', '?', '!', '@', "
               f"':'){address}")
    assert _route_refused(host(ansible_ssh_common_args="-o HostName=*"), tmp_path) == pattern
    cfg = tmp_path / "cfg"
    cfg.write_text("Host gpu-*\n  HostName %r\n")
    assert _route_refused(host(ssh_config=str(cfg)), tmp_path) == pattern
    # A known_hosts file that is one, or none yet (bringup makes it), is taken.
    good = tmp_path / "kh"
    good.write_text("# made here\n[127.0.0.1]:2222 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMq\n")
    for path in (good, tmp_path / "new"):
        assert route(host(ssh_known_hosts=str(path)), default_config=str(tmp_path / "none")).known_hosts == (
            str(path),)


@pytest.mark.reliability(item=40, fault="ansible_user / ansible_host pasted by %r / %h into a ProxyJump of the "
                                        "operator's config: a user 'x@attacker:2222,y' added a jump host",
                         variants=6, checks=("one clear line",))
@pytest.mark.parametrize("var,value", [("ansible_user", "x@203.0.113.9:2222,y"), ("ansible_user", "a,evil"),
                                       ("ansible_user", "u:2200"), ("ansible_user", "-oProxyCommand=x"),
                                       ("ansible_user", "a b"), ("ansible_host", "gpu,203.0.113.9")])
def test_a_proxy_jump_token_cannot_add_or_change_a_jump_host(tmp_path, var, value):
    cfg = tmp_path / "cfg"
    cfg.write_text("Host 10.0.0.5\n  ProxyJump %r@bastion.example:2200\n" if var == "ansible_user" else
                   "Host *\n  ProxyJump ops@%h-jump\n")
    v = {"ansible_host": "10.0.0.5", "ansible_user": "ops", var: value, "ssh_config": str(cfg)}
    with pytest.raises(InventoryError) as e:
        route(host(**v), default_config=str(tmp_path / "none"))
    line = str(e.value)
    assert "\n" not in line and "ProxyJump pastes %" in line and "203.0.113.9" not in line, line


def test_a_proxy_jump_token_of_a_plain_value_is_expanded_once(tmp_path):
    cfg = tmp_path / "cfg"
    cfg.write_text("Host 10.0.0.5\n  ProxyJump %r@bastion.example:2200\n")
    r = route(host(ansible_host="10.0.0.5", ansible_user="ops%h", ssh_config=str(cfg)),
              default_config=str(tmp_path / "none"))
    assert [(j.user, j.hostname, j.port) for j in r.target.jumps] == [("ops%h", "bastion.example", 2200)]


@pytest.mark.reliability(item=40, fault="ansible_user pasted by %r into an IdentityFile of the operator's config "
                                        "(IdentityFile ~/.ssh/keys/%r): '../k', '..' or a newline made it a key "
                                        "outside that folder", variants=3, checks=("one clear line",))
@pytest.mark.parametrize("user", ["../other", "..", "a/../../b"])
def test_an_identity_file_token_cannot_step_out_of_its_folder(tmp_path, user):
    cfg = tmp_path / "cfg"
    cfg.write_text(f"Host 10.0.0.5\n  IdentityFile {tmp_path}/keys/%r\n")
    with pytest.raises(InventoryError) as e:
        route(host(ansible_host="10.0.0.5", ansible_user=user, ssh_config=str(cfg)),
              default_config=str(tmp_path / "none"))
    line = str(e.value)
    assert "\n" not in line and "IdentityFile pastes %r" in line, line


def test_an_identity_file_token_of_a_directory_users_name_is_expanded(tmp_path):
    cfg = tmp_path / "cfg"
    cfg.write_text(f"Host 10.0.0.5\n  IdentityFile {tmp_path}/keys/%r\n")
    r = route(host(ansible_host="10.0.0.5", ansible_user="jdoe@corp.example", ssh_config=str(cfg)),
              default_config=str(tmp_path / "none"))
    assert r.target.identity_files == (f"{tmp_path}/keys/jdoe@corp.example",)
