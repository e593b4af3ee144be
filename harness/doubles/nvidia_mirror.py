"""A signed local apt mirror of TEST DOUBLES carrying the real NVIDIA package names.

Test hosts have no GPU and cannot reach NVIDIA's servers.  This builds, with
``dpkg-deb`` and a throwaway GPG key, two flat repositories that apt verifies
for real (InRelease signed, Release with SHA-256 sums, ``signed-by`` keyrings):

- ``driver/`` (key "driver"): ``nvidia-headless-<br>-server`` and its
  dependencies, ``nvidia-utils-<br>-server``, ``linux-headers-<running kernel>``,
  ``initramfs-tools``.
- ``toolkit/`` (key "toolkit", also published armored as ``toolkit/gpgkey``
  like NVIDIA's): ``nvidia-container-toolkit``, ``-base``,
  ``libnvidia-container-tools``, ``libnvidia-container1``.

Every package says TEST DOUBLE in its description and files.  What the
doubles do, so the roles' real work can be checked:

- ``nvidia-dkms-<br>-server``'s postinst fails like DKMS when the running
  kernel's headers are missing, and records the installed driver version;
  a boot-time unit "loads" it (a file in /run, a tmpfs: gone at reboot, like
  a loaded module), so a new driver takes effect only after a reboot.
- ``nvidia-smi`` prints the real H200 outputs of ``tests/fixtures/hosts/h200-vm/``
  with the driver version replaced by the loaded double's, and NVIDIA's real
  messages when no driver is loaded or the loaded one differs from the
  installed one ("Driver/library version mismatch").
- ``nvidia-persistenced`` fails without a loaded driver.
- ``nvidia-ctk runtime configure --runtime=docker [--set-as-default]`` edits
  daemon.json as the real one does (runtimes.nvidia, 4-space JSON, other keys
  kept); ``nvidia-container-runtime`` hands over to ``runc``;
  ``nvidia-container-runtime-hook`` accepts the prestart call ``--gpus`` makes.
- ``update-initramfs`` (initramfs-tools) logs each call.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .debrepo import write_index

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "hosts" / "h200-vm"
FIXTURE_DRIVER = "580.159.04"
DOUBLE = "TEST DOUBLE"

#: Driver versions in the mirror, by branch (real Canonical version strings).
DRIVER_VERSIONS = {
    "550": ["550.127.05-0ubuntu0.24.04.1", "550.144.03-0ubuntu0.24.04.1"],
    "535": ["535.216.01-0ubuntu0.24.04.1"],
}
TOOLKIT_VERSIONS = ["1.16.2-1", "1.17.6-1"]


@dataclass
class Deb:
    name: str
    version: str
    description: str
    depends: list[str] = field(default_factory=list)
    files: dict[str, tuple[str, int]] = field(default_factory=dict)  # path -> (content, mode)
    postinst: str | None = None
    conffiles: list[str] = field(default_factory=list)

    def build(self, out: Path) -> Path:
        root = out / f".build-{self.name}-{self.version}"
        shutil.rmtree(root, ignore_errors=True)
        (root / "DEBIAN").mkdir(parents=True)
        files = dict(self.files)
        files[f"/usr/share/doc/{self.name}/README.TEST-DOUBLE"] = (
            f"{self.name} {self.version}: {DOUBLE} built by bringup's test suite; not NVIDIA's package.\n", 0o644)
        for path, (content, mode) in files.items():
            f = root / path.lstrip("/")
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(content)
            f.chmod(mode)
        control = (f"Package: {self.name}\nVersion: {self.version}\nArchitecture: all\n"
                   f"Maintainer: bringup tests <tests@invalid>\n")
        if self.depends:
            control += "Depends: " + ", ".join(self.depends) + "\n"
        control += f"Description: {DOUBLE}: {self.description}\n {DOUBLE}: not the real package.\n"
        (root / "DEBIAN" / "control").write_text(control)
        if self.postinst:
            p = root / "DEBIAN" / "postinst"
            p.write_text("#!/bin/sh\nset -e\n# " + DOUBLE + "\n" + self.postinst)
            p.chmod(0o755)
        if self.conffiles:
            (root / "DEBIAN" / "conffiles").write_text("".join(c + "\n" for c in self.conffiles))
        deb = out / f"{self.name}_{self.version}_all.deb"
        subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(deb)],
                       check=True, capture_output=True)
        shutil.rmtree(root)
        return deb


# ---------------------------------------------------------------- the doubles

NVIDIA_SMI = r'''#!/bin/sh
# TEST DOUBLE of nvidia-smi: replays real outputs captured on an H200 host
# (tests/fixtures/hosts/h200-vm), the driver version set to the loaded double's.
d=/usr/share/nvidia-test-double
loaded=$(cat /run/nvidia-test-double/loaded 2>/dev/null || true)
installed=$(cat /var/lib/nvidia-test-double/installed 2>/dev/null || true)
if [ -z "$loaded" ]; then
  echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."
  exit 9
fi
if [ "$loaded" != "$installed" ]; then
  echo "Failed to initialize NVML: Driver/library version mismatch"
  echo "NVML library version: ${installed%%-*}"
  exit 18
fi
sub() { sed "s/@DRIVER@/$loaded/g" "$1"; }
case "$*" in
  *--query-gpu=*noheader*) sub $d/query.csv | tail -n +2 ;;
  *--query-gpu=*) sub $d/query.csv ;;
  *topo*) sub $d/topo.txt ;;
  -L|--list-gpus) sub $d/L.txt ;;
  *) sub $d/q.txt ;;
esac
'''

PERSISTENCED = r'''#!/bin/sh
# TEST DOUBLE of nvidia-persistenced: needs a loaded driver, like the real one.
if [ ! -s /run/nvidia-test-double/loaded ]; then
  echo "nvidia-persistenced failed to initialize. Check syslog for more details." >&2
  exit 1
fi
exec sleep infinity
'''

PERSISTENCED_UNIT = """[Unit]
Description=NVIDIA Persistence Daemon (TEST DOUBLE)
Wants=syslog.target

[Service]
ExecStart=/usr/bin/nvidia-persistenced

[Install]
WantedBy=multi-user.target
"""

MODLOAD_UNIT = """[Unit]
Description=TEST DOUBLE: "load" the installed NVIDIA kernel module at boot
DefaultDependencies=no
Before=nvidia-persistenced.service

[Service]
Type=oneshot
ExecStart=/bin/sh -c 'mkdir -p /run/nvidia-test-double && cp /var/lib/nvidia-test-double/installed /run/nvidia-test-double/loaded'

[Install]
WantedBy=multi-user.target
"""

DKMS_POSTINST = r'''k=$(uname -r)
if [ ! -d "/usr/src/linux-headers-$k" ]; then
  echo "Error! Your kernel headers for kernel $k cannot be found." >&2
  echo "Please install the linux-headers-$k package or use the --kernelsourcedir option." >&2
  exit 1
fi
mkdir -p /var/lib/nvidia-test-double
echo "@UPSTREAM@" > /var/lib/nvidia-test-double/installed
systemctl enable nvidia-test-double-modload.service >/dev/null 2>&1 || true
'''

NVIDIA_CTK = r'''#!/usr/bin/python3
"""TEST DOUBLE of nvidia-ctk: `runtime configure --runtime=docker [--set-as-default] [--config=PATH]`
edits daemon.json the way the real nvidia-ctk does (other keys kept, 4-space JSON)."""
import json, os, sys
args = sys.argv[1:]
if args[:1] == ["--version"]:
    print("NVIDIA Container Toolkit CLI version @VERSION@ (TEST DOUBLE)"); sys.exit(0)
if args[:2] != ["runtime", "configure"]:
    print("TEST DOUBLE nvidia-ctk: only `runtime configure` is implemented", file=sys.stderr); sys.exit(2)
opts = dict(a.lstrip("-").split("=", 1) if "=" in a else (a.lstrip("-"), True) for a in args[2:])
if opts.get("runtime") != "docker":
    print("TEST DOUBLE nvidia-ctk: only --runtime=docker", file=sys.stderr); sys.exit(2)
path = opts.get("config", "/etc/docker/daemon.json")
cfg = {}
if os.path.exists(path) and open(path).read().strip():
    cfg = json.load(open(path))
else:
    print('INFO[0000] Config file does not exist; creating new one', file=sys.stderr)
cfg.setdefault("runtimes", {})["nvidia"] = {"args": [], "path": "nvidia-container-runtime"}
if opts.get("set-as-default"):
    cfg["default-runtime"] = "nvidia"
os.makedirs(os.path.dirname(path), exist_ok=True)
with open(path, "w") as f:
    f.write(json.dumps(cfg, indent=4) + "\n")
print(f"INFO[0000] Wrote updated config to {path}", file=sys.stderr)
print("INFO[0000] It is recommended that docker daemon be restarted.", file=sys.stderr)
'''

RUNTIME = '#!/bin/sh\n# TEST DOUBLE of nvidia-container-runtime: no GPU to inject, hands over to runc.\nexec runc "$@"\n'
HOOK = ('#!/bin/sh\n# TEST DOUBLE of nvidia-container-runtime-hook: accepts the prestart call of '
        '`docker run --gpus` (no GPU to mount).\ncat >/dev/null\nexit 0\n')
INITRAMFS = ('#!/bin/sh\n# TEST DOUBLE of update-initramfs: logs each call.\n'
             'echo "update-initramfs $*" >> /var/log/update-initramfs-test-double.log\n'
             'echo "update-initramfs: Generating /boot/initrd.img-$(uname -r) (TEST DOUBLE)"\n')


def _fixture(name: str) -> str:
    return (FIXTURES / name).read_text().replace(FIXTURE_DRIVER, "@DRIVER@")


def driver_debs(kernel: str) -> list[Deb]:
    debs = [
        Deb(f"linux-headers-{kernel}", "1.0-bringup1", f"kernel headers for {kernel}",
            files={f"/usr/src/linux-headers-{kernel}/README": (f"{DOUBLE}: headers of {kernel}\n", 0o644)}),
        Deb("initramfs-tools", "0.142-bringup1", "update-initramfs that logs its calls",
            files={"/usr/sbin/update-initramfs": (INITRAMFS, 0o755)}),
    ]
    smi_files = {"/usr/share/nvidia-test-double/query.csv": (_fixture("nvidia-smi-query.csv"), 0o644),
                 "/usr/share/nvidia-test-double/q.txt": (_fixture("nvidia-smi-q.txt"), 0o644),
                 "/usr/share/nvidia-test-double/topo.txt": (_fixture("nvidia-smi-topo.txt"), 0o644),
                 "/usr/share/nvidia-test-double/L.txt": (_fixture("nvidia-smi-L.txt"), 0o644),
                 "/usr/bin/nvidia-smi": (NVIDIA_SMI, 0o755)}
    for br, versions in DRIVER_VERSIONS.items():
        for v in versions:
            up = v.split("-")[0]
            same = f"(= {v})"
            debs += [
                Deb(f"nvidia-kernel-common-{br}-server", v, f"NVIDIA kernel common files {up}"),
                Deb(f"nvidia-dkms-{br}-server", v, f"NVIDIA DKMS module {up}",
                    files={"/lib/systemd/system/nvidia-test-double-modload.service": (MODLOAD_UNIT, 0o644)},
                    postinst=DKMS_POSTINST.replace("@UPSTREAM@", up)),
                Deb(f"nvidia-compute-utils-{br}-server", v, f"nvidia-persistenced {up}",
                    files={"/usr/bin/nvidia-persistenced": (PERSISTENCED, 0o755),
                           "/lib/systemd/system/nvidia-persistenced.service": (PERSISTENCED_UNIT, 0o644)}),
                Deb(f"nvidia-headless-{br}-server", v, f"NVIDIA headless driver {up}",
                    depends=[f"nvidia-dkms-{br}-server {same}", f"nvidia-kernel-common-{br}-server {same}",
                             f"nvidia-compute-utils-{br}-server {same}"]),
                Deb(f"nvidia-utils-{br}-server", v, f"nvidia-smi {up}", files=smi_files),
            ]
    return debs


def toolkit_debs() -> list[Deb]:
    debs = []
    for v in TOOLKIT_VERSIONS:
        same = f"(= {v})"
        up = v.split("-")[0]
        debs += [
            Deb("libnvidia-container1", v, "NVIDIA container library"),
            Deb("libnvidia-container-tools", v, "NVIDIA container CLI", depends=[f"libnvidia-container1 {same}"],
                files={"/usr/bin/nvidia-container-cli": (f"#!/bin/sh\necho 'cli-version: {up} ({DOUBLE})'\n", 0o755)}),
            Deb("nvidia-container-toolkit-base", v, "nvidia-ctk and nvidia-container-runtime",
                files={"/usr/bin/nvidia-ctk": (NVIDIA_CTK.replace("@VERSION@", up), 0o755),
                       "/usr/bin/nvidia-container-runtime": (RUNTIME, 0o755)}),
            Deb("nvidia-container-toolkit", v, "NVIDIA container toolkit",
                depends=[f"nvidia-container-toolkit-base {same}", f"libnvidia-container-tools {same}"],
                files={"/usr/bin/nvidia-container-runtime-hook": (HOOK, 0o755)}),
        ]
    return debs


# ---------------------------------------------------------------- signing

@dataclass
class Key:
    name: str
    home: Path
    keyring: Path  # binary, for signed-by
    armored: Path
    fingerprint: str


def stop_agent(home: Path) -> None:
    """Stop the gpg-agent gpg started for ``home`` (it outlives the gpg that started it: a test run left one per
    throwaway keyring); gpg starts one again when it next needs the secret key."""
    subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], capture_output=True, check=False)


def make_key(workdir: Path, name: str) -> Key:
    """A throwaway ed25519 signing key in its own GNUPGHOME."""
    home = workdir / f"gnupg-{name}"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(mode=0o700, parents=True)
    env = {**os.environ, "GNUPGHOME": str(home)}
    uid = f"bringup {name} TEST DOUBLE repository key <{name}@tests.invalid>"
    subprocess.run(["gpg", "--batch", "--passphrase", "", "--quick-gen-key", uid, "ed25519", "sign", "never"],
                   env=env, check=True, capture_output=True)
    fpr = next(l.split(":")[9] for l in subprocess.run(
        ["gpg", "--batch", "--with-colons", "--list-keys"], env=env, check=True, capture_output=True,
        text=True).stdout.splitlines() if l.startswith("fpr:"))
    keyring = workdir / f"{name}.gpg"
    armored = workdir / f"{name}.asc"
    keyring.write_bytes(subprocess.run(["gpg", "--batch", "--export", fpr], env=env, check=True,
                                       capture_output=True).stdout)
    armored.write_bytes(subprocess.run(["gpg", "--batch", "--armor", "--export", fpr], env=env, check=True,
                                       capture_output=True).stdout)
    stop_agent(home)
    return Key(name, home, keyring, armored, fpr)


def sign_flat_repo(repo: Path, key: Key, label: str) -> None:
    """Write Packages(.gz), Release with sizes and SHA-256 sums, InRelease and Release.gpg."""
    write_index(repo)
    packages = (repo / "Packages").read_bytes()
    (repo / "Packages.gz").write_bytes(gzip.compress(packages, mtime=0))
    lines = [f"Origin: bringup tests", f"Label: {label} ({DOUBLE})", "Architectures: all amd64",
             "Date: " + time.strftime("%a, %d %b %Y %H:%M:%S UTC", time.gmtime()), "SHA256:"]
    for name in ("Packages", "Packages.gz"):
        data = (repo / name).read_bytes()
        lines.append(f" {hashlib.sha256(data).hexdigest()} {len(data)} {name}")
    (repo / "Release").write_text("\n".join(lines) + "\n")
    env = {**os.environ, "GNUPGHOME": str(key.home)}
    for out, mode in (("InRelease", "--clearsign"), ("Release.gpg", "--detach-sign")):
        (repo / out).unlink(missing_ok=True)
        subprocess.run(["gpg", "--batch", "--yes", "--local-user", key.fingerprint, "--armor", mode,
                        "-o", str(repo / out), str(repo / "Release")], env=env, check=True, capture_output=True)
    stop_agent(key.home)


@dataclass
class Mirror:
    root: Path
    driver_key: Key
    toolkit_key: Key
    kernel: str

    def copy_to(self, host, dest: str = "/srv/mirror") -> None:
        """Hand the mirror to a sandbox host (``docker cp``): it is reached as ``file:`` there."""
        host.exec(["rm", "-rf", dest])
        subprocess.run(["docker", "cp", str(self.root), f"{host.container}:{dest}"], check=True,
                       capture_output=True)

    def inventory_vars(self, dest: str = "/srv/mirror") -> dict:
        """The repository variables pointing the roles at this mirror, as a host sees it."""
        return {
            # The driver key travels from the control machine (air gap); the toolkit's is fetched by the host.
            "nvidia_driver_repo": {"url": f"file:{dest}/driver", "suite": "./", "key": str(self.driver_key.armored)},
            "container_toolkit_repo": {"url": f"file:{dest}/toolkit", "suite": "./",
                                       "key_url": f"file://{dest}/toolkit/gpgkey"},
        }


def build_mirror(workdir: Path, kernel: str) -> Mirror:
    """Build both signed repositories under ``workdir/mirror``."""
    workdir.mkdir(parents=True, exist_ok=True)
    root = workdir / "mirror"
    shutil.rmtree(root, ignore_errors=True)
    keys = {n: make_key(workdir, n) for n in ("driver", "toolkit")}
    for name, debs in (("driver", driver_debs(kernel)), ("toolkit", toolkit_debs())):
        repo = root / name
        repo.mkdir(parents=True)
        for d in debs:
            d.build(repo)
        sign_flat_repo(repo, keys[name], f"{name} mirror")
    shutil.copy(keys["toolkit"].armored, root / "toolkit" / "gpgkey")
    return Mirror(root, keys["driver"], keys["toolkit"], kernel)


def running_kernel(host) -> str:
    return host.exec(["uname", "-r"]).stdout.strip()


def dump(obj) -> str:
    return json.dumps(obj, indent=2)
