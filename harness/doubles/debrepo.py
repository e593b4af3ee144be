"""A local apt repository of test-double packages, built with dpkg-deb.

The packages are test doubles: real .deb files with made-up contents, so apt
and dpkg do their real work (resolve, pin, install, hold) with no network.
"""
from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path


def build_deb(out: Path, name: str, version: str, *, description: str = "bringup test double") -> Path:
    """Build ``name_version_all.deb`` holding one README that says it is a test double."""
    root = out / f"build-{name}-{version}"
    (root / "DEBIAN").mkdir(parents=True)
    doc = root / "usr" / "share" / "doc" / name
    doc.mkdir(parents=True)
    (doc / "README").write_text(f"{name} {version}: TEST DOUBLE built by bringup's test suite.\n")
    (root / "DEBIAN" / "control").write_text(
        f"Package: {name}\nVersion: {version}\nArchitecture: all\nMaintainer: bringup tests <tests@invalid>\n"
        f"Description: {description}\n TEST DOUBLE: not the real package.\n")
    deb = out / f"{name}_{version}_all.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(deb)],
                   check=True, capture_output=True)
    return deb


def write_index(repo: Path) -> None:
    """Write a flat repository's ``Packages`` index (what dpkg-scanpackages would)."""
    stanzas = []
    for deb in sorted(repo.glob("*.deb")):
        control = subprocess.run(["dpkg-deb", "-f", str(deb)], check=True, capture_output=True, text=True).stdout
        data = deb.read_bytes()
        stanzas.append(control.rstrip("\n") + f"\nFilename: ./{deb.name}\nSize: {len(data)}\n"
                       f"SHA256: {hashlib.sha256(data).hexdigest()}\n")
    (repo / "Packages").write_text("\n".join(stanzas))
