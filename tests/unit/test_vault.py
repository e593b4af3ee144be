"""Issue 32 item 2: Ansible Vault.  Values (``!vault |``, format 1.1) and a group_vars file encrypted whole (format
1.2, vault id ``prod``) are made here by ansible-core's own ``ansible-vault`` (a test dependency), then read by
bringup with ``--vault-password-file`` / ``--vault-id`` / ``ANSIBLE_VAULT_PASSWORD_FILE`` and held to what
``ansible-inventory --list`` gives; a missing or wrong password, a password program that fails or hangs, are one
line; the decrypted texts never show in output, error lines or reports."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.processes import pid_gone

from bringup.errors import InventoryError
from bringup.inventory.hosts import load_inventory
from bringup.secrets import HIDDEN
from bringup.testinfra.suite import Suite
from bringup.inventory.vault import Vault, Vaulted, VaultError, vault_from_options

from .test_bad_input import _refused
from .test_inventory_corpus import ansible_list, ansible_view

REPO = Path(__file__).resolve().parents[2]

PASSWORD = "correct horse battery staple"
PROD_PASSWORD = "prod-vault-pass-42"
#: What the vaults hold: none of it may show, anywhere.
NGC_KEY = "nvapi-7Hq2xTOPSECRETngc"
BECOME = "sudo-pw-9f8e7d"
DB_PASSWORD = "db-hunter2-long-secret"
SHORT = "x7"  # under the masker's 4 characters: still hidden by `hosts --host`
API_TOKEN = "api-token-in-group-vars-77"
BMC_PASSWORD = "bmc-host-vars-secret-31"
SECRETS = (NGC_KEY, BECOME, DB_PASSWORD, API_TOKEN, BMC_PASSWORD, PASSWORD, PROD_PASSWORD)

SECRET_CHECKS = ("one clear line", "exit code", "secret never shown", "nothing touched")


def _ansible_env(tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    (tmp_path / "ansible.cfg").write_text("")
    env.update(ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"), ANSIBLE_HOME=str(tmp_path / "ansible-home"),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"), ANSIBLE_NOCOLOR="1")
    return env


def ansible_vault(tmp_path: Path, *args: str, stdin: str | None = None) -> str:
    """ansible-core's ``ansible-vault ARGS`` (the reference encrypter), its stdout."""
    r = subprocess.run([sys.executable, "-m", "ansible.cli.vault", *args], cwd=tmp_path, env=_ansible_env(tmp_path),
                       capture_output=True, text=True, timeout=120, input=stdin)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _indent(block: str, n: int) -> str:
    return "\n".join(" " * n + line.strip() for line in block.strip().splitlines())


@pytest.fixture(scope="module")
def vaulted(tmp_path_factory) -> Path:
    """A folder: ``pw`` and ``pw-prod`` (password files), ``inventory/`` (hosts.yml with ``!vault`` values,
    group_vars/gpu.yml encrypted whole with vault id prod, group_vars/all.yml in the clear with a ``!vault``
    value, host_vars/gpu01.yml encrypted whole without a vault id)."""
    d = tmp_path_factory.mktemp("vault")
    (d / "pw").write_text(PASSWORD + "\n")
    (d / "pw-prod").write_text(PROD_PASSWORD + "\n")
    for p in ("pw", "pw-prod"):
        (d / p).chmod(0o600)

    def value(text: str, *ids: str) -> str:
        out = ansible_vault(d, "encrypt_string", *ids, text)
        assert "!vault |" in out
        return out.split("!vault |", 1)[1]

    ngc = value(NGC_KEY, "--vault-password-file", "pw")
    short = value(SHORT, "--vault-password-file", "pw")
    become = value(BECOME, "--vault-id", "prod@pw-prod")
    assert "$ANSIBLE_VAULT;1.1;AES256" in ngc and "$ANSIBLE_VAULT;1.2;AES256;prod" in become
    inv = d / "inventory"
    (inv / "group_vars").mkdir(parents=True)
    (inv / "hosts.yml").write_text(
        "all:\n  children:\n    gpu:\n      hosts:\n        gpu01:\n"
        "          ansible_host: 127.0.0.1\n          ansible_port: 9\n          ansible_user: nobody\n"
        f"          ngc_key: !vault |\n{_indent(ngc, 12)}\n"
        f"          pin: !vault |\n{_indent(short, 12)}\n"
        f"          ansible_become_password: !vault |\n{_indent(become, 12)}\n")
    api = value(API_TOKEN, "--vault-id", "prod@pw-prod")
    (inv / "group_vars" / "all.yml").write_text(f"gpu_profile: l40s\napi_token: !vault |\n{_indent(api, 2)}\n")
    (inv / "host_vars").mkdir()
    (inv / "host_vars" / "gpu01.yml").write_text(f"bmc_password: {BMC_PASSWORD}\n")
    ansible_vault(d, "encrypt", "--vault-password-file", "pw", "inventory/host_vars/gpu01.yml")
    (inv / "group_vars" / "gpu.yml").write_text(f"db_password: {DB_PASSWORD}\nregistry_user: ops-robot\n")
    ansible_vault(d, "encrypt", "--vault-id", "prod@pw-prod", "inventory/group_vars/gpu.yml")
    assert (inv / "group_vars" / "gpu.yml").read_text().startswith("$ANSIBLE_VAULT;1.2;AES256;prod\n")
    return d


def _vault(d: Path, **kw) -> Vault:
    return vault_from_options([str(d / "pw")], [f"prod@{d / 'pw-prod'}"], environ={}, **kw)


def _invoke(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "ANSIBLE_VAULT_PASSWORD_FILE"}
    return subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120,
                          env={**base, "COLUMNS": "200", "PYTHONPATH": str(REPO), **(env or {})})


def _no_secret(text: str) -> None:
    for s in SECRETS:
        assert s not in text, f"{s!r} shown:\n{text}"


# --- the same as ansible-inventory ----------------------------------------------------------------------

def test_vaulted_inventory_reads_as_ansible_inventory_does(vaulted, tmp_path):
    """Hosts, groups and every variable equal `ansible-inventory --list --vault-password-file pw --vault-id
    prod@pw-prod`; the `!vault` values it prints encrypted (`__ansible_vault`) are decrypted by ansible-vault."""
    doc = ansible_list([vaulted / "inventory"], tmp_path, "--vault-password-file", str(vaulted / "pw"),
                       "--vault-id", f"prod@{vaulted / 'pw-prod'}")
    groups, hostvars = ansible_view(doc)
    for h, hv in hostvars.items():
        for k, v in hv.items():
            if isinstance(v, dict) and "__ansible_vault" in v:
                (tmp_path / "value.vault").write_text(v["__ansible_vault"])
                hv[k] = ansible_vault(tmp_path, "view", "--vault-password-file", str(vaulted / "pw"), "--vault-id",
                                      f"prod@{vaulted / 'pw-prod'}", "value.vault").removesuffix("\n")  # view's own
    inv = load_inventory(vaulted / "inventory", vault=_vault(vaulted))
    assert {g: set(m) for g, m in inv.groups.items()} == groups
    assert {h: inv.hosts[h].raw for h in inv.hosts} == hostvars
    gpu01 = inv.hosts["gpu01"]
    assert gpu01.raw["ngc_key"] == NGC_KEY and gpu01.raw["db_password"] == DB_PASSWORD  # 1.1 value, 1.2 file
    assert gpu01.raw["api_token"] == API_TOKEN and gpu01.raw["bmc_password"] == BMC_PASSWORD
    assert gpu01.connection.ansible_become_password.get_secret_value() == BECOME
    assert gpu01.vars["gpu_profile"] == "l40s"
    # What a vault held reads as text everywhere, and never in a repr (an error line quoting a value).
    assert isinstance(gpu01.vars["db_password"], Vaulted) and repr(gpu01.vars["db_password"]) == "'********'"


def test_list_output_with_vault_values_is_decrypted(vaulted, tmp_path):
    """`ansible-inventory --list > inventory.json` keeps `!vault` values encrypted; bringup reads that file with
    the password as it reads the inventory itself."""
    doc = ansible_list([vaulted / "inventory"], tmp_path, "--vault-password-file", str(vaulted / "pw"),
                       "--vault-id", f"prod@{vaulted / 'pw-prod'}")
    (tmp_path / "inventory.json").write_text(json.dumps(doc))
    inv = load_inventory(tmp_path / "inventory.json", vault=_vault(vaulted))
    assert inv.hosts["gpu01"].raw["ngc_key"] == NGC_KEY and inv.hosts["gpu01"].raw["pin"] == SHORT
    with pytest.raises(InventoryError, match=r"inventory\.json: host 'gpu01': ansible_become_password: encrypted with "
                                                  r"ansible-vault \(vault id 'prod'\) and no vault password given"):
        load_inventory(tmp_path / "inventory.json", vault=Vault())


def test_inventory_file_encrypted_whole(vaulted, tmp_path):
    """An INI inventory encrypted by ansible-vault reads as ansible-inventory reads it; each value is a secret."""
    (tmp_path / "hosts.ini").write_text(f"[gpu]\ngpu01 ansible_host=10.0.0.5 ipmi_pass={BMC_PASSWORD}\n")
    ansible_vault(tmp_path, "encrypt", "--vault-password-file", str(vaulted / "pw"), "hosts.ini")
    groups, hostvars = ansible_view(ansible_list([tmp_path / "hosts.ini"], tmp_path, "--vault-password-file",
                                                 str(vaulted / "pw")))
    inv = load_inventory(tmp_path / "hosts.ini", vault=_vault(vaulted))
    assert {g: set(m) for g, m in inv.groups.items()} == groups
    assert {h: inv.hosts[h].raw for h in inv.hosts} == hostvars
    assert isinstance(inv.hosts["gpu01"].raw["ipmi_pass"], Vaulted)


def test_password_from_environment_and_executable_file(vaulted, tmp_path):
    """ANSIBLE_VAULT_PASSWORD_FILE is read as --vault-password-file; an executable password file is run and its
    output is the password (as Ansible does)."""
    prog = tmp_path / "get-pass"
    prog.write_text(f"#!/bin/sh\necho '{PROD_PASSWORD}'\n")
    prog.chmod(0o700)
    v = vault_from_options([], [f"prod@{prog}"], environ={"ANSIBLE_VAULT_PASSWORD_FILE": str(vaulted / "pw")})
    inv = load_inventory(vaulted / "inventory", vault=v)
    assert inv.hosts["gpu01"].raw["db_password"] == DB_PASSWORD and inv.hosts["gpu01"].raw["ngc_key"] == NGC_KEY


# --- refused: one line, no secret ---------------------------------------------------------------------------

@pytest.mark.reliability(item=32, fault="vault-encrypted inventory value and group_vars file: no password given, "
                                        "a wrong one, the prod vault id's missing",
                         checks=SECRET_CHECKS)
@pytest.mark.parametrize("flags, words", [
    ([], ["hosts.yml:9", "encrypted with ansible-vault and no vault password given", "--vault-password-file"]),
    (["--vault-password-file", "pw-prod"], ["hosts.yml:9", "wrong vault password", "tried --vault-password-file "
                                                                                     "pw-prod"]),
    (["--vault-password-file", "pw"], ["hosts.yml:23", "wrong vault password", "vault id 'prod'"]),
    (["--vault-id", "prod@missing-file"], ["--vault-id prod@missing-file", "no such file"]),
    (["--vault-id", "prod@prompt"], ["--vault-id 'prod@prompt'", "never prompts"]),
])
def test_missing_or_wrong_password_is_one_line(vaulted, flags, words):
    for task in (["hosts"], ["hosts", "--host", "gpu01"], ["plan", "--host", "gpu01"]):
        r = _invoke(vaulted, *task, "-i", "inventory", *flags)
        _refused(r, vaulted, *words)
        _no_secret(r.stdout + r.stderr)
        assert not (vaulted / "reports").exists()


@pytest.mark.reliability(item=32, fault="vault password program that fails (printing the password), and one that "
                                        "hangs", checks=("one clear line", "secret never shown", "no hang"))
def test_password_program_failing_or_hanging_is_bounded(vaulted, tmp_path):
    failing = tmp_path / "fails"
    failing.write_text(f"#!/bin/sh\necho '{PROD_PASSWORD}'\necho '{PROD_PASSWORD}' >&2\nexit 3\n")
    failing.chmod(0o700)
    with pytest.raises(VaultError) as e:
        vault_from_options([], [f"prod@{failing}"], environ={})
    assert "exited 3" in str(e.value) and PROD_PASSWORD not in str(e.value)

    hangs = tmp_path / "hangs"
    pid_file = tmp_path / "sleeper.pid"
    # A grandchild holds the output open: the whole process group must go, not only the script.
    hangs.write_text(f"#!/bin/sh\nsleep 300 &\necho $! > {pid_file}\nwait\n")
    hangs.chmod(0o700)
    started = time.monotonic()
    with pytest.raises(VaultError, match=r"--vault-password-file .*hangs: the password program gave no password "
                                         r"within 1 s \(killed\)"):
        vault_from_options([str(hangs)], [], environ={}, timeout=1)
    assert time.monotonic() - started < 30
    assert pid_gone(int(pid_file.read_text()), within=5), "the password program's child was left running"


@pytest.mark.reliability(item=40, fault="vault password program that floods its output (/dev/zero), or exits leaving "
                                        "a child holding its stdout open", variants=2,
                         checks=("one clear line", "secret never shown", "no hang", "nothing left running"))
def test_password_program_flood_or_lingering_child_is_bounded(vaulted, tmp_path):
    """A flood is cut at the cap (the program killed, memory bounded) and is one line, well before the deadline;
    a program that prints the password and exits while its child keeps stdout open is answered by what it
    printed, not at the deadline, and the child's group is ended."""
    flood = tmp_path / "flood"
    flood.write_text("#!/bin/sh\nexec cat /dev/zero\n")
    flood.chmod(0o700)
    started = time.monotonic()
    with pytest.raises(VaultError) as e:
        vault_from_options([str(flood)], [], environ={}, timeout=60)
    assert str(e.value) == (f"--vault-password-file {flood}: the password program printed more than 64 KiB (killed); "
                            "it must print the password alone")
    assert time.monotonic() - started < 45

    lingers = tmp_path / "lingers"
    pid_file = tmp_path / "lingering.pid"
    lingers.write_text(f"#!/bin/sh\nsleep 300 &\necho $! > {pid_file}\necho '{PASSWORD}'\n")
    lingers.chmod(0o700)
    started = time.monotonic()
    vault = vault_from_options([str(lingers)], [], environ={}, timeout=60)
    assert time.monotonic() - started < 45  # not the 60 s deadline: the exit is what counts
    assert [s.password for s in vault.secrets] == [PASSWORD.encode()]
    assert pid_gone(int(pid_file.read_text())), "the password program's child was left running"


def test_encrypted_group_vars_file_is_named(vaulted, tmp_path):
    """The file encrypted whole, without its vault id's password: the line names the file and the id."""
    inv = tmp_path / "inventory"
    (inv / "group_vars").mkdir(parents=True)
    (inv / "hosts").write_text("[gpu]\ngpu01\n")
    (inv / "group_vars" / "gpu.yml").write_bytes((vaulted / "inventory" / "group_vars" / "gpu.yml").read_bytes())
    with pytest.raises(VaultError) as e:
        load_inventory(inv, vault=vault_from_options([str(vaulted / "pw")], environ={}))
    assert str(e.value).startswith(f"{inv}/group_vars/gpu.yml: wrong vault password: none given opens this "
                                   f"ansible-vault text (vault id 'prod') (tried --vault-password-file {vaulted}/pw;")
    assert all(s not in str(e.value) for s in SECRETS)


def test_damaged_vault_text_is_one_line(tmp_path):
    """A `!vault` value cut in the middle of its hex (as a bad copy and paste leaves it)."""
    (tmp_path / "pw").write_text(PASSWORD)
    (tmp_path / "hosts").write_text("all:\n  hosts:\n    h1:\n      k: !vault |\n"
                                    "        $ANSIBLE_VAULT;1.1;AES256\n        3561\n")
    with pytest.raises(InventoryError, match=r"hosts:4: the ansible-vault text is damaged"):
        load_inventory(tmp_path / "hosts", vault=vault_from_options([str(tmp_path / "pw")], environ={}))
    for value, words in (('""', "not an ansible-vault text"), (f"'{NGC_KEY}'", "not an ansible-vault text")):
        (tmp_path / "hosts").write_text(f"all:\n  hosts:\n    h1:\n      k: !vault {value}\n")
        with pytest.raises(InventoryError, match=f"hosts:4: {words}") as e:
            load_inventory(tmp_path / "hosts", vault=vault_from_options([str(tmp_path / "pw")], environ={}))
        assert NGC_KEY not in str(e.value)
    (tmp_path / "hosts").write_text("$ANSIBLE_VAULT;1.1;AES999\n3561\n")
    with pytest.raises(InventoryError, match=r"hosts: ansible-vault cipher 'AES999' is not AES256"):
        load_inventory(tmp_path / "hosts", vault=vault_from_options([str(tmp_path / "pw")], environ={}))


# --- never shown ----------------------------------------------------------------------------------------

@pytest.mark.reliability(item=32, fault="vault-decrypted values shown by `hosts --host` (table and JSON)",
                         checks=("secret never shown",))
def test_hosts_task_masks_what_a_vault_held(vaulted):
    flags = ["-i", "inventory", "--vault-password-file", "pw", "--vault-id", "prod@pw-prod"]
    r = _invoke(vaulted, "hosts", "--host", "gpu01", "--json", *flags)
    assert r.returncode == 0, r.stderr
    _no_secret(r.stdout + r.stderr)
    doc = json.loads(r.stdout)
    for name in ("ngc_key", "pin", "db_password", "registry_user", "ansible_become_password", "api_token",
                 "bmc_password"):
        assert doc[name]["value"] == HIDDEN, (name, doc[name])
    assert doc["db_password"]["source"] == "inventory/group_vars/gpu.yml:1 (group gpu)"
    assert doc["ngc_key"]["source"] == "inventory/hosts.yml:9 (host gpu01)"
    assert doc["gpu_profile"]["value"] == "l40s"  # what no vault held shows as it is
    r = _invoke(vaulted, "hosts", "--host", "gpu01", *flags)
    assert r.returncode == 0 and "ngc_key" in r.stdout and HIDDEN in r.stdout, r.stdout + r.stderr
    _no_secret(r.stdout + r.stderr)
    assert f" {SHORT} " not in r.stdout
    r = _invoke(vaulted, "hosts", *flags)  # the host list
    assert r.returncode == 0 and "gpu01" in r.stdout, r.stderr
    _no_secret(r.stdout + r.stderr)


@pytest.mark.reliability(item=32, fault="vault-decrypted values in a run's report and its error lines",
                         checks=("secret never shown", "report written"))
def test_vault_values_never_in_a_report(vaulted, tmp_path):
    """A run that reaches no host (127.0.0.1 port 9) still writes its report, holding the host's variables'
    errors: no vault's text in it, nor in the output."""
    work = tmp_path / "run"
    work.mkdir()
    os.symlink(vaulted / "inventory", work / "inventory")
    r = _invoke(work, "plan", "--host", "gpu01", "-i", "inventory", "--vault-password-file", str(vaulted / "pw"),
                "--vault-id", f"prod@{vaulted / 'pw-prod'}")
    _no_secret(r.stdout + r.stderr)
    reports = [p for p in (work / "reports").rglob("*") if p.is_file()] if (work / "reports").exists() else []
    assert reports, r.stdout + r.stderr
    for p in reports:
        _no_secret(p.read_text(errors="replace"))
    assert r.returncode != 0, r.stdout + r.stderr


def test_testinfra_suite_gets_the_vault_passwords(vaulted, tmp_path):
    """`audit --testinfra` runs pytest per host: the plugin reads the vaulted inventory with the audit's passwords
    (passed as --bringup-vault-password-file / --bringup-vault-id, resolved), and without them it is one line."""
    from .test_testinfra import pytest_run

    (tmp_path / "test_site.py").write_text(
        "def test_vars(bringup_vars):\n"
        f"    assert bringup_vars['db_password'] == {DB_PASSWORD!r}\n"
        f"    assert bringup_vars['ngc_key'] == {NGC_KEY!r}\n")
    suite = Suite.of(str(tmp_path / "test_site.py"), str(vaulted / "inventory"), (),
                     ([str(vaulted / "pw")], [f"prod@{vaulted / 'pw-prod'}"]))
    flags = [a for a in suite.argv("gpu01", tmp_path / "r.json") if a.startswith("--bringup-vault")]
    assert flags == [f"--bringup-vault-password-file={vaulted / 'pw'}",
                     f"--bringup-vault-id=prod@{vaulted / 'pw-prod'}"]
    inventory = f"--bringup-inventory={vaulted / 'inventory'}"
    r = pytest_run(tmp_path, "--hosts=bringup://gpu01", inventory, *flags, "test_site.py")
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout + r.stderr
    _no_secret(r.stdout + r.stderr)
    r = pytest_run(tmp_path, "--hosts=bringup://gpu01", inventory, "--collect-only", "test_site.py")
    assert r.returncode != 0 and "no vault password given" in r.stdout + r.stderr, r.stdout + r.stderr
    _no_secret(r.stdout + r.stderr)


@pytest.mark.reliability(item=40, fault="a 2-character vault value in a failing plain-pytest assertion (output, "
                                        "JUnit, --bringup-report)", checks=("secret never shown",))
def test_short_vault_value_never_in_a_failing_tests_report(vaulted, tmp_path):
    """`pin` holds 2 characters, under the masker's length for text at large: pytest's explanation (`assert 'x7'
    == 'zz'`), the JUnit file and the JSON report still show it as ********."""
    from .test_testinfra import pytest_run

    (tmp_path / "test_pin.py").write_text("def test_pin(bringup_vars):\n    assert bringup_vars['pin'] == 'zz'\n")
    flags = [f"--bringup-inventory={vaulted / 'inventory'}", f"--bringup-vault-password-file={vaulted / 'pw'}",
             f"--bringup-vault-id=prod@{vaulted / 'pw-prod'}"]
    r = pytest_run(tmp_path, "--hosts=bringup://gpu01", *flags, "-rA", f"--junitxml={tmp_path / 'j.xml'}",
                   f"--bringup-report={tmp_path / 'r.json'}", "test_pin.py")
    assert r.returncode == 1 and "1 failed" in r.stdout, r.stdout + r.stderr
    said = r.stdout + r.stderr + (tmp_path / "j.xml").read_text() + (tmp_path / "r.json").read_text()
    assert f"'{SHORT}'" not in said and f"== {SHORT}" not in said, said
    assert f"'{HIDDEN}' == 'zz'" in r.stdout, r.stdout


@pytest.mark.reliability(item=40, fault="a relative vault password program (pw) with a program of the same name on "
                                        "PATH", variants=1, checks=("nothing executed",))
def test_a_relative_password_program_runs_from_its_folder_never_from_path(tmp_path, monkeypatch):
    from bringup.inventory.vault import read_password

    onpath = tmp_path / "bin"
    onpath.mkdir()
    marker = tmp_path / "ran-from-path"
    (onpath / "pw").write_text(f"#!/bin/sh\ntouch {marker}\necho from-path\n")
    (onpath / "pw").chmod(0o755)
    here = tmp_path / "proj"
    here.mkdir()
    (here / "pw").write_text("#!/bin/sh\necho the-right-one\n")
    (here / "pw").chmod(0o755)
    monkeypatch.chdir(here)
    monkeypatch.setenv("PATH", f"{onpath}{os.pathsep}{os.environ['PATH']}")
    assert read_password("pw").password == b"the-right-one" and not marker.exists()


def _encrypt(password: bytes, text: str) -> str:
    """An ansible-vault 1.1 envelope of ``text`` (the format bringup.inventory.vault reads), salt random."""
    import binascii

    from cryptography.hazmat.primitives import hashes, padding
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    from cryptography.hazmat.primitives.hmac import HMAC
    from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

    salt = os.urandom(32)
    key = PBKDF2HMAC(algorithm=hashes.SHA256(), length=80, salt=salt, iterations=10000).derive(password)
    padder = padding.PKCS7(128).padder()
    enc = Cipher(algorithms.AES(key[:32]), modes.CTR(key[64:80])).encryptor()
    ct = enc.update(padder.update(text.encode()) + padder.finalize()) + enc.finalize()
    mac = HMAC(key[32:64], hashes.SHA256())
    mac.update(ct)
    body = binascii.hexlify(b"\n".join(binascii.hexlify(x) for x in (salt, mac.finalize(), ct))).decode()
    return "$ANSIBLE_VAULT;1.1;AES256\n" + "\n".join(body[i:i + 80] for i in range(0, len(body), 80))


@pytest.mark.reliability(item=40, fault="thousands of !vault values, several passwords: key derivations unbounded",
                         checks=("one clear line", "no hang"))
def test_vault_work_is_bounded_and_the_password_that_worked_is_tried_first(monkeypatch):
    import bringup.inventory.vault as V
    from bringup.inventory.vault import VaultSecret

    secrets = [VaultSecret("default", f"--vault-password-file p{i}", f"wrong{i}".encode()) for i in range(5)]
    vault = Vault(secrets + [VaultSecret("default", "--vault-password-file ok", b"right")])
    envelopes = [_encrypt(b"right", f"secret-{i}") for i in range(30)]
    assert [vault.decrypt(e, f"f:{i}") for i, e in enumerate(envelopes)] == [f"secret-{i}" for i in range(30)]
    assert vault.derived <= 30 + 5  # the wrong passwords once, not once per value
    vault.decrypt(envelopes[0], "f:0")
    assert vault.derived <= 35  # the same text is opened once
    monkeypatch.setattr(V, "MAX_DERIVATIONS", 40)
    with pytest.raises(VaultError) as e:
        for i in range(10):
            vault.decrypt(_encrypt(b"right", "x"), f"g:{i}")
    assert "\n" not in str(e.value) and "more ansible-vault work than bringup does" in str(e.value)
    assert str(e.value).startswith("g:5:")


#: Inventories ansible-vault encrypts whole, each with a mistake whose line would quote the decrypted text:
#: (the file name, its text, the line the error names and what it says is wrong).
_SEALED_MISTAKES = (
    ("hosts", "[gpu]\nh1 ansible_host=127.0.0.1\n\n[gpu:vars]\nansible_become_password: Tr1ton-Pr0d-Passw0rd\n",
     "hosts:5", "a line of a [group:vars] section that is not key=value"),
    ("hosts", "[g:S3cret]\nh1\n", "hosts:1", "a section header of an unknown kind"),
    ("hosts", "[g]\nh1\n[g:children]\nS3cretgroup\n", "hosts:4",
     "a [group:children] section naming a group declared nowhere"),
    ("hosts", "[g]\nS3cret[0:99999999]\n", "hosts:2", "a host range that cannot be expanded"),
    ("inv.yml", "all:\n  hosts:\n    h1:\n      x: *S3cret\n", "inv.yml:4", "a YAML alias or anchor error"),
    ("inv.yml", "all:\n  hosts:\n    h1:\n      x: !S3cret foo\n", "inv.yml:4", "a YAML tag or value that cannot"),
    ("inv.yml", "all:\n  S3cretkey: {}\n", "inv.yml", "a group with a key other than hosts, vars and children"),
    ("inv.yml", "all:\n  hosts:\n    h1:\n      S3cretdup: 1\n      S3cretdup: 2\n", "inv.yml:5", "a duplicate key"),
    ("group_vars/all.yml", "a: 1\nS3cretdup: 1\nS3cretdup: 2\n", "group_vars/all.yml:3", "a duplicate key"),
    # A key that is not Ansible's form (taken with a warning naming it elsewhere) or no name at all: checked after
    # the file was loaded (load_vars, the sources' readers), so outside load_yaml_lines's sealed_error, it was printed.
    ("group_vars/all.yml", '"S3cret-T0ken-xyz": 2\n', "group_vars/all.yml:1", "a variable name that is none"),
    ("group_vars/all.yml", 'ok: 1\n"S3cret T0ken": 2\n', "group_vars/all.yml:2", "a variable name that is none; "),
    ("host_vars/h1.yml", 'ok: 1\nS3cret.T0ken: 2\n', "host_vars/h1.yml:2", "a variable name that is none"),
    ("inv.yml", "all:\n  hosts:\n    h1:\n      S3cret-key: 1\n", "inv.yml:4", "a variable name that is none"),
    ("inv.yml", "all:\n  vars:\n    1: S3cretval\n  hosts: {h1: {}}\n", "inv.yml:3", "a variable name that is none; "),
    ("hosts", "[g]\nh1 S3cret-key=1\n", "hosts:2", "a variable name that is none"),
    ("hosts", "[g]\nh1\n[g:vars]\n9S3cret=1\n", "hosts:4", "a variable name that is none"),
    ("inv.json", '{"_meta": {"hostvars": {"h1": {"S3cret-key": 1}}}, "all": {"hosts": ["h1"]}}', "inv.json",
     "a variable name that is none"),
)


@pytest.mark.parametrize("name, text, at, what", _SEALED_MISTAKES)
def test_a_mistake_in_a_file_encrypted_whole_names_its_line_never_its_text(tmp_path, name, text, at, what):
    """An error in a file ansible-vault encrypted whole says the file, the line and what is wrong, and quotes none
    of the decrypted text (it quoted `ansible_become_password: Tr1ton-Pr0d-Passw0rd`, `unknown kind 'S3cret'`)."""
    (tmp_path / "pw").write_text(PASSWORD)
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "host_vars").mkdir()
    beside = name.startswith(("group_vars/", "host_vars/"))
    if beside:
        (tmp_path / "inv.yml").write_text("all:\n  hosts:\n    h1:\n")
    (tmp_path / name).write_text(_encrypt(PASSWORD.encode(), text))
    source = tmp_path / ("inv.yml" if beside else name)
    with pytest.raises(InventoryError) as e:
        load_inventory(source, vault=vault_from_options([str(tmp_path / "pw")], environ={}))
    assert str(e.value) == (f"{tmp_path / at}: {what}" + str(e.value).split(what, 1)[1])
    assert str(e.value).endswith(f"; the file is encrypted with ansible-vault, so its text is not shown "
                                 f"(`ansible-vault view -- {tmp_path / name}` shows it)")
    for word in ("S3cret", "Tr1ton", "ansible_become_password", "gpu"):
        assert word not in str(e.value).replace(str(tmp_path), "")


@pytest.mark.reliability(item=40, fault="a mapping key encrypted with !vault (`? !vault |`): decrypted, a 2-character key "
                                        "was shown by hosts --host (table and JSON) as a variable's name",
                         variants=3, checks=("one clear line", "secret never shown"))
@pytest.mark.parametrize("where", ["variable", "nested", "group_vars"])
def test_a_key_encrypted_with_vault_is_refused_never_decrypted(tmp_path, where):
    (tmp_path / "pw").write_text(PASSWORD)
    key = "? !vault |\n" + "\n".join("    " + x for x in _encrypt(PASSWORD.encode(), "k9").splitlines()) + "\n: 1\n"
    if where == "group_vars":
        (tmp_path / "group_vars").mkdir()
        (tmp_path / "group_vars" / "all.yml").write_text("ok: 1\n" + key)
        (tmp_path / "inv.yml").write_text("all:\n  hosts:\n    h1:\n")
        at = "group_vars/all.yml"
    else:
        indent = " " * (6 if where == "variable" else 8)
        (tmp_path / "inv.yml").write_text("all:\n  hosts:\n    h1:\n" + ("      sysctl:\n" if where == "nested" else "")
                                          + "".join(indent + x + "\n" for x in key.splitlines()))
        at = "inv.yml"
    p = subprocess.run([sys.executable, "-m", "bringup", "hosts", "-i", "inv.yml", "--host", "h1",
                        "--vault-password-file", "pw"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2])))
    out = p.stdout + p.stderr
    assert p.returncode == 1 and len(out.splitlines()) == 1 and "k9" not in out, out
    assert f"{at}:" in out.split(": a key")[0] and "a key encrypted with !vault" in out, out
