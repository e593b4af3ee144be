"""The audit's parts: Expect items and their judges, findings as one line, items, exit codes, JUnit.

The roles' audit hooks are run here on a host's facts (only the ones each role
declares) and their judges on outputs captured from real services.
"""
import socket
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from bringup.checklist.audit import AuditedRole, Item, junit_xml, exit_code, items, summary_line
from bringup.engine.auditkit import Expect, finding, http_ok, listening, tcp_listening
from bringup.facts import ALL_FACTS
from bringup.inventory.hosts import ConnectionVars, Host
from bringup.project import content_root
from bringup.resources import Directory, File, Sysctl
from bringup.resources.guard import Unused
from bringup.engine.roles import FactView, HostContext, load_roles
from bringup.engine.results import HostResult, ResourceResult, jsonable
from bringup.engine.runner import prepare
from bringup.engine.templates import Templates

from .fixture_hosts import h200_facts

ORDER, ROLES = load_roles(content_root())
EVERY = [ROLES[r] for r in ORDER]
RENDER = Templates(content_root() / "templates").render
MODEL = {"add": {"platform": "python", "max_batch_size": 8,
                 "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [4]}],
                 "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [4]}]}}


def test_listening_sees_a_real_listener_and_not_a_connection():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    port = srv.getsockname()[1]
    cli = socket.create_connection(("127.0.0.1", port))
    try:
        text = Path("/proc/net/tcp").read_text() + Path("/proc/net/tcp6").read_text()
        ports = listening(text)
        assert port in ports
        assert cli.getsockname()[1] not in ports  # the client's end is ESTABLISHED, not LISTEN
        both = tcp_listening("triton", {"http": port, "grpc": cli.getsockname()[1]})
        assert both.plan(text).changes["triton listening"][0] == \
            f"triton: nothing listens on TCP port(s) grpc {cli.getsockname()[1]}"
        assert not tcp_listening("x", port).plan(text).changed
    finally:
        cli.close()
        srv.close()
    assert listening(None) == set()


def test_an_expect_passes_with_a_reason_and_fails_with_its_line_never_applied_in_check_mode():
    e = Expect("unit x", "systemctl is-active -- x", lambda out: None if out.strip() == "active"
               else f"unit x is {out.strip()}, want active")
    ok = e.plan("active\n")
    assert not ok.changed and ok.reason == "as promised: unit x"
    bad = e.plan("inactive\n")
    assert bad.changed and bad.changes == {"unit x": ("unit x is inactive, want active", "as the role promises")}
    assert finding(e.id, jsonable(bad.changes)) == "unit x is inactive, want active"
    assert http_ok("triton ready", "http://127.0.0.1:8000/v2/health/ready").plan("000").changes[
        "triton ready"][0] == "triton ready answers 000, want 200"


def test_findings_read_what_is_and_what_is_wanted():
    s = Sysctl("net.ipv4.tcp_slow_start_after_idle", 0)
    p = s.plan("value=1\n")
    assert finding(s.id, jsonable(p.changes)) == "net.ipv4.tcp_slow_start_after_idle is 1, want 0"
    f = File("/etc/x.conf", content="a = 1\nb = 2\n")
    have = "a = 1\nc = 3\n"
    import base64
    import hashlib
    cur = (f"type=file\nmode=644\nowner=root\ngroup=root\nsize={len(have)}\n"
           f"sha256={hashlib.sha256(have.encode()).hexdigest()}\ncontent={base64.b64encode(have.encode()).decode()}\n")
    p = f.plan(cur)
    assert finding(f.id, jsonable(p.changes), p.diff) == \
        "/etc/x.conf lacks b = 2; has c = 3, which the role does not write"
    p = f.plan("type=absent\n")
    assert finding(f.id, jsonable(p.changes), p.diff) == "/etc/x.conf is missing"
    same = File("/etc/x.conf", content=have, mode="0644")
    p = same.plan(cur.replace("mode=644", "mode=600"))
    assert finding(same.id, jsonable(p.changes), p.diff) == "file:/etc/x.conf: mode is 600, want 644"
    d = Directory("/opt/m")
    p = d.plan("type=absent\n")
    assert finding(d.id, jsonable(p.changes)) == "/opt/m is missing"
    assert finding("handler:reload", {}, reason="check mode: would run") == "handler:reload: check mode: would run"


def _result(*resources, status="ok", message=None) -> HostResult:
    return HostResult("h1", status=status, message=message, resources=list(resources))


def test_items_outcomes_exit_codes_and_the_summary_line():
    r = _result(ResourceResult("sysctl", "sysctl:a.b", "ok", reason="a.b is already 1"),
                ResourceResult("sysctl", "sysctl:c.d", "changed", changes={"c.d": ["0", "1"]}),
                ResourceResult("sysctl", "sysctl:e.f", "skipped", reason="read-only here"),
                ResourceResult("irq", "irq:5", "skipped"),
                ResourceResult("docker", "service:docker", "failed", error="systemd is not running"))
    found = items(r)
    assert [i.outcome for i in found] == ["passed", "failed", "skipped", "failed", "failed"]
    assert [i.message for i in found if i.outcome == "failed"] == [
        "c.d is 0, want 1", "irq:5: skipped without a reason", "service:docker: systemd is not running"]
    assert summary_line("h1", found) == "h1 : passed=1 failed=3 skipped=1 unreachable=0"
    assert exit_code(found) == 2
    assert exit_code(found[:1] + found[2:3]) == 0
    gone = items(_result(status="unreachable", message="ssh to 10.0.0.9:22 failed: timed out"))
    assert [(i.outcome, i.message) for i in gone] == [("unreachable", "unreachable: ssh to 10.0.0.9:22 failed: "
                                                                      "timed out")]
    assert exit_code(found + gone) == 4


@pytest.mark.reliability(item=40, fault="audit recap: a host a signal (Ctrl-C) cut short counted as failed=1 and a JUnit "
                         "failure, as if a check had failed", variants=1, checks=("recap and report",))
def test_a_host_a_signal_cut_short_is_skipped_not_failed():
    cut = items(_result(ResourceResult("sysctl", "sysctl:a.b", "ok", reason="a.b is already 1"), status="interrupted",
                        message="stopped by SIGINT before sysctl:c.d"))
    assert [(i.item, i.outcome, i.message) for i in cut] == [
        ("sysctl:a.b", "passed", "a.b is already 1"),
        ("interrupted", "skipped", "interrupted: stopped by SIGINT before sysctl:c.d")]
    assert summary_line("h1", cut) == "h1 : passed=1 failed=0 skipped=1 unreachable=0"
    suite = junit_xml({"h1": cut}).getroot().find("testsuite")
    assert suite.get("failures") == "0" and suite.find("testcase[@name='interrupted']/skipped") is not None


def test_junit_has_a_suite_per_host_and_a_case_per_item():
    found = [Item("h1", "sysctl", "sysctl:a", "passed"), Item("h1", "sysctl", "sysctl:b", "failed", "b is 0, want 1"),
             Item("h1", "irq", "irq:5", "skipped", "managed")]
    tree = junit_xml({"h1": found, "h2": [Item("h2", "", "unreachable", "unreachable", "unreachable: refused")]})
    suites = tree.getroot().findall("testsuite")
    assert [(s.get("name"), s.get("tests"), s.get("failures"), s.get("skipped"), s.get("errors")) for s in suites] == [
        ("h1", "3", "1", "1", "0"), ("h2", "1", "0", "0", "1")]
    assert suites[0].find("testcase[@name='sysctl:b']/failure").get("message") == "h1: b is 0, want 1"
    ET.fromstring(ET.tostring(tree.getroot()))  # well-formed


@pytest.mark.reliability(item=40, fault="audit JUnit: a ProxyCommand's (or a host's) ESC, NUL or U+FFFE in a message "
                                        "was written raw: XML no reader parses, and an escape sequence for whoever "
                                        "cats it", variants=4, checks=("data shown as data", "report written"))
def test_junit_writes_control_characters_out_and_stays_well_formed():
    said = "failed: \x1b[31mRED\x1b]0;title\x07 \x00 \ufffe \u202e done"
    tree = junit_xml({"h1": [Item("h1", "", "unreachable", "unreachable", said)],
                      "h2": [Item("h2", "r\x1b", "x\x00", "failed", "ok")]})
    text = ET.tostring(tree.getroot(), encoding="utf-8", xml_declaration=True)
    root = ET.fromstring(text)  # well-formed
    message = root.find("testsuite/testcase/error").get("message")
    assert message == "h1: failed: \\x1b[31mRED\\x1b]0;title\\x07 \\x00 \\ufffe \\u202e done", message
    assert not any(c in text.decode() for c in "\x1b\x00\x07\ufffe\u202e")


def test_an_audited_role_adds_its_hook_items_to_its_resources():
    import types
    plain = AuditedRole("x", types.SimpleNamespace(resources=lambda ctx: ["r"]))
    hooked = AuditedRole("y", types.SimpleNamespace(resources=lambda ctx: ["r"], audit=lambda ctx: ["e"]))
    assert plain.resources(None) == ["r"] and hooked.resources(None) == ["r", "e"]


def _ctx(name: str, **vars) -> HostContext:
    role = ROLES[name]
    facts = {f.name: f.default for f in ALL_FACTS} | h200_facts() | {
        "os.release": {"id": "debian", "version_id": "12", "id_like": ""},
        "system.systemd": {"booted": True, "pid1": "systemd"}}
    v = prepare([Host("h", ["all"], {"gpu_profile": "l40s", "inventory_hostname": "h", **vars},
                      ConnectionVars())], [role], EVERY)["h"]
    return HostContext("h", v, FactView(facts, role.facts, role.name), RENDER)


@pytest.mark.parametrize("name", [n for n in ORDER if hasattr(ROLES[n].module, "audit")])
def test_a_role_audit_hook_reads_only_declared_facts_and_gives_readable_items(name):
    extra = {"triton_models": MODEL} if name == "triton" else {}
    got = ROLES[name].module.audit(_ctx(name, **extra))
    assert got, f"{name}: no audit items on a host the role deploys to"
    for item in got:
        assert item.kind in (Expect.kind, Unused.kind) and item.read()


def _judge(items_, name):
    return next(i for i in items_ if i.name == name).judge


def test_dcgm_exporter_promises_every_counter_and_nothing_where_it_skips():
    dcgm = ROLES["dcgm_exporter"].module
    got = dcgm.audit(_ctx("dcgm_exporter"))
    body = "".join(f"# TYPE {n} {t}\n{n}{{gpu=\"0\"}} 1\n" for n, t, _ in dcgm.counters(dcgm.DEFAULTS))
    metrics = _judge(got, "http://127.0.0.1:9400/metrics counters")
    assert metrics(body) is None
    assert metrics(body.replace("# TYPE DCGM_FI_DEV_FB_USED gauge\n", "")) == \
        "http://127.0.0.1:9400/metrics lacks counter(s) DCGM_FI_DEV_FB_USED"
    assert metrics("") == "http://127.0.0.1:9400/metrics carries no DCGM_FI_DEV_GPU_UTIL sample"
    assert _judge(got, "unit dcgm-exporter")("inactive\n") == "unit dcgm-exporter is inactive, want active"
    skipped = dcgm.audit(_ctx_without_gpu())
    assert _judge(skipped, f"no {dcgm.UNIT}")("present\n").startswith(f"{dcgm.UNIT} exists but the role skips this host")
    assert _judge(skipped, f"no container {dcgm.NAME}")("absent\n") is None


def _ctx_without_gpu() -> HostContext:
    ctx = _ctx("dcgm_exporter", gpu_profile="cpu")
    facts = dict(ctx.facts) | {"pci.devices": [], "nvidia.smi": []}
    return HostContext("h", ctx.vars, FactView(facts, ROLES["dcgm_exporter"].facts, "dcgm_exporter"), RENDER)


def test_triton_promises_its_container_and_every_model():
    got = ROLES["triton"].module.audit(_ctx("triton", gpu_profile="cpu",
                                            triton_models=MODEL))
    models = _judge(got, "triton models ready")
    assert models("add 200\n") is None
    assert models("add 000\n") == "triton model(s) not ready: add (000), want 200 from each"
    container = _judge(got, "container triton")
    assert container("exited abc triton\n") == "container triton is exited abc triton, want running"
    assert container("running abc other\n") == "container triton is of compose project other, want triton"
    assert "runs revision abc, want" in container("running abc triton\n")


def test_monitoring_promises_loaded_rules_or_says_it_audits_files_only():
    import json
    mon = ROLES["monitoring"].module
    files_only = mon.audit(_ctx("monitoring"))
    assert [(i.kind, i.reason) for i in files_only] == [
        ("unused", "monitoring_stack is false: the role writes files only, so only the files are audited, "
                   "not Prometheus' loaded rules")]
    ctx = _ctx("monitoring", monitoring_stack=True)
    wanted, _ = mon.files(ctx)
    expected = mon.rule_names(next(t for p, t in wanted.items() if p.endswith(".rules.yml")))
    assert expected and all(expected.values())
    judge = mon.audit(ctx)[0].judge
    groups = [{"name": g, "rules": [{"name": n} for n in names]} for g, names in expected.items()]
    assert judge(json.dumps({"data": {"groups": groups}})) is None
    g0, first = next(iter(expected)), expected[next(iter(expected))][0]
    groups[0]["rules"] = groups[0]["rules"][1:]
    assert f"Prometheus has not loaded rule(s) {g0}/{first}" in judge(json.dumps({"data": {"groups": groups}}))
    assert judge("curl: (7) Failed to connect").startswith("Prometheus http://127.0.0.1:9090/api/v1/rules answers curl")


def test_cpu_tuning_promises_the_pm_qos_cap():
    judge = ROLES["cpu_tuning"].module.audit(_ctx("cpu_tuning"))[0].judge
    assert judge("          10\n") is None and judge("absent\n") is None
    assert judge("  2000000000\n") == ("/dev/cpu_dma_latency is 2000000000, want at most 10 us "
                                       "(bringup-cpu-dma-latency.service holds it)")
    assert ROLES["cpu_tuning"].module.audit(_ctx("cpu_tuning", cpu_dma_latency_us=None)) == []


def test_a_finding_that_follows_from_another_is_not_judged():
    """One cause, one finding: ports after their container, the server after its ports."""
    from bringup.engine.auditkit import Expect, http_ok, tcp_listening

    up = Expect("container triton", "x", lambda out: None if out == "running" else f"container triton is {out}")
    ports = tcp_listening("triton", {"http": 8000}, needs=up)
    ready = http_ok("triton ready", "http://127.0.0.1:8000/v2/health/ready", needs=ports)
    # Stopped: one failing step, the rest skipped naming the cause.
    assert up.plan("exited").commands
    assert ports.plan("").reason == "not checked: container triton is exited" and not ports.plan("").commands
    assert ready.plan("000").reason == "not checked: container triton is exited"
    # Running but its port closed: the port is the finding, the server follows from it.
    assert not up.plan("running").commands
    assert ports.plan("").changes == {"triton listening": ("triton: nothing listens on TCP port(s) http 8000",
                                                            "as the role promises")}
    assert ready.plan("000").reason == "not checked: triton: nothing listens on TCP port(s) http 8000"
