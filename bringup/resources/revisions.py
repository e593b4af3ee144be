"""The last good state of a mirrored tree (:class:`~bringup.resources.tree.Tree` with a manifest), kept and put back.

A tree mirrors a local folder onto the host; this keeps its revisions: a
snapshot of what it shipped once a revision is known good, a restore of that
snapshot when a later one fails, and the release of what the tree held aside
for the new one.  Each method returns a shell script; nothing runs here.
"""
from __future__ import annotations

import posixpath

from ..ssh.command import sh
from .files import _check_path
from .tree import PRUNE, check_outside, format_manifest, parse_manifest

__all__ = ["Revisions"]


class Revisions:
    """The revisions of the tree at ``path`` whose shipped files ``manifest`` records; ``holding`` is the
    folder where the tree sets aside what the new state replaces (None: it removes them).

        Revisions("/data/models", manifest="/opt/triton/models.manifest", holding="/opt/triton/held/<revision>")
    """

    def __init__(self, path: str, *, manifest: str, holding: str | None = None):
        _check_path(path)
        self.path = path.rstrip("/") or "/"
        check_outside(self.path, manifest, holding)
        self.manifest = manifest
        self.holding = holding.rstrip("/") if holding else None

    def snapshot(self, dest: str, also: tuple[str, ...] = ()) -> str:
        """Shell: the shipped files (hard links) in ``dest``/files, the manifest in ``dest``/manifest.

        Replaces an older snapshot at once (a rename); ``also`` are files copied
        in beside them, by name.
        """
        _check_path(dest)
        return "\n".join([
            "set -e",
            sh("s=%s; d=%s; m=%s", dest.rstrip("/"), self.path, self.manifest),
            'rm -rf -- "$s.new"; mkdir -p -- "$s.new/files"',
            *[sh('cp -p -- %s "$s.new/"', f) for f in also],
            'if [ -f "$m" ]; then cp -p -- "$m" "$s.new/manifest"',
            "  grep -v '^#' -- \"$m\" | cut -c67- | while IFS= read -r f; do",
            '    [ -n "$f" ] && [ -f "$d/$f" ] || continue',
            '    mkdir -p -- "$(dirname -- "$s.new/files/$f")"',
            '    ln -- "$d/$f" "$s.new/files/$f" 2>/dev/null || cp -p -- "$d/$f" "$s.new/files/$f"',
            "  done",
            "else : > \"$s.new/manifest\"; fi",
            'rm -rf -- "$s"; mv -- "$s.new" "$s"',
        ])

    def restore(self, files: str, last_good: str, current: str, record: dict[str, str] | None = None) -> str:
        """Shell: put the good tree back (its files under ``files``, manifest text ``last_good``).

        Files the ``current`` manifest lists and the good one does not are
        removed when still as shipped; held files go back where nothing took
        their place; the good files are put back where they differ; the
        manifest becomes the good one (or ``record``).  Nothing else under
        ``path`` is touched.
        """
        good, now = parse_manifest(last_good), parse_manifest(current)
        steps = ["set -e", sh("s=%s; d=%s; m=%s; h=%s", files.rstrip("/"), self.path, self.manifest,
                              self.holding or ""),
                 PRUNE,
                 'sha() { sha256sum < "$1" | cut -c1-64; }',
                 # Shipped by the failed state only, and still as shipped: removed.
                 'gone() { if [ -f "$d/$1" ] && [ ! -L "$d/$1" ] && [ "$(sha "$d/$1")" = "$2" ]; then '
                 'rm -f -- "$d/$1"; fi; }',
                 # A good file, back where it differs (by rename: the snapshot's hard link stays intact).
                 'put() { if [ -f "$d/$1" ] && [ ! -L "$d/$1" ] && [ "$(sha "$d/$1")" = "$2" ]; then return 0; fi',
                 '  [ -f "$s/$1" ] || { echo "missing from the snapshot: $1" >&2; return 1; }',
                 '  mkdir -p -- "$(dirname -- "$d/$1")"; t="$(dirname -- "$d/$1")/.bringup.restore.$$"',
                 '  ln -- "$s/$1" "$t" 2>/dev/null || cp -p -- "$s/$1" "$t"; mv -f -- "$t" "$d/$1"; }']
        gone = sorted(rel for rel in now if rel not in good)
        steps += [sh("gone %s %s", rel, now[rel]) for rel in gone]
        if self.holding:
            steps += [
                'if [ -d "$h" ]; then (cd -- "$h" && find . -type f) | sed \'s|^\\./||\' > "$h.list"',
                '  while IFS= read -r f; do',
                '    if [ ! -e "$d/$f" ] && [ ! -L "$d/$f" ]; then mkdir -p -- "$(dirname -- "$d/$f")"; '
                'mv -f -- "$h/$f" "$d/$f"',
                '    elif cmp -s -- "$h/$f" "$d/$f"; then rm -f -- "$h/$f"; fi',
                '  done < "$h.list"; rm -f -- "$h.list"',
                '  find "$h" -depth -type d -empty -delete 2>/dev/null || true; fi',
            ]
        steps += [sh("put %s %s", rel, sha) for rel, sha in sorted(good.items())]
        if self.holding:
            # What was held and is the good file again: no longer needed.
            steps.append('if [ -d "$h" ]; then (cd -- "$h" && find . -type f) | sed \'s|^\\./||\' | '
                         'while IFS= read -r f; do if cmp -s -- "$h/$f" "$d/$f"; then rm -f -- "$h/$f"; fi; done; '
                         'find "$h" -depth -type d -empty -delete 2>/dev/null || true; fi')
        dirs = sorted({posixpath.dirname(r) for r in gone if posixpath.dirname(r)}, key=lambda x: -x.count("/"))
        steps += [sh("prune %s", x) for x in dirs]
        steps += [sh('printf %%s %s > "$m.tmp"', format_manifest(good if record is None else record, self.path)),
                  'mv -f -- "$m.tmp" "$m"']
        return "\n".join(steps)

    def release(self) -> str:
        """Shell: the new state is good; delete what was held for it."""
        return sh("rm -rf -- %s", self.holding) if self.holding else "true"
