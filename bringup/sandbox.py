"""Throwaway systemd hosts in Docker containers, reachable over real SSH.

The sandbox is what the integration tests and ``invoke sandbox`` provision
against: each host is a Debian bookworm container booted with systemd as
PID 1 and sshd published on a random port of 127.0.0.1::

    ensure_docker()
    remove_leftovers()
    image = build_image()                 # cached by recipe hash
    host = start_host("web1", workdir=Path(".sandbox/run"))
    host.exec("systemctl is-system-running")
    write_inventory(Path("inventory.yml"), [host])

No registry is reachable where this runs, so the image is not pulled but
built from the Debian mirror with ``debootstrap`` and ``docker import``-ed.
Its tag is a hash of the recipe (suite, packages, configuration script), so
an unchanged recipe reuses the image in about a second.

SSH trust is never "accept whatever answers": host keys are generated at
each container's first boot, read back over ``docker exec`` (a second
channel), and written to a known_hosts file that clients use with strict
host key checking.

Every failure raises :class:`SandboxError` with one line that says what to do.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from .errors import BringupError

__all__ = [
    "SandboxError",
    "ImageRecipe",
    "SandboxHost",
    "LABEL",
    "NAME_LABEL",
    "SESSION_LABEL",
    "SESSION",
    "state_dir",
    "debian_mirror",
    "ensure_docker",
    "image_recipe",
    "build_image",
    "remove_leftovers",
    "start_host",
    "write_inventory",
]

#: Label on every image and container the sandbox creates; leftovers are found by it.
LABEL = "bringup.sandbox"
#: Label carrying the host name a container was started as.
NAME_LABEL = "bringup.sandbox.name"
#: Label carrying the id of the process that started the container.
SESSION_LABEL = "bringup.sandbox.session"
#: This process's session id: its containers are not "leftovers" to itself.
SESSION = f"{os.getpid()}-{secrets.token_hex(4)}"

IMAGE_REPO = "bringup-sandbox"
SUITE = "bookworm"
VARIANT = "minbase"
FALLBACK_MIRROR = "http://deb.debian.org/debian"

#: Installed on top of minbase.  docker.io is there for later roles that run
#: containers on the host; it is disabled in the image (see the script).
PACKAGES: tuple[str, ...] = (
    "systemd",
    "systemd-sysv",
    "dbus",
    "openssh-server",
    "sudo",
    "procps",
    "iproute2",
    "kmod",
    "ca-certificates",
    "gnupg",
    "curl",
    "python3",
    "iptables",
    "docker.io",
    # The irq_affinity role configures it (its unit skips itself in containers).
    "irqbalance",
    # Compose v1 (Debian bookworm's 1.29): the triton role's stack needs a compose.
    "docker-compose",
)

#: What a systemd container needs short of --privileged (which fails on our
#: CI hosts): all capabilities except SYS_RESOURCE, no seccomp/AppArmor
#: filtering, unmasked /proc and /sys paths, and the host's cgroup tree so
#: systemd can manage its own slice.  /run must be a tmpfs for systemd.
RUN_FLAGS: tuple[str, ...] = (
    "--cap-add=ALL",
    "--cap-drop=SYS_RESOURCE",
    "--security-opt", "seccomp=unconfined",
    "--security-opt", "apparmor=unconfined",
    "--security-opt", "systempaths=unconfined",
    "--cgroupns=host",
    "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
    "--tmpfs", "/run",
    "--tmpfs", "/run/lock",
    # systemd halts cleanly on SIGRTMIN+3 (SIGTERM makes it re-execute).
    "--stop-signal", "SIGRTMIN+3",
    # Docker inside the host wants a real filesystem under its data dirs
    # (overlay2 on the container's own overlayfs root is unsupported on many
    # kernels): anonymous volumes, removed with the container (rm -v).
    "-v", "/var/lib/docker",
    "-v", "/var/lib/containerd",
)

#: Units masked in the image.  With the run flags above nothing fails at
#: boot (``systemctl --failed`` is empty, the state is "running"; udev and
#: gettys are not even installed by minbase), so this is not about failures:
#: with CAP_SYS_ADMIN these would mount the *host kernel's* debugfs and
#: tracefs, writable, into every test host.  Nothing under test needs them.
MASKED_UNITS: tuple[str, ...] = (
    "sys-kernel-debug.mount",
    "sys-kernel-tracing.mount",
)

#: Run in the debootstrapped root (``chroot root /bin/sh -s``).  Part of the
#: recipe hash: editing it rebuilds the image.
CONFIGURE_SCRIPT = r"""
set -eu
export DEBIAN_FRONTEND=noninteractive LC_ALL=C

# Host keys must differ per container: drop the build's, make one at first
# boot.  Only ed25519: it is the key the harness pins in known_hosts, and
# skipping RSA saves half a second per boot.  The empty ExecStartPre= resets
# Debian's list, whose "sshd -t" would fail before the key exists; it is
# re-added after the key is made.
rm -f /etc/ssh/ssh_host_*
mkdir -p /etc/systemd/system/ssh.service.d
cat > /etc/systemd/system/ssh.service.d/bringup-hostkeys.conf <<'EOF'
[Service]
ExecStartPre=
ExecStartPre=/bin/sh -c 'test -s /etc/ssh/ssh_host_ed25519_key || exec /usr/bin/ssh-keygen -q -t ed25519 -N "" -C "" -f /etc/ssh/ssh_host_ed25519_key'
ExecStartPre=/usr/sbin/sshd -t
EOF

# Keys only; root may log in (the harness connects as root by default).
# sshd_config.d is read first and the first value wins.
cat > /etc/ssh/sshd_config.d/bringup.conf <<'EOF'
HostKey /etc/ssh/ssh_host_ed25519_key
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UseDNS no
EOF
systemctl enable ssh.service

# Disabled, not masked, so a role's plain "systemctl enable --now docker"
# works; the preset keeps a first-boot preset-all from enabling them again.
systemctl disable docker.service docker.socket containerd.service
mkdir -p /etc/systemd/system-preset
cat > /etc/systemd/system-preset/10-bringup.preset <<'EOF'
disable docker.service
disable docker.socket
disable containerd.service
EOF

# See MASKED_UNITS: host-kernel debug filesystems stay out of test hosts.
@MASK@

# An empty machine-id makes systemd generate one per container at boot,
# instead of all containers sharing the build's.  dbus's copy must go too:
# systemd adopts /var/lib/dbus/machine-id when it is a real file.
: > /etc/machine-id
ln -sf /etc/machine-id /var/lib/dbus/machine-id

# A non-root login for become tests.  "*" rather than a locked "!" password,
# which some sshd/PAM setups treat as a disabled account even for keys.
useradd --create-home --shell /bin/bash --groups sudo deploy
usermod --password '*' deploy
echo 'deploy ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/deploy
chmod 0440 /etc/sudoers.d/deploy
install -d -m 0700 /root/.ssh
install -d -m 0700 -o deploy -g deploy /home/deploy/.ssh

# Smaller image: package caches and docs are of no use in a test host.
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /usr/share/doc/* /usr/share/man/* /usr/share/locale/* \
    /var/log/*.log
""".replace("@MASK@", f"systemctl mask {' '.join(MASKED_UNITS)}" if MASKED_UNITS else "")

#: Image metadata: systemd wants $container to know it runs in one.
#: (``docker import`` of daemon 20.10 refuses STOPSIGNAL: see ``--stop-signal``.)
IMAGE_CHANGES: tuple[str, ...] = (
    f"LABEL {LABEL}=1",
    "ENV container=docker",
    'CMD ["/lib/systemd/systemd"]',
)


class SandboxError(BringupError):
    """A sandbox operation failed; the message is one line saying why."""


def _log(msg: str) -> None:
    # stderr: tasks may print inventories or JSON on stdout.
    print(f"sandbox: {msg}", file=sys.stderr, flush=True)


def _last_line(text: str) -> str:
    lines = [l.strip() for l in (text or "").splitlines() if l.strip()]
    return lines[-1] if lines else "(no output)"


# --------------------------------------------------------------------------
# State directory and Docker daemon


def _repo_root() -> Path:
    here = Path.cwd().resolve()
    for d in (here, *here.parents):
        if (d / ".git").exists():
            return d
    # Not in a checkout: the tree this module lives in.
    return Path(__file__).resolve().parent.parent


def state_dir() -> Path:
    """Return (creating it) ``$BRINGUP_SANDBOX_DIR`` or ``<repo root>/.sandbox``."""
    env = os.environ.get("BRINGUP_SANDBOX_DIR")
    path = Path(env) if env else _repo_root() / ".sandbox"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _run(argv: Sequence[str], *, check: bool = True, input: str | None = None,
         timeout: float | None = 120, what: str | None = None) -> subprocess.CompletedProcess:
    try:
        cp = subprocess.run(list(argv), input=input, text=True, capture_output=True,
                            timeout=timeout)
    except FileNotFoundError:
        raise SandboxError(f"{argv[0]} is not installed") from None
    except subprocess.TimeoutExpired:
        raise SandboxError(f"{what or shlex.join(argv[:3])} timed out after {timeout}s") from None
    if check and cp.returncode != 0:
        raise SandboxError(f"{what or shlex.join(argv[:3])} failed (exit {cp.returncode}): "
                           f"{_last_line(cp.stderr or cp.stdout)}")
    return cp


def _docker(*args: str, check: bool = True, input: str | None = None,
            timeout: float | None = 120) -> subprocess.CompletedProcess:
    return _run(["docker", *args], check=check, input=input, timeout=timeout,
                what=f"docker {args[0]}")


def _docker_ok() -> bool:
    try:
        cp = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"],
                            capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return cp.returncode == 0


def _dockerd_pid() -> int | None:
    try:
        pid = int(Path("/var/run/docker.pid").read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def ensure_docker(timeout: float = 60) -> None:
    """Make sure a Docker daemon answers, starting ``dockerd`` if needed."""
    if shutil.which("docker") is None:
        raise SandboxError("docker is not installed: apt-get install docker.io")
    if _docker_ok():
        return
    proc: subprocess.Popen | None = None
    log = state_dir() / "dockerd.log"
    # A daemon that is still starting has written its pid file: wait for it
    # rather than start a second one that would fight over the socket.
    if _dockerd_pid() is None:
        dockerd = shutil.which("dockerd") or (
            "/usr/sbin/dockerd" if os.path.exists("/usr/sbin/dockerd") else None)
        if dockerd is None:
            raise SandboxError("docker is not installed: apt-get install docker.io")
        if os.geteuid() != 0:
            raise SandboxError("docker daemon is not running and starting dockerd needs root")
        _log(f"starting dockerd (log {log})")
        with open(log, "ab") as fh:
            # Own session: the daemon outlives this process and its Ctrl-C.
            proc = subprocess.Popen([dockerd], stdin=subprocess.DEVNULL, stdout=fh,
                                    stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _docker_ok():
            return
        if proc is not None and proc.poll() is not None:
            tail = _last_line(log.read_text(errors="replace")) if log.exists() else ""
            raise SandboxError(f"dockerd exited with {proc.returncode}: {tail} (log {log})")
        time.sleep(0.5)
    pid = _dockerd_pid()
    if proc is None and pid is not None:
        raise SandboxError(f"dockerd (pid {pid}) runs but 'docker info' fails after {timeout}s")
    raise SandboxError(f"docker daemon did not answer within {timeout}s (log {log})")


# --------------------------------------------------------------------------
# Image


def debian_mirror() -> str:
    """Return this machine's Debian mirror for bookworm, from its apt sources."""
    if os.environ.get("BRINGUP_SANDBOX_MIRROR"):
        return os.environ["BRINGUP_SANDBOX_MIRROR"].rstrip("/")
    found: list[str] = []
    d = Path("/etc/apt/sources.list.d")
    # deb822 files: paragraphs of "Key: value" fields.
    for path in sorted(d.glob("*.sources")) if d.is_dir() else []:
        for para in re.split(r"\n\s*\n", path.read_text(errors="replace")):
            fields: dict[str, str] = {}
            for line in para.splitlines():
                if line.startswith("#") or ":" not in line or line[:1].isspace():
                    continue
                k, v = line.split(":", 1)
                fields[k.strip().lower()] = v.strip()
            if fields.get("enabled", "yes").lower() == "no":
                continue
            if "deb" in fields.get("types", "").split() and SUITE in fields.get("suites", "").split():
                found += fields.get("uris", "").split()
    # One-line format: deb [options] URI suite components...
    lists = [Path("/etc/apt/sources.list"), *(sorted(d.glob("*.list")) if d.is_dir() else [])]
    for path in lists:
        if not path.is_file():
            continue
        for line in path.read_text(errors="replace").splitlines():
            line = re.sub(r"\[[^]]*\]", " ", line.split("#", 1)[0]).split()
            if len(line) >= 3 and line[0] == "deb" and line[2] == SUITE:
                found.append(line[1])
    for uri in found:
        if uri.startswith(("http://", "https://")):
            return uri.rstrip("/")
    return FALLBACK_MIRROR


@dataclass(frozen=True)
class ImageRecipe:
    """What the sandbox image is made of; its hash is the image's cache key."""

    suite: str
    variant: str
    packages: tuple[str, ...]
    script: str
    changes: tuple[str, ...]

    @property
    def digest(self) -> str:
        """Short sha256 of everything that shapes the image (not the mirror)."""
        h = hashlib.sha256()
        for part in (self.suite, self.variant, *self.packages, self.script, *self.changes):
            h.update(part.encode())
            h.update(b"\0")
        return h.hexdigest()[:12]

    @property
    def tag(self) -> str:
        """Docker tag of the image built from this recipe."""
        return f"{IMAGE_REPO}:{self.digest}"


def image_recipe() -> ImageRecipe:
    """Return the recipe of the sandbox host image."""
    return ImageRecipe(SUITE, VARIANT, PACKAGES, CONFIGURE_SCRIPT, IMAGE_CHANGES)


def _image_exists(tag: str) -> bool:
    return _docker("image", "inspect", "--format", "{{.Id}}", tag, check=False).returncode == 0


def _mounts_under(path: Path) -> list[str]:
    prefix = str(path.resolve())
    out = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        mnt = line.split()[1].replace("\\040", " ")
        if mnt == prefix or mnt.startswith(prefix + "/"):
            out.append(mnt)
    return out


def _remove_tree(path: Path) -> None:
    """Delete a build root, first unmounting what debootstrap may have left."""
    if not path.exists():
        return
    # A failed debootstrap can leave /proc or /sys mounted in the root;
    # rmtree would then walk into the real ones.
    for mnt in sorted(_mounts_under(path), key=len, reverse=True):
        subprocess.run(["umount", "-l", mnt], capture_output=True)
    left = _mounts_under(path)
    if left:
        raise SandboxError(f"cannot clean {path}: still mounted: {left[0]}")
    shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    # Two test runs building at once would debootstrap into one directory.
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


_STAGE = re.compile(r"^(I: (Retrieving (In)?Release|Resolving dependencies|Installing core|"
                    r"Unpacking required|Configuring required|Unpacking the base|"
                    r"Configuring the base|Base system installed)|[WE]: )")


def _debootstrap(recipe: ImageRecipe, root: Path, mirror: str, log: Path) -> None:
    # The .deb cache outlives the work dir: a script-only change rebuilds
    # without downloading again.
    cache = state_dir() / "debs"
    cache.mkdir(exist_ok=True)
    argv = ["debootstrap", f"--variant={recipe.variant}", f"--cache-dir={cache.resolve()}",
            f"--include={','.join(recipe.packages)}", recipe.suite, str(root), mirror]
    with open(log, "w") as fh:
        fh.write(f"$ {shlex.join(argv)}\n")
        fh.flush()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace")
        assert proc.stdout is not None
        last = ""
        for line in proc.stdout:
            fh.write(line)
            line = line.rstrip()
            if line:
                last = line
            if _STAGE.match(line):
                _log(f"  {line}")
        rc = proc.wait()
    if rc != 0:
        # debootstrap's own log has the failing dpkg output: keep it.
        inner = root / "debootstrap" / "debootstrap.log"
        if inner.exists():
            with open(log, "a") as fh:
                fh.write("\n--- debootstrap/debootstrap.log ---\n")
                fh.write(inner.read_text(errors="replace"))
        raise SandboxError(f"debootstrap failed (exit {rc}): {last} (log {log})")


def build_image(force: bool = False) -> str:
    """Build the sandbox host image unless cached; return its tag."""
    recipe = image_recipe()
    tag = recipe.tag
    if not force and _image_exists(tag):
        _log(f"using cached image {tag}")
        return tag
    if shutil.which("debootstrap") is None and not os.path.exists("/usr/sbin/debootstrap"):
        raise SandboxError("debootstrap is not installed: apt-get install debootstrap")
    if os.geteuid() != 0:
        raise SandboxError("building the sandbox image needs root (debootstrap, chroot)")
    state = state_dir()
    with _lock(state / "build.lock"):
        # Another process may have built it while we waited for the lock.
        if not force and _image_exists(tag):
            _log(f"using cached image {tag}")
            return tag
        mirror = debian_mirror()
        work = state / f"build-{recipe.digest}"
        log = state / f"build-{recipe.digest}.log"
        root = work / "root"
        _remove_tree(work)
        root.mkdir(parents=True)
        t0 = time.monotonic()
        try:
            _log(f"building {tag}: debootstrap {recipe.suite} ({recipe.variant} + "
                 f"{len(recipe.packages)} packages) from {mirror}; log {log}")
            _debootstrap(recipe, root, mirror, log)
            t1 = time.monotonic()
            _log(f"debootstrap done in {t1 - t0:.0f}s; configuring")
            cp = _run(["chroot", str(root), "/bin/sh", "-s"], input=recipe.script,
                      check=False, timeout=300)
            with open(log, "a") as fh:
                fh.write("\n--- configure script ---\n" + cp.stdout + cp.stderr + "\n")
            if cp.returncode != 0:
                raise SandboxError(f"image configuration failed (exit {cp.returncode}): "
                                   f"{_last_line(cp.stderr or cp.stdout)} (log {log})")
            old = _docker("image", "inspect", "--format", "{{.Id}}", tag, check=False).stdout.strip()
            _import(root, tag, recipe)
            if old and old != _docker("image", "inspect", "--format", "{{.Id}}", tag).stdout.strip():
                # The forced rebuild replaced the tag; drop the old image if unused.
                _docker("image", "rm", old, check=False)
            _remove_stale_images(tag)
            size = int(_docker("image", "inspect", "--format", "{{.Size}}", tag).stdout.strip())
            _log(f"imported {tag} ({size / 1e6:.0f} MB) in {time.monotonic() - t1:.0f}s; "
                 f"total {time.monotonic() - t0:.0f}s")
        finally:
            _remove_tree(work)
    return tag


def _remove_stale_images(keep: str) -> None:
    """Remove sandbox images of older recipes; ones still used by a container stay."""
    # Each is ~400 MB and no recipe hash comes back once the recipe changed.
    out = _docker("images", "--filter", f"label={LABEL}=1",
                  "--format", "{{.Repository}}:{{.Tag}}", check=False).stdout.split()
    for ref in out:
        if ref != keep and ref.startswith(f"{IMAGE_REPO}:"):
            if _docker("image", "rm", ref, check=False).returncode == 0:
                _log(f"removed stale image {ref}")


def _import(root: Path, tag: str, recipe: ImageRecipe) -> None:
    argv = ["docker", "import", "--message", f"bringup sandbox {recipe.suite} {recipe.digest}"]
    for change in recipe.changes:
        argv += ["--change", change]
    argv += ["-", tag]
    # --numeric-owner: the ids inside the root, not this machine's names for them.
    tar = subprocess.Popen(["tar", "-C", str(root), "--numeric-owner", "--xattrs", "-c", "."],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert tar.stdout is not None
    imp = subprocess.run(argv, stdin=tar.stdout, capture_output=True, text=True)
    tar.stdout.close()
    tar_err = tar.stderr.read().decode(errors="replace") if tar.stderr else ""
    # docker's error first: when it fails, tar only dies of SIGPIPE.
    if imp.returncode != 0:
        raise SandboxError(f"docker import failed: {_last_line(imp.stderr)}")
    if tar.wait() != 0:
        raise SandboxError(f"tar of the image root failed: {_last_line(tar_err)}")


# --------------------------------------------------------------------------
# Containers


def _session_alive(session: str) -> bool:
    """Whether the process that started a container (label ``<pid>-<token>``) still runs."""
    pid = session.split("-", 1)[0]
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_leftovers(*, include_current: bool = False) -> list[str]:
    """Remove sandbox containers (running or not) left by earlier sessions.

    Every container labelled ``bringup.sandbox=1`` goes, except those this
    process started (unless ``include_current``), so a test can call it while
    its own hosts run, and those of other sessions still running (parallel
    test runs in one checkout).  Images are kept: they are the cache.  Returns the
    removed container ids.
    """
    cp = _docker("ps", "-a", "--no-trunc", "--filter", f"label={LABEL}=1", "--format",
                 f'{{{{.ID}}}} {{{{.Label "{SESSION_LABEL}"}}}}')
    ids = []
    for line in cp.stdout.splitlines():
        cid, _, session = line.partition(" ")
        session = session.strip()
        # A session whose process still runs is a concurrent test run, not a leftover.
        if cid and (include_current or (session != SESSION and not _session_alive(session))):
            ids.append(cid)
    if ids:
        # -v: the anonymous /var/lib/docker volumes go with them.
        _docker("rm", "-f", "-v", *ids)
        _log(f"removed {len(ids)} leftover container(s)")
    return ids


def _key_pair(workdir: Path) -> Path:
    """Return workdir's ed25519 private key file, generating the pair once."""
    key = workdir / "id_ed25519"
    pub = workdir / "id_ed25519.pub"
    if key.exists() and pub.exists():
        return key
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption())
    line = private.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                             serialization.PublicFormat.OpenSSH)
    # 0600 from creation: ssh refuses keys that others could read.
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    pub.write_bytes(line + b" bringup-sandbox\n")
    return key


_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


@dataclass
class SandboxHost:
    """One running sandbox container and how to reach it over SSH."""

    name: str
    container: str
    port: int
    key_file: Path
    known_hosts: Path
    #: Seconds from ``docker run`` (or restart) until sshd answered.
    boot_seconds: float = field(default=0.0, compare=False)

    def exec(self, cmd: list[str] | str, check: bool = True, *, input: str | None = None,
             user: str | None = None, timeout: float | None = 300) -> subprocess.CompletedProcess:
        """Run a command in the container via ``docker exec`` (a str via ``sh -c``)."""
        argv = ["docker", "exec"]
        if input is not None:
            argv.append("-i")
        if user:
            argv += ["-u", user]
        argv.append(self.container)
        argv += ["sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        shown = cmd if isinstance(cmd, str) else shlex.join(cmd)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        return _run(argv, check=check, input=input, timeout=timeout,
                    what=f"{self.name}: {shown!r}")

    def restart(self, timeout: float = 120) -> None:
        """Restart the container and wait until SSH answers again (port may change)."""
        t0 = time.monotonic()
        _docker("restart", "--time", "10", self.container, timeout=timeout)
        self._wait_ready(t0, timeout)

    def remove(self) -> None:
        """Remove the container and its volumes; a missing container is fine."""
        _docker("rm", "-f", "-v", self.container, check=False)

    def inventory_vars(self) -> dict[str, Any]:
        """Return the Ansible connection variables of this host."""
        return {
            "ansible_host": "127.0.0.1",
            "ansible_port": self.port,
            "ansible_user": "root",
            "ansible_ssh_private_key_file": str(self.key_file),
            "ssh_known_hosts": str(self.known_hosts),
        }

    def ssh_argv(self, user: str = "root") -> list[str]:
        """Return an OpenSSH client command line (strict host keys) for this host."""
        return ["ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
                "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={self.known_hosts}",
                "-o", "GlobalKnownHostsFile=/dev/null", "-o", "ConnectTimeout=10",
                "-i", str(self.key_file), "-p", str(self.port), f"{user}@127.0.0.1"]

    # -- internals ---------------------------------------------------------

    def _read_port(self) -> int:
        out = _docker("port", self.container, "22/tcp").stdout
        for line in out.splitlines():
            host, _, port = line.strip().rpartition(":")
            if host == "127.0.0.1" and port.isdigit():
                return int(port)
        raise SandboxError(f"{self.name}: no 127.0.0.1 port published for ssh: {out.strip()!r}")

    def _state(self) -> str:
        return _docker("inspect", "--format", "{{.State.Status}}", self.container,
                       check=False).stdout.strip() or "missing"

    def _wait_ready(self, t0: float, timeout: float) -> None:
        deadline = t0 + timeout
        self.port = self._read_port()
        # 1. systemd has finished booting.  Before its bus is up the command
        #    fails ("Failed to connect to bus"): retry.
        state = ""
        while True:
            if self._state() != "running":
                logs = _docker("logs", "--tail", "5", self.container, check=False)
                raise SandboxError(f"{self.name}: container is {self._state()}: "
                                   f"{_last_line(logs.stdout + logs.stderr)}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise SandboxError(f"{self.name}: systemd did not finish booting within "
                                   f"{timeout}s (state {state or 'unknown'})")
            cp = self.exec(["systemctl", "is-system-running", "--wait"], check=False,
                           timeout=max(left, 1))
            state = cp.stdout.strip()
            if state in ("running", "degraded"):
                break
            time.sleep(0.3)
        if state == "degraded":
            failed = self.exec(["systemctl", "--failed", "--plain", "--no-legend"],
                               check=False).stdout.split()
            _log(f"{self.name}: systemd is degraded, failed units: "
                 f"{' '.join(u for u in failed if '.' in u) or '?'}")
        # 2. sshd answers with its banner.  Docker's proxy accepts TCP even
        #    when nothing listens inside, so a connect alone proves nothing.
        while not _ssh_banner(self.port):
            if time.monotonic() > deadline:
                raise SandboxError(f"{self.name}: sshd did not answer on 127.0.0.1:{self.port} "
                                   f"within {timeout}s")
            time.sleep(0.2)
        # 3. Trust the host key read over the second channel, docker exec.
        key = self.exec(["cat", "/etc/ssh/ssh_host_ed25519_key.pub"]).stdout.split()
        if len(key) < 2 or key[0] != "ssh-ed25519":
            raise SandboxError(f"{self.name}: unexpected host key file: {' '.join(key)[:60]!r}")
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {key[0]} {key[1]}\n")
        self.boot_seconds = time.monotonic() - t0


def _ssh_banner(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.settimeout(2)
            return s.recv(64).startswith(b"SSH-")
    except OSError:
        return False


def start_host(name: str, *, restart: str = "unless-stopped", workdir: Path,
               image: str | None = None, timeout: float = 120, port: int | None = None) -> SandboxHost:
    """Start a sandbox host named ``name`` and wait until SSH is ready.

    ``workdir`` holds the run's key pair (made once per workdir) and the
    host's known_hosts file.  ``image`` defaults to :func:`build_image`'s tag.
    """
    if not _NAME.match(name):
        raise SandboxError(f"invalid sandbox host name {name!r}: use a-z, 0-9 and '-'")
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    key = _key_pair(workdir)
    image = image or build_image()
    # A random suffix: a new session never trips over an old container's name.
    cname = f"{IMAGE_REPO}-{name}-{secrets.token_hex(3)}"
    t0 = time.monotonic()
    cid = _docker(
        "run", "--detach", "--name", cname, "--hostname", name,
        "--label", f"{LABEL}=1", "--label", f"{NAME_LABEL}={name}",
        "--label", f"{SESSION_LABEL}={SESSION}",
        # A fixed port survives the container restarting itself (a reboot); a random one is re-drawn.
        "--publish", f"127.0.0.1:{port or ''}:22", "--restart", restart,
        *RUN_FLAGS, image,
    ).stdout.strip()
    host = SandboxHost(name=name, container=cid[:12], port=0, key_file=key,
                       known_hosts=workdir / f"{name}.known_hosts")
    try:
        pub = (workdir / "id_ed25519.pub").read_text()
        # Through stdin, not the command line: keys are data, not code.
        host.exec("install -m 0600 /dev/stdin /root/.ssh/authorized_keys && "
                  "install -m 0600 -o deploy -g deploy /root/.ssh/authorized_keys "
                  "/home/deploy/.ssh/authorized_keys", input=pub)
        host._wait_ready(t0, timeout)
    except BaseException:
        host.remove()
        raise
    _log(f"{name}: ssh ready on 127.0.0.1:{host.port} after {host.boot_seconds:.1f}s "
         f"(container {host.container})")
    return host


def write_inventory(path: Path, hosts: list[SandboxHost], group: str = "sandbox",
                    extra_vars: dict[str, Any] | None = None) -> Path:
    """Write an Ansible YAML inventory of ``hosts`` in one group; return ``path``."""
    import yaml

    group_vars: dict[str, Any] = {"gpu_profile": "cpu", **(extra_vars or {})}
    data = {"all": {"children": {group: {
        "hosts": {h.name: h.inventory_vars() for h in hosts},
        "vars": group_vars,
    }}}}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False, default_flow_style=False))
    return path
