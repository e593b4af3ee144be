"""The pull role (issue 33 item 3): opt-in, its units as systemd reads them, its variables refused in one line."""
from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from bringup.errors import InputError
from bringup.engine.roles import HostContext, Role
from bringup.engine.templates import Templates

import roles.pull as P

REPO = Path(__file__).resolve().parents[2]
ROLE = Role("pull", P)
CHECK, DEFAULTS = ROLE.validate, ROLE.defaults
SIGNER = "ops@example.org ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIfG0n0YqfQ1c8S9Qe8q2n3kq7nq2c1pQ0b5q2Z4YH2k"
SYSTEMD = {"system.systemd": {"booted": True, "pid1": "systemd"}}


def planned(pull, facts=SYSTEMD) -> dict:
    host = HostContext("trt-l40s-01", {**DEFAULTS, "bringup_pull": pull}, facts,
                       Templates(REPO / "templates").render)
    return {r.id: r for r in P.resources(host)}


def wanted(**over) -> dict:
    return {"url": "https://git.example.org/ops/fleet.git", "allowed_signers": [SIGNER], **over}


def test_unset_it_installs_nothing_so_existing_hosts_do_not_change():
    (only,) = planned(None).values()
    assert type(only).__name__ == "Unused" and "bringup_pull is unset" in only.text


def test_the_units_carry_the_url_the_rule_the_spread_and_the_bound():
    got = planned(wanted(tag="release-*", randomized_delay="20min", timeout="45min", url="https://g.example/a%2Fb.git"))
    service, timer = got["file:" + P.SERVICE].content.decode(), got["file:" + P.TIMER].content.decode()
    exec_start = next(line for line in service.splitlines() if line.startswith("ExecStart="))
    words = shlex.split(exec_start[len("ExecStart="):].replace("%%", "%"))
    assert words[:2] == ["/usr/local/bin/bringup", "pull"]
    assert words[words.index("--url") + 1] == "https://g.example/a%2Fb.git"  # systemd's % specifier escaped
    assert "%%2F" in exec_start
    assert words[words.index("--tag") + 1] == "release-*" and "--branch" not in words
    assert words[words.index("--name") + 1] == "trt-l40s-01"  # the inventory's own name, not the hostname
    assert words[words.index("--allowed-signers") + 1] == P.ALLOWED_SIGNERS
    assert "TimeoutStartSec=45min" in service and "Type=oneshot" in service
    assert "RandomizedDelaySec=20min" in timer and "OnBootSec=2min" in timer and "OnUnitInactiveSec=15min" in timer
    assert got["file:" + P.ALLOWED_SIGNERS].content.decode() == SIGNER + "\n"
    assert got[f"service:{P.UNIT_NAME}.timer"].enabled and got[f"service:{P.UNIT_NAME}.timer"].running


def test_systemd_reads_the_units(tmp_path):
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is not installed (apt-get install systemd)"
    got = planned(wanted(command="/bin/true"))
    for path in (P.SERVICE, P.TIMER):
        (tmp_path / Path(path).name).write_bytes(got["file:" + path].content)
    r = subprocess.run([analyze, "verify", "--man=no", str(tmp_path / "bringup-pull.service"),
                        str(tmp_path / "bringup-pull.timer")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_an_ssh_server_gets_its_known_host_key_and_the_deploy_key():
    got = planned(wanted(url="ssh://git@git.example.org/ops/fleet.git", ssh_key_file="/etc/bringup/deploy_key",
                         known_hosts=["git.example.org ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKnown"]))
    assert got["file:" + P.KNOWN_HOSTS].content.decode().startswith("git.example.org ssh-ed25519")
    exec_start = got["file:" + P.SERVICE].content.decode()
    assert f"--known-hosts {P.KNOWN_HOSTS}" in exec_start and "--ssh-key /etc/bringup/deploy_key" in exec_start


def test_a_package_installs_bringup_in_a_venv_once():
    got = planned(wanted(package="https://pkgs.example.org/bringup-0.9-py3-none-any.whl"))
    (install,) = [r for r in got.values() if type(r).__name__ == "Command"]
    assert "pip install" in install.cmd and install.unless.endswith("venv/bin/bringup --version")
    assert P.VENV + "/bin/bringup pull" in got["file:" + P.SERVICE].content.decode()


def test_the_textfile_is_found_on_the_host_by_default_and_the_roles_are_checked():
    """Debian's prometheus-node-exporter reads /var/lib/prometheus/node-exporter: by default each run finds the
    folder the host's node exporter reads (``--prometheus auto``) rather than writing where none looks."""
    got = planned(wanted(roles=["sysctl", "docker"]))
    words = shlex.split(got["file:" + P.SERVICE].content.decode().split("ExecStart=", 1)[1].splitlines()[0])
    assert words[words.index("--prometheus") + 1] == "auto"
    assert not [r for r in got if r.startswith("directory:/var/lib")]  # nothing made where no exporter looks
    CHECK({**DEFAULTS, "bringup_pull": wanted(roles=["sysctl", "docker"])})
    got = planned(wanted(prometheus="/var/lib/prometheus/node-exporter/bringup-pull.prom", allow_rollback="3F2A9C1D"))
    assert "--allow-rollback 3f2a9c1d" in got["file:" + P.SERVICE].content.decode()
    assert "directory:/var/lib/prometheus/node-exporter" in got


def test_without_systemd_it_says_what_to_do_instead():
    (only,) = planned(wanted(), facts={"system.systemd": {"booted": False, "pid1": "tini"}}).values()
    assert "cron" in only.text


@pytest.mark.parametrize("pull,words", [
    (wanted(branch="main", tag="v*"), "give one revision rule"),
    (wanted(allowed_signers=["ops@example.org not-a-key"]), "allowed_signers[0]"),
    (wanted(allowed_signers=[]), "allowed_signers"),
    (wanted(interval="every hour"), "interval"),
    (wanted(url="-oProxyCommand=x"), "url"),
    (wanted(url="fd::3"), "url"),  # a Git remote helper, never a repository
    (wanted(url="ext::/tmp/x.sh"), "url"),
    (wanted(package="bringup", command="/usr/bin/bringup"), "give one"),
    ({"allowed_signers": [SIGNER]}, "url"),
    (wanted(known_hosts=["git.example.org"]), "known_hosts[0]"),
    (wanted(roles=["../x"]), "bringup_pull.roles"),
    (wanted(roles=[]), "bringup_pull.roles"),
    (wanted(allow_rollback="HEAD~1"), "allow_rollback"),
    (wanted(prometheus="/var/lib/x.txt"), "prometheus"),
    (wanted(inventory="~/hosts"), "inventory"),  # ~ would be the host's home folder: outside the checkout
])
def test_bad_pull_variables_are_one_line(pull, words):
    with pytest.raises(InputError) as e:
        CHECK({**DEFAULTS, "bringup_pull": pull})
    assert words in str(e.value) and "\n" not in str(e.value)



@pytest.mark.reliability(item=40, fault="a Git remote helper URL of thousands of characters (bringup_pull.url, pull "
                                        "--url): its own echo of the URL, cut without saying so, the helper's name "
                                        "echoed whole", variants=2, checks=("one clear line",))
def test_a_long_remote_helper_url_is_shown_as_every_value_is(tmp_path):
    from bringup.errors import shown
    from bringup.tasks.pull import _url

    url = "h" * 3000 + "::/x\u202e" + "y" * 3000
    with pytest.raises(InputError) as role:
        CHECK({**DEFAULTS, "bringup_pull": wanted(url=url)})
    with pytest.raises(InputError) as flag:
        _url(url)
    for e, name in ((role, "bringup_pull.url"), (flag, "--url")):
        said = str(e.value)
        assert said.startswith(f"{name} {shown(repr(url))}: names a Git remote helper ({shown('h' * 3000, 40)}::)")
        assert len(said) < 600 and "\n" not in said and "\u202e" not in said, said

def test_the_monitoring_role_alerts_on_pull_runs_only_when_asked(tmp_path):
    from .test_monitoring_role import rendered, run_rule_tests

    files, _ = rendered()
    assert not any("bringup_pull" in text for text in files.values())  # unset: existing hosts' rules unchanged
    r = run_rule_tests(tmp_path, Path(__file__).parent / "promtool" / "pull_rules_test.yml",
                       monitoring_pull_stale_hours=2)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr
    r = run_rule_tests(tmp_path, Path(__file__).parent / "promtool" / "pull_rules_test.yml",
                       monitoring_pull_stale_hours=3)
    assert r.returncode != 0 and "BringupPullStale" in r.stdout + r.stderr  # the bound is really the variable's
