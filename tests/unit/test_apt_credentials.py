"""Credentials in an apt repository url go to a root-only auth.conf.d file, never into the 0644 list."""
import pytest

from bringup.errors import InputError
from bringup.resources.apt import AptRepository

URL = "https://ops:T0k%40en-9@mirror.example/nvidia/deb"


def repo(url=URL):
    return AptRepository("nv", url=url, suite="./", key_url="file:///k.asc")


def test_the_list_names_the_url_without_credentials_and_the_auth_file_holds_them():
    r = repo()
    assert r.url == "https://mirror.example/nvidia/deb"
    assert b"T0k" not in r.content and b"ops" not in r.content
    assert r.auth.endswith(b"machine https://mirror.example/nvidia/deb login ops password T0k@en-9\n")
    plan = r.plan("")
    assert plan.changes["credentials"] == ("absent", "/etc/apt/auth.conf.d/nv.conf (0600 root)")
    write = next(c for c in plan.commands if "auth.conf.d" in c and "base64 -d" in c)  # the write, not the backup
    assert "chmod 0600" in write and "chown root:root" in write


def test_an_auth_file_bringup_did_not_write_is_refused_not_overwritten():
    plan = repo().plan("auth=0123\n")
    assert "/etc/apt/auth.conf.d/nv.conf exists and was not written by bringup" in plan.error and not plan.commands


def test_ours_is_removed_when_the_url_drops_them_and_a_foreign_one_is_kept():
    r = repo("https://mirror.example/nvidia/deb")
    assert r.auth is None
    assert any("rm -f -- /etc/apt/auth.conf.d/nv.conf" in c for c in r.plan("auth=1\nauth_ours=yes\n").commands)
    assert not any("auth.conf.d" in c for c in r.plan("auth=1\n").commands)


def test_a_token_alone_is_a_login_without_password_and_arch_is_cut_from_the_machine():
    for url in ("https://TOKEN@apt.fury.io/acme/$(ARCH)", "https://TOKEN:@apt.fury.io/acme/$(ARCH)"):
        r = repo(url)
        assert r.url == "https://apt.fury.io/acme/$(ARCH)"
        # apt matches the machine after filling in $(ARCH): the path stops before it.
        assert r.auth.endswith(b"machine https://apt.fury.io/acme login TOKEN\n")


def test_an_operators_list_of_the_same_url_with_credentials_is_a_conflict():
    import subprocess
    import tempfile
    from pathlib import Path

    r = repo("https://mirror.example/nvidia/deb/$(ARCH)")
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "mine.list").write_text("deb https://ops:old@mirror.example/nvidia/deb/$(ARCH) /\n")
        (Path(d) / "other.list").write_text("deb https://mirror.example/other /\n")
        script = r.read().replace("/etc/apt/sources.list.d/", d + "/")
        out = subprocess.run(["sh", "-c", script], capture_output=True, text=True).stdout
    assert f"conflict={d}/mine.list" in out and "other.list" not in out


@pytest.mark.parametrize("url", ["https://:pw@mirror.example/x", "https://ops:pw%20x@mirror.example/x"])
def test_credentials_apt_cannot_carry_are_one_line(url):
    with pytest.raises(InputError, match="apt repository nv: the url's"):
        repo(url)
