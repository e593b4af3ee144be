"""Secrets: {env}/{file} references, the masker, the Ansible passwords, registry_auths, report files."""
from __future__ import annotations

import base64
import io
import json
import os
import sys
from pathlib import Path

import pytest

from bringup.errors import InputError, InventoryError
from bringup.inventory.hosts import load_inventory
from bringup.resources.privatejson import PrivateJsonFile, docker_auth
from bringup.engine.roles import HostContext, Role
from bringup.secrets import HIDDEN, MASK, MaskedStream, Masker, SecretStr, holds_secret, resolve_refs, reveal

pytestmark = pytest.mark.reliability(item=2, fault='secrets: env and 0600 file references, masked in output, diff, reports and errors (unit)')

TOKEN = "nvapi-Zq7tT0k3n-for-tests-9d1"


def inv(tmp_path, text):
    p = tmp_path / "hosts"
    p.write_text(text)
    return load_inventory(p)


def secret_file(tmp_path, text=TOKEN + "\n", mode=0o600) -> Path:
    p = tmp_path / "ngc.key"
    p.write_text(text)
    p.chmod(mode)
    return p


# -- references ------------------------------------------------------------------------------

def test_env_and_file_references_resolve_to_secretstr_anywhere(tmp_path, monkeypatch):
    monkeypatch.setenv("NGC_API_KEY", TOKEN)
    key = secret_file(tmp_path, "sudo-pw\n")
    h = inv(tmp_path, f"""
all:
  hosts:
    h:
      ansible_become_password: {{file: {key}}}
      registry_auths: {{nvcr.io: {{username: $oauthtoken, password: {{env: NGC_API_KEY}}}}}}
""").host("h")
    pw = h.vars["registry_auths"]["nvcr.io"]["password"]
    assert isinstance(pw, SecretStr) and pw.get_secret_value() == TOKEN
    assert h.connection.ansible_become_password.get_secret_value() == "sudo-pw"  # trailing newline dropped
    assert TOKEN not in repr(h) and "sudo-pw" not in repr(h) and "sudo-pw" not in str(h.connection)
    assert reveal(h.vars["registry_auths"]) == {"nvcr.io": {"username": "$oauthtoken", "password": TOKEN}}


def test_unset_env_is_one_line_naming_host_and_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("NGC_API_KEY", raising=False)
    with pytest.raises(InventoryError) as e:
        inv(tmp_path, "all: {hosts: {h: {registry_auths: {nvcr.io: {username: u, password: {env: NGC_API_KEY}}}}}}")
    msg = str(e.value)
    assert "\n" not in msg
    assert ("host 'h': registry_auths.nvcr.io.password: secret reference {env: 'NGC_API_KEY'}: environment variable "
            "NGC_API_KEY is not set") in msg
    assert "export NGC_API_KEY=" in msg


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_secret_file_readable_by_others_is_refused_with_the_fix(tmp_path, mode):
    key = secret_file(tmp_path, mode=mode)
    with pytest.raises(InventoryError) as e:
        inv(tmp_path, f"all: {{hosts: {{h: {{ansible_password: {{file: {key}}}}}}}}}")
    msg = str(e.value)
    assert f"is mode {mode:04o}" in msg and f"chmod 600 {key}" in msg and TOKEN not in msg


def test_secret_file_must_be_a_regular_file_and_exist(tmp_path):
    key = secret_file(tmp_path)
    link = tmp_path / "link.key"
    link.symlink_to(key)
    with pytest.raises(InventoryError, match="not a regular file"):
        resolve_refs({"bringup_secret": {"file": str(link)}}, "hosts", Masker())
    with pytest.raises(InventoryError, match="does not exist"):
        resolve_refs({"bringup_secret": {"file": str(tmp_path / "nope")}}, "hosts", Masker())
    with pytest.raises(InventoryError, match="more than one line"):
        resolve_refs({"bringup_secret": {"file": str(secret_file(tmp_path, "a\nb\n"))}}, "hosts", Masker())
    with pytest.raises(InventoryError, match="must name an environment variable"):
        resolve_refs({"bringup_secret": {"env": "NO-SUCH NAME"}}, "hosts", Masker())


def test_a_secret_file_path_holding_a_nul_byte_is_one_line(tmp_path):
    # os.lstat raises ValueError (not OSError) for such a name: it was a traceback during `bringup hosts`.
    with pytest.raises(InventoryError) as e:
        resolve_refs({"ansible_become_password": {"file": "/tmp/x\0y"}}, "hosts: host 'h1'", Masker())
    assert str(e.value) == ("hosts: host 'h1': ansible_become_password: secret reference {file: '/tmp/x\\x00y'}: "
                            "file is a path holding a NUL byte; write the secret file's path")


@pytest.mark.reliability(item=41, fault="a secret reference's file of 1 GiB (mode 0600): read whole, 16 s then a "
                                        "MemoryError traceback", variants=2, checks=("one clear line",
                                                                                    "secret never shown"))
def test_a_secret_file_larger_than_a_secret_is_refused_unread(tmp_path):
    big = tmp_path / "big.key"
    with open(big, "wb") as f:
        f.write(b"TOPSECRETSTART")
        f.truncate(1 << 30)  # sparse: no disk used
    big.chmod(0o600)
    with pytest.raises(InventoryError) as e:
        resolve_refs({"bringup_secret": {"file": str(big)}}, "hosts", Masker())
    msg = str(e.value)
    assert "larger than 1024 KiB" in msg and str(big) in msg and "\n" not in msg and "TOPSECRET" not in msg, msg
    # Just past the cap, read or not, the same line.
    big.write_bytes(b"x" * ((1 << 20) + 1))
    with pytest.raises(InventoryError, match="larger than 1024 KiB"):
        resolve_refs({"bringup_secret": {"file": str(big)}}, "hosts", Masker())


def test_a_mapping_with_other_keys_is_not_a_reference(tmp_path):
    assert resolve_refs({"env": "X", "other": 1}, "w", Masker()) == {"env": "X", "other": 1}


@pytest.mark.reliability(item=41, fault="a variable whose value is an ordinary one-key mapping {env: production} / "
                                        "{file: x}", variants=2, checks=("one clear line", "secret never shown"))
def test_ordinary_one_key_mappings_are_data_and_the_tag_is_a_reference(tmp_path, monkeypatch):
    """Issue 41 item 6: `{env: production}` was read as "the environment variable production" (and refused, naming
    only the variable).  Untagged it is data, except in a variable that only takes a secret text; tagged, it is a
    reference anywhere, and its error line says the reference as written."""
    monkeypatch.setenv("NGC_API_KEY", TOKEN)
    monkeypatch.delenv("production", raising=False)
    key = secret_file(tmp_path, "sudo-pw\n")
    h = inv(tmp_path, f"""
all:
  hosts:
    h:
      deploy: {{env: production}}
      labels: [{{file: x}}, {{env: prod, tier: 1}}]
      site_token: {{bringup_secret: {{env: NGC_API_KEY}}}}
      nested: {{a: {{bringup_secret: {{file: {key}}}}}}}
      ansible_become_password: {{file: {key}}}
      registry_auths: {{nvcr.io: {{username: $oauthtoken, password: {{env: NGC_API_KEY}}}}}}
""").host("h")
    assert h.vars["deploy"] == {"env": "production"}
    assert h.vars["labels"] == [{"file": "x"}, {"env": "prod", "tier": 1}]
    assert isinstance(h.vars["site_token"], SecretStr) and h.vars["site_token"].get_secret_value() == TOKEN
    assert h.vars["nested"]["a"].get_secret_value() == "sudo-pw"
    # The old spelling where it cannot be data: the passwords.
    assert h.connection.ansible_become_password.get_secret_value() == "sudo-pw"
    assert h.vars["registry_auths"]["nvcr.io"]["password"].get_secret_value() == TOKEN

    with pytest.raises(InventoryError) as e:
        inv(tmp_path, "all: {hosts: {h: {deploy: {bringup_secret: {env: production}}}}}")
    assert str(e.value).endswith("hosts: host 'h': deploy: secret reference {bringup_secret: {env: 'production'}}: "
                                 "environment variable production is not set on the control machine; export "
                                 "production=... before the run (its value is never printed)"), str(e.value)
    # The tag holding text (perhaps the secret itself, written in the wrong place): its kind, never its text.
    with pytest.raises(InventoryError) as e:
        inv(tmp_path, "all: {hosts: {h: {deploy: {bringup_secret: Hunter2-pw}}}}")
    assert "deploy: secret reference {bringup_secret: (a str, not shown)}: bringup_secret takes one key" in str(e.value)
    assert "Hunter2" not in str(e.value)


def test_old_spelling_in_a_text_variable_says_how_to_write_a_reference():
    from bringup.inventory.vars import Text
    from pydantic import TypeAdapter, ValidationError

    with pytest.raises(ValidationError, match=r"must be text; a secret reference is written "
                                              r"\{bringup_secret: \{env: NAME\}\}"):
        TypeAdapter(Text).validate_python({"env": "X"})


# -- the Ansible passwords -------------------------------------------------------------------

@pytest.mark.parametrize("value", ["[hunter2x, b]", "{pw: hunter2x}", "true"])
def test_non_text_password_error_never_shows_the_value(tmp_path, value):
    for var in ("ansible_password", "ansible_become_password"):
        with pytest.raises(InventoryError) as e:
            inv(tmp_path, f"all: {{hosts: {{h: {{{var}: {value}}}}}}}")
        msg = str(e.value)
        assert f"{var} must be one line of text, {{env: NAME}} or {{file: PATH}} (got a value, not shown)" in msg
        assert "123456789" not in msg and "hunter2x" not in msg and "int" not in msg


def test_a_number_as_password_is_its_text_as_ansible_sends_it(tmp_path):
    # ansible_password: 123456789 (a YAML int) logs in as "123456789" in Ansible; it was refused as no text.
    h = inv(tmp_path, "all: {hosts: {h: {ansible_password: 123456789, ansible_become_password: 2468.5}}}").host("h")
    assert h.connection.ansible_password.get_secret_value() == "123456789"
    assert h.connection.ansible_become_password.get_secret_value() == "2468.5"
    assert MASK.mask_lines("a 123456789 b 2468.5") == f"a {HIDDEN} b {HIDDEN}"


def test_plain_text_passwords_are_masked_and_wrapped(tmp_path):
    h = inv(tmp_path, "all: {hosts: {h: {ansible_password: Plain-pw-77, ansible_become_password: Other-pw-88}}}"
            ).host("h")
    assert isinstance(h.vars["ansible_password"], SecretStr) and "Plain-pw-77" not in repr(h)
    assert MASK.mask("ssh said Plain-pw-77 / Other-pw-88") == f"ssh said {HIDDEN} / {HIDDEN}"


# -- masking ---------------------------------------------------------------------------------

def test_masker_hides_secrets_url_passwords_and_encoded_forms():
    m = Masker()
    m.add(SecretStr("t/k+n"))
    m.add("")  # nothing to mask, and no empty pattern
    assert m.mask("a t/k+n b") == f"a {HIDDEN} b"
    assert m.mask("https://me:t%2Fk%2Bn@mirror/x") == f"https://me:{HIDDEN}@mirror/x"
    assert m.mask("deb https://u:plain-TOKEN@repo.example/apt ./") == f"deb https://u:{HIDDEN}@repo.example/apt ./"
    assert m.mask("http://host:8080/path and user@host") == "http://host:8080/path and user@host"
    assert m.mask_obj({"k t/k+n": ["x t/k+n", SecretStr("q"), 3]}) == {f"k {HIDDEN}": [f"x {HIDDEN}", HIDDEN, 3]}


@pytest.mark.reliability(item=26, fault="a 1-character secret (it masked every '1' of the output)",
                         checks=("report written",))
def test_a_secret_too_short_to_guard_anything_is_no_mask_key():
    m = Masker()
    for short in ("1", "ab", SecretStr("x:y")):
        m.add(short)
    assert m.mask("changed=1 failed=0 ab x:y") == "changed=1 failed=0 ab x:y"
    m.add("abcd")
    assert m.mask("ab abcd") == f"ab {HIDDEN}"


def test_masked_stream_filters_every_write():
    m = Masker()
    m.add("s3cr3t-value")
    raw = io.StringIO()
    s = MaskedStream(raw, m)
    print("error: s3cr3t-value rejected", file=s)
    assert raw.getvalue() == f"error: {HIDDEN} rejected\n"
    assert s.getvalue() == raw.getvalue()  # the rest is the stream's own


def test_a_masked_stream_on_a_terminal_that_hung_up_writes_to_dev_null_without_an_error(tmp_path):
    """The operator's SSH session gone: every write to its terminal fails with EIO.  The last words of a run stopped
    by the SIGHUP (accept's "GPU load stopped", Invoke's Exit line) raised an EIO traceback, exit 1; the terminal is
    now pointed at /dev/null and the write is done there.  A stream that is no terminal keeps its error."""
    import errno
    import pty

    master, slave = pty.openpty()
    raw = open(slave, "w", buffering=1, closefd=True)
    s = MaskedStream(raw, Masker())
    try:
        print("before", file=s)
        os.close(master)  # the hang-up
        print("SIGHUP: stopped", file=s)
        s.flush()
        assert os.path.samestat(os.fstat(slave), os.stat(os.devnull))
    finally:
        raw.close()

    class Failing(io.StringIO):
        def write(self, text):
            raise OSError(errno.EIO, "Input/output error")

    failing = Failing()
    with pytest.raises(OSError):  # a file on a failing disk: no terminal, its error stands
        MaskedStream(failing, Masker()).write("x")


def test_rich_console_and_report_go_through_the_mask(tmp_path, monkeypatch):
    from rich.console import Console

    from bringup.engine.report import Report, print_host
    from bringup.engine.results import HostResult, ResourceResult
    from bringup.secrets import mask_output

    MASK.add(TOKEN)
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    mask_output()
    r = HostResult("h", status="failed", message=f"login with {TOKEN} refused", resources=[
        ResourceResult("docker", "json:/etc/docker/daemon.json", "changed",
                       changes={"registry-mirrors": ["absent", [f"https://u:{TOKEN}@m"]]},
                       diff=f"+ \"https://u:{TOKEN}@m\"\n")])
    print_host(r, Console(), check=True, diff=True)
    assert TOKEN not in out.getvalue() and HIDDEN in out.getvalue()
    rep = Report(tmp_path / "reports", command="provision", args={}, hosts=["h"])
    rep.add(r)
    text = rep.write(finished=True).read_text()
    assert TOKEN not in text and json.loads(text)["hosts"][0]["message"] == f"login with {HIDDEN} refused"


def test_holds_secret():
    assert holds_secret({"a": [SecretStr("x")]}) and holds_secret({"m": ["https://u:p@h"]})
    assert not holds_secret({"m": ["https://h:443/x"], "n": 1})


# -- registry_auths and the files that hold secrets ------------------------------------------

def _docker_role():
    from bringup.project import content_root
    from bringup.engine.roles import load_roles

    return load_roles(content_root())[1]["docker"]


def _ctx(role: Role, **vars):
    facts = {"os.release": {"id": "debian", "version_id": "12", "codename": "bookworm"},
             "system.docker": {}, "system.systemd": {"booted": True}}
    return HostContext("h", {**role.defaults, **vars}, facts, lambda *a, **k: "")


def test_registry_auths_password_must_be_a_reference():
    role = _docker_role()
    with pytest.raises(InputError, match=r"registry_auths.nvcr.io.password '\*{8}': must be a secret reference"):
        role.validate({**role.defaults, "registry_auths": {"nvcr.io": {"username": "u", "password": "text"}}})
    with pytest.raises(InputError, match="registry_auths.nvcr.io.username: is required"):
        role.validate({**role.defaults, "registry_auths": {"nvcr.io": {"password": SecretStr("x")}}})
    with pytest.raises(InputError, match="not a registry host"):
        role.validate({**role.defaults, "registry_auths": {"nv cr": {"username": "u", "password": SecretStr("x")}}})


def test_registry_auths_become_root_only_docker_config():
    role = _docker_role()
    v = {"registry_auths": {"nvcr.io": {"username": "$oauthtoken", "password": SecretStr(TOKEN)}}}
    role.validate({**role.defaults, **v})
    res = [r for r in role.resources(_ctx(role, **v)) if isinstance(r, PrivateJsonFile)]
    assert [r.path for r in res] == ["/root/.docker/config.json"]
    auth = res[0].keys["auths"]["nvcr.io"]["auth"]
    assert base64.b64decode(auth).decode() == f"$oauthtoken:{TOKEN}" == base64.b64decode(
        docker_auth("$oauthtoken", TOKEN)).decode()


def test_daemon_config_with_a_secret_is_private():
    role = _docker_role()
    cfg = {"registry-mirrors": [SecretStr("https://u:tok@mirror.local")], "log-driver": "json-file"}
    files = [r for r in role.resources(_ctx(role, docker_daemon_config=cfg)) if r.kind == "json"]
    assert isinstance(files[0], PrivateJsonFile) and files[0].keys["registry-mirrors"] == ["https://u:tok@mirror.local"]
    files = [r for r in role.resources(_ctx(role, docker_daemon_config={"log-driver": "json-file"})) if r.kind == "json"]
    assert not isinstance(files[0], PrivateJsonFile)


@pytest.mark.reliability(item=40, fault="vault: a !vault value in docker_daemon_config (a mirror's URL, a proxy) was "
                                        "written to a daemon.json of mode 0644 (holds_secret knew references, not "
                                        "vaulted text)", variants=2, checks=("secret never shown",))
@pytest.mark.parametrize("value", ["https://mirror.local/tok-9", "ab"])
def test_daemon_config_with_a_vaulted_value_is_private(value):
    from bringup.secrets import Vaulted

    role = _docker_role()
    cfg = {"registry-mirrors": [Vaulted(value)], "log-driver": "json-file"}
    files = [r for r in role.resources(_ctx(role, docker_daemon_config=cfg)) if r.kind == "json"]
    assert isinstance(files[0], PrivateJsonFile) and files[0].keys["registry-mirrors"] == [value]
    assert holds_secret(Vaulted(value)) and holds_secret({"a": [Vaulted(value)]})


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_private_json_file_plan_hides_values_and_fixes_mode():
    f = PrivateJsonFile("/root/.docker/config.json", {"auths": {"nvcr.io": {"auth": docker_auth("u", TOKEN)}}})
    other = {"auths": {"other.io": {"auth": "b3RoZXI6c2VjcmV0"}}, "detachKeys": "ctrl-x"}
    p = f.plan(f"type=file\ncontent={_b64(json.dumps(other))}\nperm=644 root:root\n")
    assert p.changes == {"auths.nvcr.io.auth": ("absent", HIDDEN)}
    blob = json.dumps(p.changes) + p.diff
    assert docker_auth("u", TOKEN) not in blob and "b3RoZXI6c2VjcmV0" not in blob
    assert '"other.io": {' in p.diff and '+        "nvcr.io": {' in p.diff
    assert p.commands[-1] == "chown root:root -- /root/.docker/config.json && chmod 0600 -- /root/.docker/config.json"
    assert "mkdir -p -m 0700 -- /root/.docker" in p.commands[0]
    have = json.dumps({"auths": {"nvcr.io": {"auth": docker_auth("u", TOKEN)}}})
    assert not f.plan(f"type=file\ncontent={_b64(have)}\nperm=600 root:root\n").changed
    fix = f.plan(f"type=file\ncontent={_b64(have)}\nperm=644 deploy:deploy\n")
    assert fix.changes == {"mode": ("644 deploy:deploy", "600 root:root")} and len(fix.commands) == 1


def test_secret_files_on_disk_have_no_group_or_other_bits(tmp_path):
    key = secret_file(tmp_path, mode=0o400)  # stricter than 0600 is fine
    assert resolve_refs({"bringup_secret": {"file": str(key)}}, "w", Masker()).get_secret_value() == TOKEN
    assert os.stat(key).st_mode & 0o077 == 0


def test_a_reference_in_a_connection_variable_is_taken_as_a_vault_value_is(tmp_path, monkeypatch):
    """Found by a hostile-input review: `ansible_user: {bringup_secret: {env: DEPLOY_USER}}` was refused with
    `ansible_user must be a valid value (got SecretStr('**********'))` (and ansible_host, ansible_port, the ssh
    arguments alike), though docs/inventory.md says any variable may be a reference and `!vault` works there."""
    from bringup.secrets import Vaulted
    from bringup.ssh.sshconfig import route

    monkeypatch.setattr(MASK, "_texts", set(MASK._texts))
    monkeypatch.setattr(MASK, "_short", dict(MASK._short))
    monkeypatch.setenv("DEPLOY_USER", "deploy-robot")
    monkeypatch.setenv("DEPLOY_HOST", "10.9.8.7")
    monkeypatch.setenv("DEPLOY_PORT", "2299")
    monkeypatch.setenv("DEPLOY_ARGS", '-o ProxyCommand="/opt/S3CRET-tool/connect --token S3CRETTOKEN %h %p"')
    key = secret_file(tmp_path, f"{tmp_path}/id_S3CRET\n")
    text = f"""
all:
  hosts:
    h1:
      ansible_host: {{bringup_secret: {{env: DEPLOY_HOST}}}}
      ansible_port: {{bringup_secret: {{env: DEPLOY_PORT}}}}
      ansible_user: {{bringup_secret: {{env: DEPLOY_USER}}}}
      ansible_ssh_common_args: {{bringup_secret: {{env: DEPLOY_ARGS}}}}
      ssh_known_hosts: {{bringup_secret: {{file: {key}}}}}
"""
    h = inv(tmp_path, text).host("h1")
    c = h.connection
    assert (c.ansible_host, c.ansible_port, c.ansible_user) == ("10.9.8.7", 2299, "deploy-robot")
    for var in ("ansible_host", "ansible_port", "ansible_user", "ansible_ssh_common_args", "ssh_known_hosts"):
        assert isinstance(h.vars[var], Vaulted) and repr(h.vars[var]) == f"'{HIDDEN}'", var
    t = route(h, default_config=str(tmp_path / "none")).target
    assert (t.hostname, t.port, t.user) == ("10.9.8.7", 2299, "deploy-robot") and t.hidden == {"hostname", "port",
                                                                                                 "user"}
    assert t.proxy_command == "/opt/S3CRET-tool/connect --token S3CRETTOKEN 10.9.8.7 2299"
    for word in ("deploy-robot", "10.9.8.7", "2299", "/opt/S3CRET-tool/connect", "S3CRETTOKEN"):
        assert MASK.mask(f"x {word} y") == f"x {HIDDEN} y", word
    # A wrong value is one line naming the variable, never the secret nor Python's object text.
    monkeypatch.setenv("DEPLOY_PORT", "99999")
    with pytest.raises(InventoryError) as e:
        inv(tmp_path, text)
    assert str(e.value) == (f"{tmp_path / 'hosts'}:6: host 'h1': ansible_port must be an integer 1-65535 "
                            f"(got '{HIDDEN}')")  # (the line that set it)


@pytest.mark.parametrize("url, shown", [
    ("https://ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789@github.com/org/r.git", "https://********@github.com/org/r.git"),
    ("http://TOKEN1234567890ABCDEF@prometheus:9090/api", "http://********@prometheus:9090/api"),
    ("https://u:s3cret@h/x", "https://u:********@h/x"),
    ("ssh://git@github.com/org/r.git", "ssh://git@github.com/org/r.git"),  # a user name is no secret
    ("http://root@10.0.0.1:9090", "http://root@10.0.0.1:9090"),
])
def test_a_url_whose_userinfo_is_a_token_alone_is_masked(url, shown):
    """``fleet --prometheus-url http://TOKEN@host`` and ``pull --url https://TOKEN@github.com/...`` printed the token:
    the masker knew ``user:password@`` only."""
    from bringup.secrets import Masker

    assert Masker().mask(f"fetch from {url} failed") == f"fetch from {shown} failed"


@pytest.mark.reliability(item=40, fault="vault: plan showed the SHA-256 (12 hex digits) and diff of a file rendered "
                                        "from a short vaulted value: a 4-character secret is found from the hash",
                         variants=3, checks=("secret never shown",))
@pytest.mark.parametrize("have", ["absent", "other", "same-but-mode"])
def test_a_file_holding_a_secret_shows_no_hash_or_diff_in_its_plan(monkeypatch, have):
    import hashlib

    from bringup.resources.files import File

    monkeypatch.setattr(MASK, "_texts", set(MASK._texts))
    monkeypatch.setattr(MASK, "_short", dict(MASK._short))
    MASK.add("q7Zx")
    f = File("/etc/app/app.conf", content="user = app\npassword = q7Zx\n")
    want = hashlib.sha256(f.content).hexdigest()
    old = b"user = app\npassword = old1\n"
    current = {"absent": "type=absent\n",
               "other": ("type=file\nmode=644\nowner=root\ngroup=root\nsha256=" + hashlib.sha256(old).hexdigest()
                         + "\ncontent=" + base64.b64encode(old).decode() + "\n"),
               "same-but-mode": f"type=file\nmode=600\nowner=root\ngroup=root\nsha256={want}\n"}[have]
    plan = f.plan(current)
    shown = json.dumps(plan.changes) + (plan.diff or "")
    for part in (want[:12], hashlib.sha256(old).hexdigest()[:12], "q7Zx", "old1"):
        assert part not in shown, (part, shown)
    if have == "same-but-mode":  # the content is the wanted one: no content change to tell
        assert "content" not in plan.changes and plan.changes["mode"] == ("600", "644")
    else:
        assert plan.changes["content"] == ("absent" if have == "absent" else HIDDEN, HIDDEN)
        # The diff stays, each line masked: which lines change is still told.
        assert f"+password = {HIDDEN}" in plan.diff and "user = app" in plan.diff, plan.diff
        if have == "other":
            assert f"-password = {HIDDEN}" in plan.diff, plan.diff


def test_a_file_without_a_secret_still_shows_its_hash_and_diff():
    from bringup.resources.files import File

    plan = File("/etc/app/plain.conf", content="workers = 8\n").plan("type=absent\n")
    assert plan.changes["content"][0] == "absent" and len(plan.changes["content"][1]) == 12
    assert "+workers = 8" in plan.diff


@pytest.mark.reliability(item=2, fault="the KEY=value net of the masker was quadratic: a line of 8,000 dots and an "
                                       "'=' took 2.2 s, and every console write and report goes through it")
@pytest.mark.parametrize("line", [("." * 64000) + "=x", ("a." * 32000) + "=", ("-" * 64000) + "token=x",
                                  ("a." * 32000) + "://u:p@h"], ids=["dots", "words", "dashes", "url"])
def test_the_key_value_net_is_linear_in_the_line(line):
    import time

    start = time.monotonic()
    Masker().mask(line)
    assert time.monotonic() - start < 1.0  # 64,000 characters: ~0.01 s linear, minutes quadratic


@pytest.mark.reliability(item=2, fault="the KEY=value net masked values that are no secret: use_token = true, "
                                       "keep_secret = false, --no-password=1, min_pass=3, secret = \"\"")
@pytest.mark.parametrize("text", ["use_token = true", "keep_secret = false", "--no-password=1", "min_pass=3",
                                  'secret = ""', "password=''", "auth=no", "api_key = 12.5"])
def test_the_key_value_net_leaves_empty_yes_no_and_numbers(text):
    assert Masker().mask(text) == text


@pytest.mark.reliability(item=2, fault="the masker's KEY=value net, secret_place and the inventory sources each had "
                                       "their own credential names (PGPASSWORD, api_key, passwd known to one only)")
@pytest.mark.parametrize("name", ["PGPASSWORD", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "db_passwd", "api-key",
                                  "ansible_ssh_pass", "registry.nvcr.io.password", "--token", "client_secret",
                                  "hf_token", "auth", "db_pw"])
def test_one_list_of_credential_names_for_the_masker_and_secret_place(name):
    from bringup.secrets import credential_name, secret_place

    assert credential_name(name)
    assert Masker().mask(f"export {name}=hunter2x") == f"export {name}={HIDDEN}"
    if not name.startswith("-"):
        assert secret_place(name)


@pytest.mark.parametrize("name", ["auth01", "tokenizer", "passport", "compass", "max_tokens", "oauth", "pwd",
                                  "password_file", "ansible_host", "secret_path", "token_count"])
def test_names_that_only_hold_a_credential_word_are_no_credential(name):
    from bringup.secrets import credential_name, secret_place

    assert not credential_name(name) and not secret_place(name)
    assert Masker().mask(f"{name}=value1") == f"{name}=value1"


@pytest.mark.reliability(item=2, fault="MASK.holds ran the guessing nets: a sysctl file's diff and hash were hidden "
                                       "for a vaulted 60 anywhere or a line use_token = true")
def test_holds_asks_the_known_secrets_only_and_a_file_keeps_its_masked_diff(monkeypatch):
    import hashlib

    from bringup.resources.files import File
    from bringup.secrets import Vaulted

    m = Masker()
    assert not m.holds("use_token = true\npassword=hunter2x\nhttps://u:pw@host/")
    m.add(Vaulted("60"))
    assert m.holds("vm.swappiness = 60") and not m.holds("vm.swappiness = 600")
    m.add("hunter2x")
    assert m.holds({"a": ["x hunter2x y"]}) and m.holds(Vaulted("z")) and not m.holds({"a": ["use_token = true"]})

    monkeypatch.setattr(MASK, "_texts", set(MASK._texts))
    monkeypatch.setattr(MASK, "_short", dict(MASK._short))
    MASK.add(Vaulted("60"))
    old = b"vm.swappiness = 60\n"
    plan = File("/etc/sysctl.d/90-x.conf", content="vm.swappiness = 10\n").plan(
        "type=file\nmode=644\nowner=root\ngroup=root\nsha256=" + hashlib.sha256(old).hexdigest()
        + "\ncontent=" + base64.b64encode(old).decode() + "\n")
    assert plan.changes["content"] == (HIDDEN, HIDDEN)  # a hash of a short secret gives it away
    assert f"-vm.swappiness = {HIDDEN}" in plan.diff and "+vm.swappiness = 10" in plan.diff, plan.diff
    plain = File("/etc/app/x.conf", content="use_token = true\n").plan("type=absent\n")
    assert len(plain.changes["content"][1]) == 12 and "+use_token = true" in plain.diff


@pytest.mark.reliability(item=40, fault="holds_secret missed a plain secret the run masks: mirror_token rendered "
                                        "into docker_daemon_config's mirror URL, daemon.json written 0644")
def test_holds_secret_asks_the_secrets_the_run_knows(monkeypatch):
    monkeypatch.setattr(MASK, "_texts", set(MASK._texts))
    monkeypatch.setattr(MASK, "_short", dict(MASK._short))
    MASK.add("abc123XYZtok")  # mirror_token: abc123XYZtok, a plain secret by its name
    role = _docker_role()
    cfg = {"registry-mirrors": ["https://mirror.local/v2?token=abc123XYZtok"]}
    files = [r for r in role.resources(_ctx(role, docker_daemon_config=cfg)) if r.kind == "json"]
    assert isinstance(files[0], PrivateJsonFile), files
    m = Masker()
    cfg = {"registry-mirrors": ["https://mirror.local/v2?token=abc123XYZtok"]}
    assert not holds_secret(cfg, m)
    m.add("abc123XYZtok")
    assert holds_secret(cfg, m) and not holds_secret({"registry-mirrors": ["https://mirror.local/"]}, m)


@pytest.mark.reliability(item=4, fault="the KEY=value net and the credential names after one list was made of them: "
                                       "a credential inside another's value (--env=API_TOKEN=..., opts=password=...), a "
                                       "numeric password, SECRET_KEY / STRIPE_SECRET_KEY / SECRET_KEY_BASE / auth_key "
                                       "were shown again", variants=9, checks=("secret never shown",))
@pytest.mark.parametrize("text,masked", [
    ("docker run --env=API_TOKEN=abc123xyz img", "docker run --env=API_TOKEN=******** img"),
    ("--build-arg=NPM_TOKEN=npm_abcdef", "--build-arg=NPM_TOKEN=********"),
    ("opts=password=hunter2x", "opts=password=********"),
    ("DB_PASSWORD=12345678", "DB_PASSWORD=********"),
    ("export SECRET_KEY=djangoS3cret", "export SECRET_KEY=********"),
    ("export STRIPE_SECRET_KEY=sk_live_x1", "export STRIPE_SECRET_KEY=********"),
    ("SECRET_KEY_BASE=abcdef0123", "SECRET_KEY_BASE=********"),
    ("auth_key=zz9plural", "auth_key=********"),
    ("min_pass=3 use_token=true a==b", "min_pass=3 use_token=true a==b"),
])
def test_a_credential_inside_a_value_a_number_and_secret_key_names_are_masked(text, masked):
    assert Masker().mask(text) == masked
