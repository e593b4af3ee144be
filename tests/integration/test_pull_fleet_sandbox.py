"""Pull mode on a small sandbox fleet (issue 33's proof): a Git server host of its own serving the repository over
SSH, three light hosts with the pull role installed from the control machine, and a real Prometheus (started
here) reading what the hosts' runs leave for their node exporter.

After the role is installed the control machine does nothing more: the hosts' own ``bringup-pull`` units fetch
``ssh://root@<server>/srv/fleet.git`` over Docker's bridge with a deploy key and the server's pinned host key.
A run is the timer's (``OnBootSec``: a host that comes back up pulls within seconds) or, to keep the test short,
the same service started with ``systemctl start`` through ``docker exec``.  The hosts have no node exporter: the
test copies each host's textfile out after a run and serves the copies to Prometheus, one path a host, as its
node exporter would serve the file in place.

Cases: a signed push converges all of them; an unsigned push and one signed by an unknown key are refused on
every host, each staying at the last good revision; a host that was down (``docker stop``) catches up by its own
timer once started again; a disk that fills during the checkout (a 2 MiB tmpfs on one host's revisions folder,
mounted in the container) is one line in the journal and ``failed`` (disk-full) in the state and the metrics, leaves nothing half
applied, and the next run converges once there is room.  After each case ``invoke fleet`` against Prometheus
shows each host right.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from bringup.ssh.command import join

from tests.textfile_prometheus import TextfilePrometheus

from .helpers import REPO, invoke
from .pull_setup import demo_repository, git, git_repository, install_bringup, python_libs, use_apt_repository

pytestmark = pytest.mark.integration

NAMES = ("pullf-1", "pullf-2", "pullf-3")
CACHE = "/var/lib/bringup/pull"
TEXTFILE = "/var/lib/node_exporter/textfile_collector/bringup-pull.prom"
#: The tmpfs on one host's revisions folder: room for the small revisions, not for the one with a 4 MiB file.
SMALL_DISK = "2m"


def parallel(fn, items):
    with ThreadPoolExecutor(len(items)) as pool:
        return list(pool.map(fn, items))


class Prometheus(TextfilePrometheus):
    """The Prometheus binary scraping, every second, copies of the hosts' textfiles served from ``folder``."""

    def fleet(self, expect: dict[str, str], revision: str, refusal: str | None = None, timeout: float = 60) -> dict:
        """``bringup fleet --json`` until it shows ``expect`` (host -> verdict) at ``revision`` (the scrapes
        catch up within seconds), and ``refusal`` as every refused host's last refusal, or fail with its last
        answer."""
        deadline = time.monotonic() + timeout
        while True:
            r = subprocess.run([sys.executable, "-c", "import sys; from bringup.entry import main; main()",
                                "fleet", "--prometheus-url", self.url, "--json"], capture_output=True, text=True,
                               env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=120)
            try:
                doc = json.loads(r.stdout)
            except ValueError:
                doc = {}
            got = {h: v["verdict"] for h, v in (doc.get("hosts") or {}).items()}
            refused = {v["last_refusal"] for v in doc.get("hosts", {}).values() if v["verdict"] == "refused"}
            if got == expect and doc.get("revision") == revision and (refusal is None or refused == {refusal}):
                return doc
            assert time.monotonic() < deadline and self.proc.poll() is None, \
                f"fleet shows {got} at {doc.get('revision')}, not {expect} at {revision}: {r.stdout}{r.stderr}"
            time.sleep(1)


class Fleet:
    def __init__(self, server, hosts, url: str, prom: Prometheus, work: Path, keys: Path):
        self.server, self.hosts, self.url, self.prom, self.work, self.keys = server, hosts, url, prom, work, keys
        self.by_name = {h.name: h for h in hosts}
        self.ssh = {"GIT_SSH_COMMAND": join(server.ssh_argv()[:-3])}  # git adds the port and user@host
        self.push_url = f"ssh://root@127.0.0.1:{server.port}/srv/fleet.git"

    def push(self, greeting: str, signed: bool = True, key: str = "ops", blob: int = 0) -> str:
        """A commit of the repository (an inventory of the three hosts), pushed to the server's main."""
        (self.work / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {
            n: {"ansible_connection": "local", "greeting": greeting} for n in NAMES}}}))
        if blob:
            (self.work / "models").mkdir(exist_ok=True)
            (self.work / "models" / "weights.bin").write_bytes(os.urandom(blob))
        git(self.work, "add", "-A")
        git(self.work, "commit", "--quiet", *(["-S"] if signed else []), "-m", greeting,
            key=self.keys / key if signed else None)
        git(self.work, "push", "--quiet", self.push_url, "HEAD:main", env=self.ssh)
        return git(self.work, "rev-parse", "HEAD")

    def tick(self, host) -> dict:
        """What the timer does on ``host``: one run of its service, to its end; then its state."""
        host.exec("systemctl start bringup-pull.service", check=False, timeout=600)
        return self.state(host)

    def state(self, host) -> dict:
        s = host.exec(["cat", f"{CACHE}/state.json"], check=False)
        assert s.returncode == 0, self.journal(host)
        return json.loads(s.stdout)

    def journal(self, host) -> str:
        return host.exec("journalctl -u bringup-pull --no-pager | tail -30", check=False).stdout

    def report(self, *hosts) -> None:
        """Each host's textfile, copied where Prometheus's scrape reads it (its node exporter, in effect)."""
        for h in hosts or self.hosts:
            text = h.exec(["cat", TEXTFILE], check=False).stdout
            (self.prom.folder / f".{h.name}.prom").write_text(text)
            os.replace(self.prom.folder / f".{h.name}.prom", self.prom.folder / f"{h.name}.prom")

    def demo(self, host) -> str:
        return host.exec("cat /etc/pull-demo.conf", check=False).stdout


@pytest.fixture(scope="module")
def fleet(sandbox_host_factory, tmp_path_factory):
    d = tmp_path_factory.mktemp("pull-fleet")
    names = ("pullf-git", *NAMES)
    started = parallel(lambda n: sandbox_host_factory(n, light=True), names)
    server, hosts = started[0], started[1:]
    apt, lib = git_repository(d), python_libs(d)
    parallel(lambda h: use_apt_repository(h, apt), started)
    parallel(lambda h: install_bringup(h, lib), hosts)

    # The Git server: git from the file: repository, a bare repository, the hosts' deploy key authorized.
    keys = d / "keys"
    keys.mkdir()
    for key in ("ops", "stranger", "deploy"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", key, "-f", str(keys / key)], check=True)
    server.exec("apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q git >/dev/null && "
                "git init --quiet --bare -b main /srv/fleet.git")
    server.exec("cat >> /root/.ssh/authorized_keys", input=(keys / "deploy.pub").read_text())
    address = server.address()
    host_key = server.exec(["cat", "/etc/ssh/ssh_host_ed25519_key.pub"]).stdout.split()[:2]
    url = f"ssh://root@{address}/srv/fleet.git"
    deploy = (keys / "deploy").read_text()
    parallel(lambda h: h.exec("install -D -m 0600 /dev/stdin /etc/bringup/deploy_key", input=deploy), hosts)
    # One host's revisions on a small disk of their own (the disk-full case).
    hosts[0].exec(f"mkdir -p {CACHE}/revisions && mount -t tmpfs -o size={SMALL_DISK} tmpfs {CACHE}/revisions")

    # The repository: its own role; the first signed revision is there before the hosts are set up.
    work = demo_repository(d / "work")
    prom = Prometheus(d, NAMES)
    f = Fleet(server, hosts, url, prom, work, keys)
    try:
        # Pushed before the role starts the timers (one may run at once): no run ever sees an empty repository.
        first = f.push("hello first")
        # From the control machine, once: the pull role on the three hosts.
        control = d / "control"
        control.mkdir()
        signer = f"ops@example.org {(keys / 'ops.pub').read_text().strip()}"
        (control / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {h.name: {
            **h.inventory_vars(),
            "bringup_pull": {"url": url, "branch": "main", "allowed_signers": [signer],
                             "known_hosts": [f"{address} {' '.join(host_key)}"],
                             "ssh_key_file": "/etc/bringup/deploy_key", "command": "/usr/local/bin/bringup",
                             # After boot within 5-8 s (a host that comes back pulls at once), then hourly: the
                             # test's own runs are the service started by hand.
                             "on_boot": "5s", "randomized_delay": "3s", "interval": "1h"}}
            for h in hosts}}}))
        r = invoke("provision", "--group", "all", "--roles", "pull", cwd=control, timeout=900)
        assert r.returncode == 0, r.stdout + r.stderr
        # The timers' first run (OnBootSec is past: at once, within their 3 s of delay), waited for: from here
        # every run is the test's own, the next of the timer's an hour away.
        time.sleep(4)
        for h, s in zip(hosts, parallel(f.tick, hosts)):
            assert s["applied"] == first, f.journal(h)
        yield f
    finally:
        prom.close()


@pytest.mark.reliability(item=33, fault="pull fleet (3 hosts, a Git server over SSH): an unsigned push, one signed "
                                        "by an unknown key, a host down during a push", variants=3,
                         checks=("nothing touched", "report written", "next run converges"))
def test_a_signed_push_converges_the_fleet_and_bad_ones_are_refused_everywhere(fleet):
    hosts = fleet.hosts

    # 1. A signed push: every host converges with no control machine involved.
    good = fleet.push("hello fleet")  # the hosts had "hello first" (from the timer's first run, or none yet)
    states = parallel(fleet.tick, hosts)
    for h, s in zip(hosts, states):
        assert s["applied"] == good and s["last"]["status"] == "applied", fleet.journal(h)
        assert fleet.demo(h) == "hello fleet\n"
    fleet.report()
    doc = fleet.prom.fleet({n: "ok" for n in NAMES}, good)
    assert doc["exit_code"] == 0

    # 2. An unsigned push, then one signed by a key no host trusts: refused on every host, which stays at good.
    for greeting, kwargs, reason in (("unsigned", {"signed": False}, "unsigned"),
                                     ("stranger's", {"key": "stranger"}, "unknown-key")):
        bad = fleet.push(greeting, **kwargs)
        states = parallel(fleet.tick, hosts)
        for h, s in zip(hosts, states):
            assert s["applied"] == good and s["last"]["status"] == "refused", fleet.journal(h)
            assert s["last_refusal"]["reason"] == reason and s["last_refusal"]["revision"] == bad
            assert fleet.demo(h) == "hello fleet\n"
            assert f"refused: revision {bad[:12]}" in fleet.journal(h)
        fleet.report()
        doc = fleet.prom.fleet({n: "refused" for n in NAMES}, good, refusal=reason)
        assert doc["exit_code"] == 2
        assert {v["revision"] for v in doc["hosts"].values()} == {good}

    # 3. A host down during a signed push: the others converge; it catches up by its own timer once it is back.
    down = hosts[2]
    subprocess.run(["docker", "stop", "--time", "10", down.container], check=True, capture_output=True)
    newer = fleet.push("hello again")
    for h, s in zip(hosts[:2], parallel(fleet.tick, hosts[:2])):
        assert s["applied"] == newer, fleet.journal(h)
    fleet.report(*hosts[:2])
    # Its last report is the refusal: Prometheus shows it refused, at the revision before.
    doc = fleet.prom.fleet({NAMES[0]: "ok", NAMES[1]: "ok", NAMES[2]: "refused"}, newer)
    assert doc["hosts"][NAMES[2]]["revision"] == good and doc["exit_code"] == 2
    subprocess.run(["docker", "start", down.container], check=True, capture_output=True)
    deadline = time.monotonic() + 180
    while True:  # no systemctl start: the timer's OnBootSec (5 s + up to 3 s) runs it
        s = down.exec(["cat", f"{CACHE}/state.json"], check=False)
        if s.returncode == 0 and json.loads(s.stdout).get("applied") == newer:
            break
        assert time.monotonic() < deadline, fleet.journal(down)
        time.sleep(2)
    assert fleet.demo(down) == "hello again\n"
    fleet.report()
    assert fleet.prom.fleet({n: "ok" for n in NAMES}, newer)["exit_code"] == 0
    fleet.last_good = newer


@pytest.mark.reliability(item=33, fault="pull: disk full during the checkout (a small tmpfs under the revisions)",
                         variants=1, checks=("nothing touched", "report written", "next run converges"))
def test_a_disk_full_during_checkout_leaves_the_host_at_the_last_good_revision(fleet):
    full, others = fleet.hosts[0], fleet.hosts[1:]
    good = getattr(fleet, "last_good", None)
    assert good, "runs after the fleet test (the hosts at a good revision)"
    big = fleet.push("hello big", blob=4 << 20)  # 4 MiB: more than the host's 2 MiB for its revisions
    s = fleet.tick(full)
    # A full disk is a failure (issue 40 item 5): failed / disk-full, in the state and the metrics.
    assert s["last"]["status"] == "failed" and s["last"]["reason"] == "disk-full", fleet.journal(full)
    assert s["applied"] == good and s["last"]["revision"] == big
    # git's own words say only "unable to write file": the line says how much room was left.
    assert f"KiB free in {CACHE}/revisions, the disk is full)" in s["last"]["message"], s["last"]["message"]
    journal = fleet.journal(full)
    assert f"failed: checkout of {big[:12]} failed" in journal, journal
    # Nothing half applied: the file, the current link, and no checkout left behind, whole or cut.
    assert fleet.demo(full) == "hello again\n"
    assert full.exec(["readlink", f"{CACHE}/current"]).stdout.strip() == f"revisions/{good}"
    assert full.exec(["ls", "-A", f"{CACHE}/revisions"]).stdout.split() == [good]
    prom = full.exec(["cat", TEXTFILE]).stdout
    assert f'bringup_pull_status{{host="{full.name}",status="failed"}} 1.0' in prom
    assert f'bringup_pull_applied_info{{host="{full.name}",revision="{good}"}} 1.0' in prom
    for h, s in zip(others, parallel(fleet.tick, others)):
        assert s["applied"] == big, fleet.journal(h)
    fleet.report()
    assert fleet.prom.fleet({NAMES[0]: "failed", NAMES[1]: "ok", NAMES[2]: "ok"}, big)["exit_code"] == 2

    # Room again (the same tmpfs, grown): the next run converges.
    full.exec(f"mount -o remount,size=64m {CACHE}/revisions")
    s = fleet.tick(full)
    assert s["applied"] == big and s["last"]["status"] == "applied", fleet.journal(full)
    assert fleet.demo(full) == "hello big\n"
    fleet.report()
    assert fleet.prom.fleet({n: "ok" for n in NAMES}, big)["exit_code"] == 0
