"""cpu_tuning's kernel command line: a grub drop-in, update-grub once, "reboot required", never a reboot.

The sandbox host has no boot loader, so `update-grub` there is a TEST DOUBLE
that records each call; /proc/cmdline in a container is the machine's, which
never holds the words, so the reboot stays pending, as on a host not yet rebooted.
"""
from __future__ import annotations

import pytest

from harness import SANDBOX_VARS, write_inventory

from .helpers import invoke, last_report, recap

pytestmark = pytest.mark.integration

GRUB = "/etc/default/grub.d/90-bringup.cfg"
WORDS = "kernel_cmdline=[skew_tick=1, intel_idle.max_cstate=1]"


@pytest.fixture(scope="module")
def project(sandbox_host, tmp_path_factory):
    d = tmp_path_factory.mktemp("grub")
    write_inventory(d / "hosts", [sandbox_host], extra_vars=SANDBOX_VARS)
    sandbox_host.exec("printf '#!/bin/sh\\n# TEST DOUBLE of update-grub: records the call\\n"
                      "date +%%s.%%N >> /var/log/update-grub-double.log\\n' > /usr/sbin/update-grub && "
                      "chmod 755 /usr/sbin/update-grub")
    return d


def provision(host, project, *extra):
    return invoke("provision", "--host", host.name, "--roles", "cpu_tuning", "--set", WORDS, *extra, cwd=project)


def calls(host) -> int:
    r = host.exec(["sh", "-c", "wc -l < /var/log/update-grub-double.log 2>/dev/null || echo 0"])
    return int(r.stdout.strip())


def started(host) -> str:
    import subprocess
    return subprocess.run(["docker", "inspect", "-f", "{{.State.StartedAt}}", host.container],
                          capture_output=True, text=True, check=True).stdout.strip()


def test_drop_in_written_update_grub_once_and_reboot_reported(sandbox_host, project):
    before = started(sandbox_host)
    r = provision(sandbox_host, project)
    assert r.returncode == 0, r.stdout + r.stderr
    conf = sandbox_host.exec(["cat", GRUB]).stdout
    assert 'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT skew_tick=1 intel_idle.max_cstate=1"' in conf
    assert calls(sandbox_host) == 1
    assert "reboot required: kernel command line lacks skew_tick=1 intel_idle.max_cstate=1" in r.stdout
    assert last_report(project)["hosts"][0]["reboot_required"] is True
    assert started(sandbox_host) == before  # never rebooted without --allow-reboot


def test_rerun_changes_nothing_and_still_says_reboot(sandbox_host, project):
    r = provision(sandbox_host, project)
    assert r.returncode == 0, r.stdout + r.stderr
    assert recap(r.stdout)[sandbox_host.name]["changed"] == 0
    assert calls(sandbox_host) == 1
    assert "reboot required: kernel command line lacks" in r.stdout


def test_bad_word_is_refused_before_the_host(sandbox_host, project):
    sha = sandbox_host.exec(["sha256sum", GRUB]).stdout
    r = invoke("provision", "--host", sandbox_host.name, "--roles", "cpu_tuning",
               "--set", "kernel_cmdline=['quiet; reboot']", cwd=project)
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1 and "kernel_cmdline" in r.stderr
    assert sandbox_host.exec(["sha256sum", GRUB]).stdout == sha
