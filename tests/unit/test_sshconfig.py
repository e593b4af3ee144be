"""Issue 32 item 3: where ``ssh`` (as Ansible runs it) would connect: ssh config, ``ansible_ssh_*args``, jumps.

Pure: no connection.  The ssh config files are written here; the DeepOps value is the one its
``config.example/inventory`` carries (``[all:vars]``, commented out there).
"""
from __future__ import annotations

import getpass
from pathlib import Path

import pytest

from bringup.errors import InventoryError
from bringup.inventory.hosts import ConnectionVars, Host
from bringup.ssh.sshargs import NO_EFFECT, parse_ssh_args
from bringup.ssh.sshconfig import check_routes, route

DEEPOPS = """-o ProxyCommand="ssh -W %h:%p -q ubuntu@10.0.0.1\""""

CONFIG = """\
Host bastion
  HostName 203.0.113.7
  User jump
  Port 2200
  IdentityFile ~/.ssh/bastion_key

Host inner
  HostName 10.9.0.2
  ProxyJump bastion

Host gpu-*
  User ops
  Port 2222
  IdentityFile /keys/gpu_key
  ProxyJump inner

Host direct-*
  HostName 10.1.1.1
  User cfg-user
"""


def host(name="gpu-01", **v) -> Host:
    return Host(name, ["all"], v, ConnectionVars.model_validate(v))


@pytest.fixture
def cfg(tmp_path) -> Path:
    p = tmp_path / "ssh_config"
    p.write_text(CONFIG)
    return p


def test_deepops_proxy_command_expands_host_and_port_as_ssh_would(tmp_path):
    r = route(host(ansible_host="10.0.0.5", ansible_port=2222, ansible_ssh_common_args=DEEPOPS),
              default_config=str(tmp_path / "none"))
    assert r.target.proxy_command == "ssh -W 10.0.0.5:2222 -q ubuntu@10.0.0.1"
    assert (r.target.hostname, r.target.port, r.target.user, r.target.jumps) == ("10.0.0.5", 2222, "root", ())


def test_ssh_config_fills_what_the_inventory_leaves_unset(cfg):
    r = route(host(ssh_config=str(cfg)))
    t = r.target
    assert (t.hostname, t.port, t.user, t.identity_files) == ("gpu-01", 2222, "ops", ("/keys/gpu_key",))
    # ProxyJump inner; inner's own ProxyJump bastion comes before it, each looked up in the file.
    (inner,) = t.jumps
    assert (inner.name, inner.hostname, inner.port) == ("inner", "10.9.0.2", 22)
    (bastion,) = inner.jumps
    assert (bastion.hostname, bastion.port, bastion.user) == ("203.0.113.7", 2200, "jump")
    assert bastion.identity_files == (str(Path("~/.ssh/bastion_key").expanduser()),)
    # A jump host's user, when nothing names one, is the local user (ssh -J's), not bringup's root.
    assert inner.user == getpass.getuser()


def test_a_value_without_tokens_asks_no_dns_for_the_control_machines_name(cfg, monkeypatch):
    # paramiko computes every token's value for a key that allows them (IdentityFile allows %l), the local
    # domain name through socket.getfqdn: a DNS lookup per value, seconds where the name does not resolve.
    import socket

    def no_dns(*a):
        raise AssertionError("socket.getfqdn called for a value with no token")

    monkeypatch.setattr(socket, "getfqdn", no_dns)
    assert route(host(ssh_config=str(cfg))).target.identity_files == ("/keys/gpu_key",)
    # A value with a token is still expanded (here ~, which needs no DNS).
    assert route(host("bastion", ssh_config=str(cfg))).target.identity_files == (
        str(Path("~/.ssh/bastion_key").expanduser()),)


@pytest.mark.parametrize("key", ["identityfile", "controlpath", "hostname", "user", "port", "proxyjump"])
@pytest.mark.parametrize("value", ["/keys/k", "~/.ssh/%r@%h:%p", "%C-%d-%h-%L-%l-%n-%p-%r-%u", "%%h %x ~", "%h%r%h"])
def test_a_keys_tokens_expand_as_paramiko_expands_them(monkeypatch, key, value):
    import socket

    import paramiko

    from bringup.ssh.sshconfig import _Config

    monkeypatch.setattr(socket, "getfqdn", lambda *a: "ctl.example")
    config = {"hostname": "10.0.0.9", "port": "2200", "user": "ops"}
    assert _Config()._tokenize(dict(config), "gpu-01", key, value) == \
        paramiko.SSHConfig()._tokenize(dict(config), "gpu-01", key, value)


def test_inventory_variables_win_over_ssh_config(cfg, tmp_path):
    key = tmp_path / "inv"
    key.write_text("a key\n")  # the inventory's key must exist (a missing one is refused before connecting)
    r = route(host(ssh_config=str(cfg), ansible_port=22, ansible_user="admin", ansible_ssh_private_key_file=str(key)))
    assert (r.target.port, r.target.user, r.target.identity_files) == (22, "admin", (str(key),))
    # ansible_host is the name ssh is given: the config's Host patterns match it, its HostName replaces it.
    r = route(host(ssh_config=str(cfg), ansible_host="direct-7"))
    assert (r.target.hostname, r.target.user, r.target.name) == ("10.1.1.1", "cfg-user", "direct-7")


def test_ansible_order_ssh_args_first_common_args_after_the_inventory():
    # Ansible: ssh_args, -o Port (ansible_port), ..., common_args, extra_args; ssh takes the first value.
    h = host(ansible_port=2200, ansible_ssh_args="-o Port=2300", ansible_ssh_common_args="-p 2400")
    assert route(h, default_config="/nonexistent").target.port == 2300
    h = host(ansible_port=2200, ansible_ssh_common_args="-p 2400", ansible_ssh_extra_args="-p 2500")
    assert route(h, default_config="/nonexistent").target.port == 2200
    h = host(ansible_ssh_common_args="-p 2400", ansible_ssh_extra_args="-p 2500 -l someone")
    r = route(h, default_config="/nonexistent").target
    assert (r.port, r.user) == (2400, "someone")


def test_several_hops_with_users_and_ports_and_the_first_of_jump_or_command_wins(cfg):
    h = host(ansible_ssh_common_args="-J a@hop1:2201,ssh://b@hop2:2202 -o ProxyCommand=none -F none")
    t = route(h).target
    assert [(j.user, j.hostname, j.port) for j in t.jumps] == [("a", "hop1", 2201), ("b", "hop2", 2202)]
    assert t.proxy_command is None
    # ProxyCommand first: ProxyJump after it (even from the config file) is not used.
    h = host(ssh_config=str(cfg), ansible_ssh_common_args="-o ProxyCommand='nc %h %p'")
    t = route(h).target
    assert t.proxy_command == "nc gpu-01 2222" and t.jumps == ()
    # ProxyJump none in the arguments turns off the file's ProxyJump.
    t = route(host(ssh_config=str(cfg), ansible_ssh_extra_args="-o ProxyJump=none")).target
    assert t.jumps == () and t.proxy_command is None


def test_config_file_named_by_F_or_variable_or_none(cfg, tmp_path):
    assert route(host(ansible_ssh_common_args=f"-F {cfg}")).config_file == str(cfg)
    assert route(host(ansible_ssh_common_args=f"-F{cfg}")).target.user == "ops"
    # -F none: no file at all, not even ~/.ssh/config.
    r = route(host(ansible_ssh_common_args="-F none"), default_config=str(cfg))
    assert r.config_file is None and r.target.user == "root" and r.target.jumps == ()
    # The default file is read when nothing names another.
    assert route(host(), default_config=str(cfg)).target.user == "ops"


def test_host_key_options():
    # A missing file: bringup makes it.  (/dev/null, ssh's idiom, is no known_hosts file: refused by the route,
    # test_sshconfig_hostile.py, as the login refused it before.)
    h = host(ansible_ssh_common_args="-o StrictHostKeyChecking=no -o UserKnownHostsFile=/nonexistent/kh")
    r = route(h, default_config="/nonexistent")
    # "no" is taken as accept-new: a key that changed is still refused.
    assert r.strict == "accept-new" and r.known_hosts == ("/nonexistent/kh",)
    h = host(ssh_known_hosts="/kh/own", ansible_ssh_common_args="-o StrictHostKeyChecking=yes -o "
                                                                  "'UserKnownHostsFile /kh/a /kh/b'")
    r = route(h, default_config="/nonexistent")
    assert r.strict == "yes" and r.known_hosts == ("/kh/own", "/kh/a", "/kh/b")
    assert route(host(), default_config="/nonexistent").strict is None


def test_no_effect_options_are_accepted_as_ansible_default_ssh_args():
    lines, config = parse_ssh_args("-C -o ControlMaster=auto -o ControlPersist=60s -q -tt -vvv", "x")
    assert lines == [] and config is None
    assert {"controlmaster", "controlpersist"} <= NO_EFFECT


@pytest.mark.reliability(item=32, fault="an ssh option bringup cannot honour in ansible_ssh_common_args",
                         checks=("one clear line",))
@pytest.mark.parametrize("args, named", [
    ("-o ForwardAgent=yes", "-o ForwardAgent"),
    ("-L 8080:localhost:80", "-L"),
    ("-4", "-4"),
    ("-o", "-o lacks its value"),
    ("-o ProxyCommand='unclosed", "check the quotes"),
    ("gpu01", "'gpu01' is not an ssh option"),
    ("-o Port", "not KEY=VALUE"),
])
def test_an_option_bringup_cannot_honour_is_one_line_naming_it(args, named):
    with pytest.raises(InventoryError) as e:
        route(host(ansible_ssh_common_args=args), default_config="/nonexistent")
    msg = str(e.value)
    assert "\n" not in msg and named in msg and "host 'gpu-01': ansible_ssh_common_args" in msg, msg


@pytest.mark.reliability(item=32, fault="an ssh config that bringup cannot honour (Include, HostKeyAlias, a loop, "
                                        "a missing file)", variants=5, checks=("one clear line",))
def test_config_refusals(tmp_path):
    def refused(text: str | None, *words: str, **v) -> None:
        p = tmp_path / "c"
        if text is not None:
            p.write_text(text)
        with pytest.raises(InventoryError) as e:
            route(host(ssh_config=str(p), **v))
        assert "\n" not in str(e.value) and all(w in str(e.value) for w in words), str(e.value)

    refused("Include ~/.ssh/config.d/*\n", "Include")
    refused("Host gpu-01\n  HostKeyAlias other\n", "hostkeyalias")
    refused("Host a\n  ProxyJump b\nHost b\n  ProxyJump a\nHost gpu-01\n  ProxyJump a\n", "reaches itself")
    refused("Host gpu-01\n  Port 70000\n", "the port", "70000")
    (tmp_path / "c").unlink()
    refused(None, "does not exist", "ssh_config")


@pytest.mark.reliability(item=32, fault="a jump host at another port of the same address (127.0.0.1:98 -> "
                                        "127.0.0.1:1) refused as a loop", variants=2, checks=("one clear line",))
def test_a_loop_is_the_same_host_at_the_same_port(tmp_path):
    none = str(tmp_path / "none")
    r = route(host(ansible_host="127.0.0.1", ansible_port=98, ansible_ssh_common_args="-J ju@127.0.0.1:1"),
              default_config=none)
    assert [(j.hostname, j.port) for j in r.target.jumps] == [("127.0.0.1", 1)]
    r = route(host(ansible_host="127.0.0.1", ansible_ssh_common_args="-J 127.0.0.1:2200,127.0.0.1:2201"),
              default_config=none)
    assert [j.port for j in r.target.jumps] == [2200, 2201]
    # The same address and port is still a loop, through the config's ProxyJump of a jump host.
    cfg = tmp_path / "c"
    cfg.write_text("Host a\n  HostName 10.0.0.9\n  ProxyJump b\nHost b\n  ProxyJump a\n")
    with pytest.raises(InventoryError) as e:
        route(host(ansible_host="10.0.0.5", ssh_config=str(cfg), ansible_ssh_common_args="-J a"), default_config=none)
    assert "reaches itself" in str(e.value) and "a:22 > b:22 > a:22" in str(e.value), str(e.value)


def test_check_routes_skips_local_hosts_and_raises_for_ssh_ones():
    check_routes([host(ansible_connection="local", ansible_ssh_common_args="-L 1:2:3")])
    with pytest.raises(InventoryError):
        check_routes([host(ansible_ssh_common_args="-L 1:2:3")])


@pytest.mark.reliability(item=32, fault="an ssh option bringup cannot honour, through the CLI",
                         checks=("one clear line", "exit code", "nothing touched"))
def test_cli_refuses_before_connecting(tmp_path):
    """Through the CLI: exit 1, one ``error:`` line naming the host, the variable and the option; nothing
    connected (the address is 127.0.0.1 port 9, a listener here would have seen a connection) and no report."""
    import socket
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(0.5)
        port = listener.getsockname()[1]
        (tmp_path / "hosts").write_text(
            "all:\n  hosts:\n    h1:\n      ansible_host: 127.0.0.1\n"
            f"      ansible_port: {port}\n      ansible_ssh_common_args: -o ForwardAgent=yes -C\n")
        r = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(repo), "provision", "--host", "h1",
                            "--check"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
        with pytest.raises(socket.timeout):
            listener.accept()  # nothing connected
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 1 and "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert "host 'h1': ansible_ssh_common_args: ssh option -o ForwardAgent is not supported" in lines[0], lines[0]
    assert not (tmp_path / "reports").exists()


def test_what_the_connection_variables_set_counts_not_their_defaults(cfg):
    """A Host made in code (its vars empty, its connection validated): what the model was given wins over the
    config file, a default (port 22, ~/.ssh/known_hosts, 10 s) does not."""
    conn = ConnectionVars(ansible_port=2022, ssh_known_hosts="/kh/x", ssh_connect_timeout=4)
    r = route(Host("gpu-01", ["all"], {}, conn), default_config=str(cfg))
    assert (r.target.port, r.known_hosts, r.connect_timeout) == (2022, ("/kh/x",), 4.0)
    r = route(Host("gpu-01", ["all"], {}, ConnectionVars()), default_config=str(cfg))
    assert r.target.port == 2222  # the config's
