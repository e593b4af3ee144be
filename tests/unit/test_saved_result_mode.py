"""A saved acceptance result is written by the shared writer (issue 40 item 2): its mode set on the open file,
never by a chmod of the temporary name, which a link swapped in there would lead to another file (as root: any)."""
from __future__ import annotations

import os
import stat
from datetime import datetime, timezone

import pytest

from bringup.checks import line


@pytest.mark.reliability(item=40, fault="accept: a link swapped in under the saved result's temporary name before "
                                        "its mode is set", variants=1,
                         checks=("others' files kept", "no leftovers"))
def test_a_link_swapped_in_under_the_temporary_name_never_has_its_target_chmodded(tmp_path, monkeypatch):
    # Before: save() wrote the temporary file, closed it, then os.chmod(tmp, 0o644) by name: a link put there in
    # between made the file it leads to (here a 0600 secret) world-readable.
    from bringup.acceptance import saved

    secret = tmp_path / "secret"
    secret.write_text("token")
    secret.chmod(0o600)
    out = tmp_path / "accept"
    real_fdopen = os.fdopen

    class Swapping:
        """The temporary file, which on close is moved away and a link to the secret put under its name."""

        def __init__(self, f):
            self.f = f

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()
            tmp = next(p for p in out.iterdir() if p.name.startswith("."))
            tmp.rename(tmp_path / "moved")
            tmp.symlink_to(secret)
            return False

    monkeypatch.setattr(os, "fdopen", lambda fd, *a, **kw: Swapping(real_fdopen(fd, *a, **kw)))
    when = datetime(2026, 1, 1, tzinfo=timezone.utc)
    saved.save("h1", {"seconds": 1}, [line("acceptance", "x", "PASS", "seen", "")], out, when)
    monkeypatch.undo()
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600 and secret.read_text() == "token"
    assert stat.S_IMODE((tmp_path / "moved").stat().st_mode) == 0o644  # the mode went to the result's own file
