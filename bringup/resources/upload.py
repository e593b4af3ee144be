"""A file of the control machine on the host, streamed over the connection when its sha256 differs.

For files too big to travel inside a script (an ONNX model of hundreds of MB):
``File`` embeds its content in the write script, this streams it (``cat``
here into the host's stdin), like ``docker save`` into ``docker load``.
"""
from __future__ import annotations

import hashlib
import os
import posixpath
import stat
from pathlib import Path

from ..ssh.command import sh
from ..errors import InputError
from .base import Plan, Resource, Upload, kv_lines
from .files import _check_mode, _check_path

__all__ = ["UploadedFile", "file_sha256"]


def file_sha256(path: Path) -> str:
    """The sha256 of a local file, read in chunks (models are large).  Only a regular file is read: a pipe, a
    socket or a device named in its place (a FIFO would wait for a writer forever, /dev/zero never end) is one
    line of bad input, opened without waiting."""
    h = hashlib.sha256()  # not hashlib.file_digest: bringup runs on Python 3.10 too
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise InputError(f"{path}: cannot read it on the control machine: {e.strerror or e}") from None
    with os.fdopen(fd, "rb"):
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError(f"{path}: not a regular file (a folder, a pipe, a socket or a device); give a file to "
                             "send")
        while True:  # left O_NONBLOCK (as userfile.read_regular reads): a file on a disk reads as it would blocking
            try:
                chunk = os.read(fd, 1 << 20)
            except BlockingIOError:  # a kernel file that calls itself regular (/proc/kmsg): its read waits for ever
                raise InputError(f"{path}: it waits for data (a kernel file such as /proc/kmsg), no file to send; "
                                 "give a file to send") from None
            except OSError as e:
                raise InputError(f"{path}: cannot read it on the control machine: {e.strerror or e}") from None
            if not chunk:
                break
            h.update(chunk)
    return h.hexdigest()


class UploadedFile(Resource):
    """``path`` on the host holds the bytes of ``source`` on the control machine.

        UploadedFile("/opt/trt-engines/resnet50/model.onnx", Path("models/resnet50.onnx"))

    Written atomically: streamed into a temporary file beside ``path``, its
    sha256 checked against the one planned (a file that changed while it was
    sent is refused), then renamed.  ``sha256`` may be given when the caller
    already hashed ``source``.
    """

    kind = "upload"

    def __init__(self, path: str, source: Path, *, mode: str = "0644", sha256: str | None = None, notify=()):
        super().__init__(path, notify=notify)
        _check_path(path)
        self.path, self.source, self.mode = path, Path(source), _check_mode(mode, path)
        if not self.source.is_file():
            raise InputError(f"{self.source}: no such file on the control machine (to be sent to {path})")
        self.sha256 = sha256 or file_sha256(self.source)

    def read(self) -> str:
        return sh("p=%s\n"
                  "if [ -L \"$p\" ]; then echo type=link\n"
                  "elif [ -f \"$p\" ]; then printf 'sha256='; sha256sum < \"$p\" | cut -c1-64\n"
                  "elif [ -e \"$p\" ]; then echo type=other\n"
                  "else echo type=absent; fi", self.path)

    def plan(self, current: str) -> Plan:
        st = kv_lines(current)
        if st.get("type") in ("link", "other"):
            return Plan.fail(f"{self.path} exists and is not a regular file ({st['type']}); move it away first")
        have = st.get("sha256", "").strip() or None
        if have == self.sha256:
            return Plan.noop(f"{self.path} has the sha256 of {self.source} ({self.sha256[:12]})")
        d, base = posixpath.dirname(self.path) or "/", posixpath.basename(self.path)
        receive = "\n".join([
            "set -e",
            sh("p=%s; d=%s; want=%s", self.path, d, self.sha256),
            'mkdir -p -- "$d"',
            sh('tmp=$(mktemp -- "$d"/.%s.bringup.XXXXXX)', base),
            "trap 'rm -f -- \"$tmp\"' EXIT",
            'cat > "$tmp"',
            'got=$(sha256sum < "$tmp" | cut -c1-64)',
            sh('[ "$got" = "$want" ] || { echo "received sha256 $got, not $want: %s changed while it was sent"; '
               'exit 1; }', str(self.source)),
            sh('chmod %s -- "$tmp"', self.mode),
            'mv -f -- "$tmp" "$p"',
            "trap - EXIT",
        ])
        return Plan(changes={"content": (have[:12] if have else "absent", f"{self.sha256[:12]} sent from "
                                         f"{self.source}")},
                    upload=Upload(["cat", "--", str(self.source)], receive, what=f"cat {self.source}"))
