"""Triton after a change: the models reloaded in place (:data:`HANDLERS`), the readiness gate (:func:`verify`
after a run, :func:`health` between a rolling run's hosts), and the way back to the last ready revision
(:func:`rollback`)."""
from __future__ import annotations

import re

from bringup.ssh.command import sh
from bringup.errors import BringupError, said
from bringup.resources.compose import REVISION_LABEL, label_format
from bringup.resources.tree import parse_manifest

from .configs import RELOAD
from .desired import Desired, gate


def HANDLERS(host) -> dict[str, list[str]]:
    """A changed config.pbtxt is loaded in place by Triton's model control API (explicit mode; a load
    without an override re-reads the repository): the old model serves until the new one is ready."""
    if not (host.vars.get("triton_models") or host.vars.get("models_dir")):
        return {}
    base = f"http://127.0.0.1:{int(host.vars['triton_ports']['http'])}"
    lines = [sh("base=%s; deadline=$(( $(date +%%s) + %s ))", base, int(host.vars["triton_ready_timeout"])),
             # A container that is (re)starting loads the new files itself; verify judges its readiness.
             'until curl -sf -m 5 -o /dev/null "$base/v2/health/ready"; do '
             '[ "$(date +%s)" -lt "$deadline" ] || exit 0; sleep 1; done']
    for m in sorted(host.vars.get("triton_models") or {}):
        lines.append(sh('out=$(curl -sS -m 300 -X POST -d "{}" "$base/v2/repository/models/"%s/load 2>&1) '
                        '&& ! printf %%s "$out" | grep -q \'"error"\' || { echo "reload of "%s" failed: $out" >&2; '
                        'exit 1; }', m, m))
    return {RELOAD: ["\n".join(lines)]}


def _wait_script(port: int, container: str, revision: str | None, models: list[str], timeout: int) -> str:
    """Poll Triton on the host until ready, a model fails to load, or ``timeout`` s pass; print key=value."""
    base = f"http://127.0.0.1:{port}"
    lines = [
        sh("c=%s; base=%s; want=%s; deadline=$(( $(date +%%s) + %s ))", container, base, revision or "", timeout),
        sh('got=$(docker inspect --format %s -- "$c" 2>/dev/null)', label_format(REVISION_LABEL)),
        'if [ -n "$want" ] && [ "$got" != "$want" ]; then echo "fail=container $c runs revision ${got:-none}, '
        'not $want"; else',
        '  while :; do',
        '    st=$(docker inspect --format "{{.State.Status}}" -- "$c" 2>/dev/null)',
        # Not started (compose failed half-way), stopped, or gone: no use waiting for it.
        '    case "$st" in created|exited|dead|"") echo "fail=container $c is ${st:-gone}'
        ' (exit code $(docker inspect --format "{{.State.ExitCode}}" -- "$c" 2>/dev/null))'
        ' $(docker inspect --format "{{.State.Error}}" -- "$c" 2>/dev/null | head -c 400)"; break;; esac',
        '    idx=$(curl -s -m 5 -X POST -d "{}" "$base/v2/repository/index" 2>/dev/null)',
        '    if printf %s "$idx" | grep -q \'"state":"UNAVAILABLE"\'; then '
        'echo "fail=a model failed to load: $(printf %s "$idx" | head -c 600)"; break; fi',
        '    if curl -sf -m 5 -o /dev/null "$base/v2/health/ready"; then echo ready=server; break; fi',
        '    if [ "$(date +%s)" -ge "$deadline" ]; then echo "fail=not ready after ' + str(timeout) +
        ' s (container $st)"; break; fi',
        '    sleep 1',
        '  done',
        'fi',
    ]
    for m in models:
        lines.append(sh('if curl -sf -m 5 -o /dev/null "$base/v2/models/"%s/ready; then echo ready=%s; '
                        'else echo notready=%s; fi', m, m, m))
    return "\n".join(lines)


def _triton_errors(t, container: str) -> str:
    """Triton's own error lines (E... from its log), or its last lines."""
    out = t.run_script(sh("docker logs --tail 400 -- %s 2>&1", container)).stdout
    lines = [l.strip() for l in out.splitlines() if l.strip()]
    errors = [l for l in lines if re.match(r"^E\d{4} ", l)] or lines[-3:]
    return " | ".join(errors[-4:])[:1500] or "(no log)"


def _parse_wait(out: str, models: list[str]) -> str | None:
    fail = next((l[5:] for l in out.splitlines() if l.startswith("fail=")), None)
    notready = [l[9:] for l in out.splitlines() if l.startswith("notready=")]
    if fail:
        return fail
    if "ready=server" not in out:
        return f"the readiness check stopped early: {said(out, 300)}"
    if notready:
        return f"model(s) not ready: {', '.join(notready)}"
    return None


def verify(host, t) -> str:
    d = Desired(host)
    port = int(d.vars["triton_ports"]["http"])
    res = t.run_script(_wait_script(port, d.container, d.revision, d.models, int(d.vars["triton_ready_timeout"])))
    problem = _parse_wait(res.stdout, d.models)
    if problem:
        raise BringupError(f"Triton revision {d.revision} is not ready: {problem}; "
                           f"Triton says: {_triton_errors(t, d.container)}")
    # This revision serves: it is what a later failed deploy falls back to (the files bringup shipped, as
    # hard links: the repository's files are replaced by rename, never in place), and what it no longer
    # ships, held until now, can go.
    keeper = d.revisions()
    snap = t.run_script(keeper.snapshot(d.snapshot, also=(d.compose_file,)) + "\n" + keeper.release())
    if snap.rc != 0:
        raise BringupError(f"revision {d.revision} is ready but saving it as last-good failed: "
                           f"{said(snap.stdout + snap.stderr, 300)}")
    return f"revision {d.revision} ready: server and {len(d.models)} model(s) ({', '.join(d.models) or 'none'})"


def health(host, t) -> str | None:
    """A rolling run's gate after each host (``provision --serial``, drain hooks): the server and every
    model ready, on the host itself (verify's readiness wait, bounded by ``rollout_health_timeout``), the
    container at the revision this run wants.  None when the host serves nothing."""
    if gate(host):
        return None  # nothing to serve (or no GPU: then the run itself failed)
    d = Desired(host)
    timeout = int(d.vars["rollout_health_timeout"])
    res = t.run_script(_wait_script(int(d.vars["triton_ports"]["http"]), d.container, d.revision, d.models, timeout))
    problem = _parse_wait(res.stdout, d.models)
    if problem:
        raise BringupError(f"Triton is not serving (waited up to {timeout} s, rollout_health_timeout): {problem}")
    return f"Triton ready at revision {d.revision}, model(s) ready: {', '.join(d.models) or 'none'}"


def rollback(host, t) -> str:
    """Back to the last ready revision: the files bringup shipped then, its compose file, its container.

    Files bringup did not ship are left alone; what the failed run shipped
    goes, what it held comes back.  Whatever stage compose (v1 or v2) stopped
    at, the project's containers are sorted out first: one still running the
    old revision is kept under its own name, the others are removed.
    """
    d = Desired(host)
    s = d.snapshot
    have = t.run_script("\n".join([
        sh("s=%s; m=%s", s, d.manifest),
        '[ -f "$s/docker-compose.yml" ] || exit 0',
        "sed -n 's/^# Revision \\([0-9a-f]*\\):.*/rev=\\1/p' -- \"$s/docker-compose.yml\"",
        'if [ -f "$s/manifest" ]; then echo format=manifest; sed "s/^/g=/" -- "$s/manifest"',
        'elif [ -d "$s/models" ]; then echo format=copy; '
        '(cd -- "$s/models" && find . -type f -exec sha256sum -- {} +) | sed "s/^/g=/"; fi',
        '[ ! -f "$m" ] || sed "s/^/c=/" -- "$m"',
    ]))
    lines = have.stdout.splitlines()
    fmt = next((l[7:] for l in lines if l.startswith("format=")), None)
    if fmt is None:
        return "nothing: no earlier revision was ever ready on this host (first deploy)"
    old = next((l[4:] for l in lines if l.startswith("rev=")), "")
    good = "\n".join(l[2:] for l in lines if l.startswith("g="))
    current = "\n".join(l[2:] for l in lines if l.startswith("c="))
    record = None
    if fmt == "copy":
        # A snapshot of an earlier bringup: a copy of the whole folder, hand-placed files included.  All come
        # back, but only what the manifest says bringup shipped is recorded as its own (never removed later).
        now = parse_manifest(current)
        record = {rel: sha for rel, sha in parse_manifest(good).items() if rel in now}
    keeper = d.revisions()
    files = f"{s}/files" if fmt == "manifest" else f"{s}/models"
    res = t.run_script("\n".join([
        "set -e",
        "(", keeper.restore(files, good, current, record), ")",
        sh("cp -p -- %s %s", f"{s}/docker-compose.yml", d.compose_file),
        "(", d.compose_up().restore(old or None), ")",
    ]))
    if res.rc != 0:
        raise BringupError(f"restoring the last good revision failed: {said(res.stdout + res.stderr, 400)}")
    models = sorted({rel.split("/", 1)[0] for rel in parse_manifest(good) if "/" in rel})
    port = int(d.vars["triton_ports"]["http"])
    res = t.run_script(_wait_script(port, d.container, old or None, models, int(d.vars["triton_ready_timeout"])))
    problem = _parse_wait(res.stdout, models)
    if problem:
        raise BringupError(f"restored revision {old or '?'} but it is not ready either: {problem}")
    return f"revision {old or '?'} restored and ready ({', '.join(models) or 'no models'})"
