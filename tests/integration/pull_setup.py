"""What the pull sandbox tests share: this checkout's bringup and its libraries as a folder a host runs from, this
machine's git repackaged as a file: apt repository (the hosts have no network), signed commits made here, and a
host made ready to run ``bringup pull`` (``/usr/local/bin/bringup``)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from .helpers import REPO

#: What the pull run and the converge import (bringup's own modules are copied whole).
PROBE = ("import json, sys\n"
         "import bringup.cli, bringup.pull.run, bringup.pull.fleet, bringup.engine.runner, bringup.engine.rollout, bringup.engine.report\n"
         "import bringup.engine.templates, bringup.resources, bringup.facts, bringup.inventory.vault, bringup.inventory.hosts\n"
         "import bringup.ssh.connection, bringup.engine.ahead, bringup.engine.rolerun, bringup.secrets, bringup.ssh.stop\n"
         "import rich.console, rich.table, rich.progress, rich.live, rich.text, jinja2, yaml, pydantic\n"
         "import prometheus_client, prometheus_client.parser, invoke, paramiko\n"
         "print(json.dumps(sorted({m.__file__ for m in list(sys.modules.values())\n"
         "                         if getattr(m, '__file__', None)})))\n")


def python_libs(out: Path) -> Path:
    """bringup and the third-party packages the probe imports, as a folder for PYTHONPATH."""
    files = json.loads(subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True,
                                      check=True).stdout)
    lib = out / "lib"
    lib.mkdir()
    tops = set()
    for f in files:
        parts = Path(f).parts
        if "site-packages" in parts:
            tops.add(Path(*parts[:parts.index("site-packages") + 2]))
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "tests")
    # Their distributions' metadata too: paramiko, for one, reads its version from it.
    from importlib.metadata import packages_distributions, distribution

    dists = {d for top in tops for d in packages_distributions().get(top.name.split(".")[0], [])}
    for name in dists:
        meta = Path(distribution(name)._path)  # type: ignore[attr-defined]
        shutil.copytree(meta, lib / meta.name, ignore=ignore)
    for top in tops:
        if top.is_dir():
            shutil.copytree(top, lib / top.name, ignore=ignore, symlinks=True)
        else:
            shutil.copy2(top, lib / top.name)
    shutil.copytree(REPO / "bringup", lib / "bringup", ignore=ignore)
    return lib


def git_repository(out: Path) -> Path:
    """A flat apt repository with this machine's git (its own files, ``dpkg -L git``) as package ``git``."""
    from harness.doubles.debrepo import write_index

    version = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "git"], capture_output=True, text=True,
                             check=True).stdout
    root = out / "build-git"
    for line in subprocess.run(["dpkg", "-L", "git"], capture_output=True, text=True, check=True).stdout.splitlines():
        src = Path(line)
        if line.startswith(("/usr/bin/", "/usr/lib/git-core/", "/usr/share/git-core/")) and \
                (src.is_symlink() or src.is_file()):
            dst = root / line.lstrip("/")
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.is_symlink():
                os.symlink(os.readlink(src), dst)
            else:
                shutil.copy2(src, dst)
    (root / "DEBIAN").mkdir()
    (root / "DEBIAN" / "control").write_text(
        f"Package: git\nVersion: {version}\nArchitecture: amd64\nMaintainer: bringup tests <tests@invalid>\n"
        "Depends: libc6, libpcre2-8-0, zlib1g\nDescription: this machine's git, repackaged by bringup's tests\n"
        " The files of the control machine's own git package (Debian 12), for a host without network.\n")
    repo = out / "repo"
    repo.mkdir()
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(repo / "git.deb")],
                   check=True, capture_output=True)
    write_index(repo)
    return repo


def git(cwd: Path, *args: str, key: Path | None = None, env: dict | None = None) -> str:
    sign = ["-c", "gpg.format=ssh", "-c", f"user.signingkey={key}"] if key else []
    p = subprocess.run(["git", "-c", "user.name=ops", "-c", "user.email=ops@example.org", *sign, *args], cwd=cwd,
                       env=dict(os.environ, GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", **(env or {})),
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()




def use_apt_repository(host, repo: Path) -> None:
    """``repo`` (:func:`git_repository`) as the host's only apt source."""
    subprocess.run(["docker", "cp", str(repo), f"{host.container}:/srv/pull-apt"], check=True, capture_output=True)
    host.exec("mkdir -p /root/apt-aside && mv /etc/apt/sources.list.d/* /etc/apt/sources.list /root/apt-aside/ "
              "2>/dev/null; echo 'deb [trusted=yes] file:/srv/pull-apt ./' > /etc/apt/sources.list.d/pull.list")


def install_bringup(host, lib: Path) -> None:
    """``lib`` (:func:`python_libs`) as ``/opt/bringup/lib``, run by ``/usr/local/bin/bringup``."""
    host.exec("mkdir -p /opt/bringup")
    subprocess.run(["docker", "cp", str(lib), f"{host.container}:/opt/bringup/lib"], check=True, capture_output=True)
    host.exec("install -m 0755 /dev/stdin /usr/local/bin/bringup", input=(
        "#!/bin/sh\nPYTHONPATH=/opt/bringup/lib exec /usr/bin/python3 -c "
        "'import sys; from bringup.entry import main; sys.argv[0] = \"bringup\"; main()' \"$@\"\n"))


#: The demo repository's one role: a file whose content is the inventory's ``greeting``.
DEMO_ROLE = '''
from bringup.resources import File

FACTS = ()

def resources(host):
    return [File("/etc/pull-demo.conf", content=host.vars["greeting"] + "\\n")]
'''


def demo_repository(work: Path) -> Path:
    """A new Git repository at ``work`` holding a bringup project of its own (the demo role, its templates
    folder); the inventory is each test's to write."""
    git(work.parent, "init", "--quiet", "-b", "main", str(work))
    (work / "roles").mkdir()
    (work / "roles" / "__init__.py").write_text("ORDER = ['demo']\n")
    (work / "roles" / "demo.py").write_text(DEMO_ROLE)
    (work / "templates" / "demo").mkdir(parents=True)
    (work / "templates" / "demo" / ".keep").write_text("")
    return work
