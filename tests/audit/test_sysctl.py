"""Role sysctl: every wanted key is live and persisted (or reported as impossible here)."""
from __future__ import annotations

from bringup.command import sh
from roles.sysctl import PERSIST_FILE, table


def _state(target):
    wanted = table(target.vars)
    snippets = {k: sh("p=/proc/sys/%s; if [ ! -f \"$p\" ]; then echo absent; elif [ -w \"$p\" ]; then "
                      "printf 'value='; cat \"$p\"; else echo readonly; fi", k.replace(".", "/"))
                for k in wanted}
    snippets["@file"] = sh("cat -- %s", PERSIST_FILE)
    return wanted, target.read_many(snippets)


def test_live_values(target):
    wanted, state = _state(target)
    wrong = []
    for key, (value, _src) in wanted.items():
        got = state[key] or ""
        if got.startswith("value=") and " ".join(got[6:].split()) != value:
            wrong.append(f"{key} is {' '.join(got[6:].split())}, want {value}")
    assert not wrong, f"{target.name}: " + "; ".join(wrong)


def test_persisted_file(target):
    wanted, state = _state(target)
    text = state["@file"] or ""
    assert text, f"{target.name}: {PERSIST_FILE} is missing"
    lines = {l.split("=", 1)[0].strip(): " ".join(l.split("=", 1)[1].split())
             for l in text.splitlines() if "=" in l and not l.startswith("#")}
    problems = []
    for key, (value, _src) in wanted.items():
        settable = (state[key] or "").startswith("value=")
        if settable and lines.get(key) != value:
            problems.append(f"{key} = {lines.get(key, '(absent)')}, want {value}")
        if not settable and key in lines:
            problems.append(f"{key} is persisted but this kernel cannot set it")
    assert not problems, f"{target.name}: {PERSIST_FILE}: " + "; ".join(problems)


def test_persisted_file_mode(target):
    f = target.host.file(PERSIST_FILE)
    assert f.exists and f.user == "root" and f.mode == 0o644, \
        f"{target.name}: {PERSIST_FILE} should be root-owned 0644"
