"""What the sandbox host image is made of: suite, packages, configuration script, metadata.

The recipe's hash is the image's tag (:attr:`ImageRecipe.tag`): an unchanged
recipe reuses the cached image, an edited one rebuilds it.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from .common import IMAGE_REPO, LABEL, SandboxError

#: Debian 12, the default suite of the sandbox hosts (and of the Triton test double's root).
SUITE = "bookworm"
#: The suites a sandbox host can be built from (Debian 12 and 13), both by debootstrap from the same mirror.
SUITES: tuple[str, ...] = ("bookworm", "trixie")
#: Picks the suite of the sandbox hosts (``pytest --sandbox-suite`` sets it too).
SUITE_ENV = "BRINGUP_SANDBOX_SUITE"
VARIANT = "minbase"

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

#: Per suite, what a host of that release has on top of :data:`PACKAGES`.  Debian 13 moved the docker
#: client out of docker.io into docker-cli, only Recommended (debootstrap installs no Recommends,
#: apt install does): a trixie host with docker.io has it.
SUITE_PACKAGES: dict[str, tuple[str, ...]] = {"trixie": ("docker-cli",)}

#: Units masked in the image.  With the run flags (``host.RUN_FLAGS``) nothing fails at
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


def sandbox_suite(suite: str | None = None) -> str:
    """The suite asked for (``suite``, else ``$BRINGUP_SANDBOX_SUITE``, else bookworm), checked."""
    chosen = suite or os.environ.get(SUITE_ENV) or SUITE
    if chosen not in SUITES:
        raise SandboxError(f"sandbox suite {chosen!r} (from {'the caller' if suite else SUITE_ENV}) is not one of "
                           f"{', '.join(SUITES)}: set {SUITE_ENV} to one of them")
    return chosen


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


def image_recipe(suite: str | None = None) -> ImageRecipe:
    """Return the recipe of the sandbox host image of ``suite`` (default: :func:`sandbox_suite`).

    The configuration script is the same for every suite, and so are the
    packages but for :data:`SUITE_PACKAGES`: what differs between releases is
    what the tests are there to find.
    """
    suite = sandbox_suite(suite)
    return ImageRecipe(suite, VARIANT, PACKAGES + SUITE_PACKAGES.get(suite, ()), CONFIGURE_SCRIPT, IMAGE_CHANGES)
