"""A repository ``key:`` must be an OpenPGP public key before anything is sent (real keys for the good cases)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from bringup.errors import InputError
from harness.doubles.nvidia_mirror import stop_agent
from bringup.resources.apt import AptRepository, check_repo_var
from bringup.resources.openpgp import dearmor, openpgp_problem

pytestmark = pytest.mark.reliability(item=3, fault='repository key content: OpenPGP public key or named refusal (unit)')

DEBIAN = Path("/usr/share/keyrings/debian-archive-bookworm-stable.gpg")


@pytest.fixture(scope="module")
def gpg_key(tmp_path_factory):
    """A throwaway key made by gpg: (binary public, armored public, binary secret, armored secret)."""
    home = tmp_path_factory.mktemp("gnupg")
    os.chmod(home, 0o700)
    env = {**os.environ, "GNUPGHOME": str(home)}

    def gpg(*args):
        return subprocess.run(["gpg", "--batch", "--pinentry-mode", "loopback", "--passphrase", "", *args],
                              env=env, check=True, capture_output=True).stdout

    try:
        gpg("--quick-gen-key", "t <t@tests.invalid>", "ed25519", "sign", "never")
        return gpg("--export"), gpg("--armor", "--export"), gpg("--export-secret-keys"), \
            gpg("--armor", "--export-secret-keys")
    finally:
        stop_agent(home)


def _new_format(data: bytes) -> bytes:
    """The same packets with new-format headers (RFC 9580 4.2.1), as some tools write them."""
    from bringup.resources.openpgp import openpgp_packets

    out = b""
    for tag, body in openpgp_packets(data):
        n = len(body)
        length = bytes([n]) if n < 192 else bytes([((n - 192) >> 8) + 192, (n - 192) & 0xFF]) if n < 8384 \
            else b"\xff" + n.to_bytes(4, "big")
        out += bytes([0xC0 | tag]) + length + body
    return out


def test_real_keys_pass_binary_armored_old_and_new_headers(gpg_key):
    binary, armored, _, _ = gpg_key
    for data in (binary, armored, DEBIAN.read_bytes(), _new_format(DEBIAN.read_bytes()), _new_format(binary)):
        assert openpgp_problem(data) is None
    assert binary[0] & 0x40 == 0 and _new_format(binary)[0] == 0xC6
    assert dearmor(armored) == binary and dearmor(binary) == binary


def test_armor_without_checksum_and_with_headers_passes(gpg_key):
    _, armored, _, _ = gpg_key
    lines = armored.decode().splitlines()
    no_crc = "\n".join(l for l in lines if not l.startswith("=")) + "\n"
    assert openpgp_problem(no_crc.encode()) is None
    with_header = armored.decode().replace("-----\n\n", "-----\nComment: hello\n\n", 1)
    assert openpgp_problem(with_header.encode()) is None


@pytest.mark.parametrize("make, what", [
    (lambda k: b"", "empty"),
    (lambda k: b"root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/usr/sbin:/usr/sbin/nologin\n", "text"),
    (lambda k: b"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaA==\n-----END OPENSSH PRIVATE KEY-----\n", "PEM block"),
    (lambda k: k[3], "PRIVATE KEY BLOCK, not a PUBLIC KEY BLOCK"),
    (lambda k: k[2], "a SECRET key"),
    (lambda k: k[0] + k[2], "holding a SECRET key"),
    (lambda k: k[0][:-5], "runs past the end"),
    (lambda k: b"\x7fELF\x02\x01\x01" + bytes(200), "binary data that is not an OpenPGP packet stream"),
    (lambda k: k[1].replace(b"-----END PGP PUBLIC KEY BLOCK-----", b""), "without its END line"),
    (lambda k: k[1].replace(b"\n=", b"\n=AAAA\n=", 1), "CRC24 checksum does not match"),
    (lambda k: k[1].replace(b"\n\n", b"\n\n!!notbase64!!\n", 1), "not valid base64"),
    (lambda k: bytes([0x88, 3, 4, 0, 0]), "starting with a signature"),
    (lambda k: bytes([0x98, 2, 9, 0]), "unknown version 9"),
])
def test_what_is_not_a_public_key_is_named(gpg_key, make, what):
    problem = openpgp_problem(make(gpg_key))
    assert problem and what in problem, problem


def test_check_repo_var_refuses_a_passwd_file_naming_variable_and_file(tmp_path):
    f = tmp_path / "passwd"
    f.write_text("root:x:0:0:root:/root:/bin/bash\n")
    with pytest.raises(InputError) as e:
        check_repo_var({"url": "file:/srv/m", "suite": "./", "key": str(f)}, "container_toolkit_repo")
    msg = str(e.value)
    assert msg.startswith(f"container_toolkit_repo: key file {f} is not an OpenPGP public key: it is text")
    assert "root:x" not in msg and "\n" not in msg
    ok = {"url": "file:/srv/m", "suite": "./", "key": str(DEBIAN)}
    assert check_repo_var(ok, "container_toolkit_repo") is ok


@pytest.mark.reliability(item=40, fault="a repository key file that is a FIFO, a device, a folder or 1 GiB",
                         variants=5, checks=("one clear line", "no hang"))
def test_a_key_file_that_is_no_small_regular_file_is_one_line_at_once(tmp_path):
    # Every read has a size cap and a deadline: a FIFO waited for a writer, /dev/zero never ended, a huge file
    # was read whole (issue 40 item 3).
    import threading

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    huge = tmp_path / "huge"
    with huge.open("wb") as f:
        f.truncate(1 << 30)  # sparse: 1 GiB long, nothing written
    cases = {fifo: "is not a regular file", Path("/dev/zero"): "is not a regular file",
             tmp_path: "is not a regular file", huge: "is larger than 1 MiB",
             tmp_path / "missing": "does not exist on the control machine"}
    for f, said in cases.items():
        got: list = []
        t = threading.Thread(target=lambda: got.append(_refusal(f)), daemon=True)
        t.start()
        t.join(10)
        assert got, f"{f}: still reading after 10 s"
        assert got[0].startswith(f"docker_repo: key file {f} ") and said in got[0] and "\n" not in got[0], got[0]


def _refusal(f: Path) -> str:
    with pytest.raises(InputError) as e:
        check_repo_var({"url": "file:/srv/m", "suite": "./", "key": str(f)}, "docker_repo")
    return str(e.value)


def test_apt_repository_refuses_key_content_that_is_not_a_key():
    with pytest.raises(InputError, match="not an OpenPGP public key: it is text"):
        AptRepository("tk", url="file:/srv/m", suite="./", key=b"hello\n")


def test_roles_refuse_the_file_before_connecting(tmp_path):
    from bringup.project import content_root
    from bringup.engine.roles import load_roles

    f = tmp_path / "passwd"
    f.write_text("root:x:0:0:root:/root:/bin/bash\n")
    roles = load_roles(content_root())[1]
    for role, var in (("container_toolkit", "container_toolkit_repo"), ("docker", "docker_repo"),
                      ("nvidia_driver", "nvidia_driver_repo")):
        r = roles[role]
        v = {**r.defaults, "docker_source": "docker", "nvidia_driver_source": "cuda",
             var: {"url": "file:/srv/m", "suite": "./", "key": str(f)}}
        with pytest.raises(InputError, match=f"{var}: key file {f} is not an OpenPGP public key"):
            r.validate(v)
