"""Building the sandbox host image: ``debootstrap`` from the Debian mirror, configure in a chroot, ``docker import``."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .common import IMAGE_REPO, LABEL, SandboxError, _last_line, _log, _run, state_dir
from .docker import _docker
from .lock import _lock
from .mirror import debian_mirror
from .recipe import ImageRecipe, image_recipe


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


_STAGE = re.compile(r"^(I: (Retrieving (In)?Release|Resolving dependencies|Installing core|"
                    r"Unpacking required|Configuring required|Unpacking the base|"
                    r"Configuring the base|Base system installed)|[WE]: )")


@contextmanager
def build_root(name: str) -> Iterator[tuple[Path, Path]]:
    """A fresh, empty root folder to build an image ``name`` in, and its build log; the folder goes afterwards.

    Hold the build lock around it: two builds share the state folder.
    """
    state = state_dir()
    work = state / f"build-{name}"
    _remove_tree(work)
    root = work / "root"
    root.mkdir(parents=True)
    try:
        yield root, state / f"build-{name}.log"
    finally:
        _remove_tree(work)


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


def build_image(force: bool = False, suite: str | None = None) -> str:
    """Build the sandbox host image of ``suite`` (default ``$BRINGUP_SANDBOX_SUITE``, else bookworm) unless
    cached; return its tag."""
    recipe = image_recipe(suite)
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
        t0 = time.monotonic()
        with build_root(recipe.digest) as (root, log):
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
            _remove_stale_images(tag, recipe.suite)
            size = int(_docker("image", "inspect", "--format", "{{.Size}}", tag).stdout.strip())
            _log(f"imported {tag} ({size / 1e6:.0f} MB) in {time.monotonic() - t1:.0f}s; "
                 f"total {time.monotonic() - t0:.0f}s")
    return tag


def _import_message(recipe: ImageRecipe) -> str:
    return f"bringup sandbox {recipe.suite} {recipe.digest}"


def _remove_stale_images(keep: str, suite: str) -> None:
    """Remove sandbox images of older recipes of ``suite``; ones still used by a container stay.

    Another suite's image is not stale: the tests use both.  The suite is read
    from the image's import message (``bringup sandbox <suite> <digest>``).
    """
    # Each is ~400 MB and no recipe hash comes back once the recipe changed.
    out = _docker("images", "--filter", f"label={LABEL}=1",
                  "--format", "{{.Repository}}:{{.Tag}}", check=False).stdout.split()
    for ref in out:
        if ref == keep or not ref.startswith(f"{IMAGE_REPO}:"):
            continue
        comment = _docker("image", "inspect", "--format", "{{.Comment}}", ref, check=False).stdout.split()
        if comment[2:3] == [suite]:
            if _docker("image", "rm", ref, check=False).returncode == 0:
                _log(f"removed stale image {ref}")


def _import(root: Path, tag: str, recipe: ImageRecipe) -> None:
    argv = ["docker", "import", "--message", _import_message(recipe)]
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
