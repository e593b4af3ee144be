"""Issue 40 item 6: absurd numbers from hosts and saved files outside acceptance: Xid counts from the kernel
log, Triton's statistics counters, a saved bench result (NaN, negative, dated in the future, nested without
end), drift's earlier textfile.  Each is refused as unreadable ("not checked"), never PASS, never a traceback."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from bringup.checklist.pages import latency_checks
from bringup.errors import BringupError
from bringup.facts.base import UntrustedOutput
from bringup.facts.kernel import MAX_EVENTS, parse_kernel_xid
from bringup.latency.results import KIND, latest
from bringup.latency.tritonstats import read_stats

XID_LOG = ("source dmesg\nfirst [    0.000000] Linux version 6.8.0\n"
           "xid [ 5.1] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\ncount 1\nexit 0\n")


def test_a_real_xid_log_still_reads():
    got = parse_kernel_xid(XID_LOG)
    assert got["count"] == 1 and got["events"][0]["xid"] == 79


@pytest.mark.reliability(item=40, fault="Xid count or number: 10^100000, negative, NaN, not a digit", variants=6,
                         checks=("one clear line",))
@pytest.mark.parametrize("old,new", [("count 1", "count " + "9" * 100_000), ("count 1", "count -3"),
                                     ("count 1", "count nan"), ("count 1", "count ²"),
                                     ("): 79,", "): " + "7" * 5000 + ","), ("exit 0", "exit 99999999999")])
def test_an_absurd_xid_count_is_unreadable_not_a_count(old, new):
    with pytest.raises(UntrustedOutput) as e:
        parse_kernel_xid(XID_LOG.replace(old, new))
    assert str(e.value).startswith("kernel log: ") and len(str(e.value)) < 200


TOPO_8XA100 = Path(__file__).resolve().parents[1] / "fixtures/hosts/public/topo-8xa100sxm-10nic-8numa.txt"


@pytest.mark.reliability(item=40, fault="nvidia-smi topo -m: a GPU index or an NVLink count of thousands of digits "
                         "(Python's 'Exceeds the limit (4300 digits)' error; accept's NVLink count of a pair the same)",
                         variants=4, checks=("one clear line",))
def test_a_topo_index_or_nvlink_count_of_thousands_of_digits_is_one_line():
    from bringup.acceptance.judge import _nv_links
    from bringup.facts.nvidia_topo import parse_topo_matrix

    text = "".join(l for l in TOPO_8XA100.read_text().splitlines(keepends=True) if not l.startswith("#"))
    assert parse_topo_matrix(text)["matrix"]["GPU0"]["GPU1"] == "NV12"
    wide = "GPU" + "7" * 5000
    for damaged, said in ((text.replace("\tGPU7\t", f"\t{wide}\t", 1).replace("\nGPU7\t", f"\n{wide}\t", 1),
                           "nvidia-smi topo -m: row GPU77777777777777777...: no GPU index"),
                          (text.replace("NV12", "NV" + "1" * 5000, 1),
                           "nvidia-smi topo -m: row GPU0: link cell NV111111111111111111... is no NVLink count")):
        with pytest.raises(UntrustedOutput) as e:
            parse_topo_matrix(damaged)
        assert str(e.value) == said
    # A saved facts file's cell, read by accept's judge of a GPU pair: no NVLink count, never a traceback.
    for cell in ("NV" + "1" * 5000, "NV²"):
        assert _nv_links({"matrix": {"GPU0": {"GPU1": cell}}}, 0, 1) == 0


XID_LINE = "xid [ 5.1] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n"


@pytest.mark.reliability(item=40, fault="Xid count at odds with the Xid lines listed (count 5, none listed; count 0, "
                         "one listed; 201 listed)", variants=3, checks=("one clear line",))
@pytest.mark.parametrize("text", [
    "source dmesg\nfirst [    0.000000] L\ncount 5\nexit 0\n",
    XID_LOG.replace("count 1", "count 0"),
    "source dmesg\nfirst [    0.000000] L\n" + XID_LINE * (MAX_EVENTS + 1) + f"count {MAX_EVENTS + 1}\nexit 0\n",
])
def test_an_xid_count_at_odds_with_the_lines_listed_is_damaged(text):
    with pytest.raises(UntrustedOutput, match=r"^kernel log \(dmesg\): count \d+ but \d+ Xid line\(s\) listed"):
        parse_kernel_xid(text)


CLEAN_JOURNAL = "source journal\nfirst Jan 01 kernel: Linux version 6.8.0\ncount 0\nexit 0\n"


@pytest.mark.reliability(item=40, fault="kernel.xid sections out of the command's order or repeated: a clean journal "
                         "before a dmesg with an Xid, dmesg twice, a count or exit twice, a journal after a whole "
                         "dmesg", variants=5, checks=("one clear line",))
@pytest.mark.parametrize("text", [
    CLEAN_JOURNAL + XID_LOG,
    XID_LOG + XID_LOG,
    XID_LOG.replace("count 1\n", "count 1\ncount 0\n"),
    XID_LOG.replace("exit 0\n", "exit 0\nexit 0\n"),
    XID_LOG + CLEAN_JOURNAL,  # dmesg starts at [0.000000]: the command reads no journal then
])
def test_xid_sections_repeated_or_out_of_order_are_damaged(text):
    with pytest.raises(UntrustedOutput, match=r"^kernel log.*damaged"):
        parse_kernel_xid(text)


def test_a_wrapped_dmesg_then_the_journal_still_reads():
    wrapped = XID_LOG.replace("[    0.000000]", "[ 5000.000000]")
    got = parse_kernel_xid(wrapped + CLEAN_JOURNAL)
    assert got["source"] == "journal" and got["count"] == 0 and got["whole_boot"]
    assert parse_kernel_xid(CLEAN_JOURNAL)["source"] == "journal"


def test_a_count_past_the_lines_kept_still_reads():
    # The awk keeps the newest MAX_EVENTS lines of a longer count.
    got = parse_kernel_xid("source dmesg\nfirst [    0.000000] L\n" + XID_LINE * MAX_EVENTS + "count 5000\nexit 0\n")
    assert got["count"] == 5000 and len(got["events"]) == MAX_EVENTS


class StatsAnswer:
    """Stands in for tritonclient's gRPC client: only the one call read_stats makes, answering ``doc``."""

    def __init__(self, doc):
        self.doc = doc

    def get_inference_statistics(self, model_name, as_json):
        return self.doc


def stats(count) -> dict:
    return {"model_stats": [{"name": "m", "version": "1", "inference_count": "40", "execution_count": "10",
                             "inference_stats": {"success": {"count": count, "ns": "1000"},
                                                 "queue": {"count": "10", "ns": "50"}}}]}


def test_triton_counters_as_the_grpc_json_prints_them_read():
    s = read_stats(StatsAnswer(stats("10")), "m")
    assert (s.success, s.inference_count, s.request_ns) == (10, 40, 1000)


@pytest.mark.reliability(item=40, fault="Triton statistics counter: NaN, -5, 1e308, 10^400, text", variants=6,
                         checks=("one clear line",))
@pytest.mark.parametrize("count", ["NaN", "-5", "1e308", "1" * 400, "many", float("inf")])
def test_an_absurd_triton_counter_is_one_line(count):
    with pytest.raises(BringupError) as e:
        read_stats(StatsAnswer(stats(count)), "m")
    assert str(e.value).startswith("Triton's statistics are unreadable: success.count")


def bench_doc(finished: datetime, p95=10.0, items=300.0) -> dict:
    pt = {"window": "800 µs", "window_us": 800, "deployed": True, "batch": 1, "concurrency": 16, "p95_ms": p95,
          "items_per_s": items, "client_bound": False, "errors": 0, "microbatch_us": None,
          "spread": {"repeats": 3, "p95_ms": {"min": p95, "max": p95, "pct": 0.0},
                     "items_per_s": {"min": items, "max": items, "pct": 0.0}}}
    return {"kind": KIND, "host": "h1", "finished": finished.isoformat(timespec="seconds"), "points": [pt]}


def checked(tmp_path: Path, doc_text: str) -> list:
    (tmp_path / "h1-20261204T110000Z.json").write_text(doc_text)
    return latency_checks({"inventory_hostname": "h1", "latency_slo_p95_ms": 50}, tmp_path)


def test_a_sound_saved_bench_result_passes(tmp_path):
    (k,) = checked(tmp_path, json.dumps(bench_doc(datetime.now(timezone.utc) - timedelta(hours=1))))
    assert k.status == "PASS"


BENCH = {"NaN p95": dict(p95=float("nan")), "negative p95": dict(p95=-1.0), "1e308 items/s": dict(items=1e308)}


@pytest.mark.reliability(item=40, fault="saved bench result: NaN, negative or 1e308 figures", variants=3,
                         checks=("one clear line",))
@pytest.mark.parametrize("kw", BENCH.values(), ids=BENCH.keys())
def test_absurd_saved_bench_figures_are_not_checked(tmp_path, kw):
    (k,) = checked(tmp_path, json.dumps(bench_doc(datetime.now(timezone.utc) - timedelta(hours=1), **kw)))
    assert k.status == "WARN" and k.seen.startswith("not checked: the saved result is unreadable")


def _edited(change) -> str:
    doc = bench_doc(datetime.now(timezone.utc) - timedelta(hours=1), p95=20.0)
    change(doc["points"][0])
    return json.dumps(doc)


EDITED = {
    "p95 outside its spread": lambda pt: pt["spread"]["p95_ms"].update(min=1.0, max=2.0),
    "spread min above max": lambda pt: pt["spread"]["p95_ms"].update(min=30.0, max=10.0),
    "unstable not a yes or no": lambda pt: pt.update(unstable="maybe"),
    "client_bound missing": lambda pt: pt.pop("client_bound"),
    "client_bound not a yes or no": lambda pt: pt.update(client_bound="no"),
    "errors negative": lambda pt: pt.update(errors=-3),
}


@pytest.mark.reliability(item=40, fault="a saved bench result edited to contradict itself (its p95 outside its own "
                         "windows' spread, min above max, unstable or client_bound neither true nor false, client_bound "
                         "missing (KeyError in the line), errors negative)", variants=6,
                         checks=("one clear line",))
@pytest.mark.parametrize("change", EDITED.values(), ids=EDITED.keys())
def test_a_bench_result_that_contradicts_itself_is_not_checked(tmp_path, change):
    # Judged by its p95 before, whatever its spread said (found by a hostile-input pass, issue 40 item 8).
    (k,) = checked(tmp_path, _edited(change))
    assert k.status == "WARN" and k.seen.startswith("not checked: the saved result is unreadable (point 0"), k.seen


@pytest.mark.reliability(item=40, fault="a saved bench result dated in the future", variants=1,
                         checks=("one clear line",))
def test_a_saved_bench_result_dated_in_the_future_is_refused(tmp_path):
    # Passed over and named: alone, the host is "not measured"; beside a real result, the real one is judged.
    warn, k = checked(tmp_path, json.dumps(bench_doc(datetime.now(timezone.utc) + timedelta(days=30))))
    assert warn.status == "WARN" and "finished in the future, not read" in warn.seen and "\n" not in warn.seen
    assert k.status == "WARN" and k.seen.startswith("not measured")
    real = bench_doc(datetime.now(timezone.utc) - timedelta(hours=2), p95=90.0)
    (tmp_path / "h1-20261203T110000Z.json").write_text(json.dumps(real))
    warn, k = latency_checks({"inventory_hostname": "h1", "latency_slo_p95_ms": 50}, tmp_path)
    assert warn.status == "WARN" and k.status == "FAIL" and "h1-20261203T110000Z.json" in k.seen, k.seen
    (k,) = checked(tmp_path, json.dumps(bench_doc(datetime.now(timezone.utc) + timedelta(seconds=60))))
    assert k.status == "PASS"  # within the clock-skew allowance


@pytest.mark.reliability(item=40, fault="saved bench result or index nested 100,000 deep or 100,000 digits",
                         variants=3, checks=("one clear line",))
@pytest.mark.parametrize("text", ["[" * 100_000, '{"kind": "bringup-bench", "x": ' + "1" * 100_000 + "}",
                                  "[1, " * 30_000])
def test_a_hostile_saved_bench_file_is_skipped_not_a_traceback(tmp_path, text):
    (tmp_path / "h1-20261204T110000Z.json").write_text(text)
    (tmp_path / "index.json").write_text(text)
    assert latest("h1", tmp_path) is None
    (k,) = latency_checks({"inventory_hostname": "h1", "latency_slo_p95_ms": 50}, tmp_path)
    assert k.status == "WARN" and k.seen.startswith("not measured")


SLO = {"inventory_hostname": "h1", "latency_slo_p95_ms": 50}


@pytest.mark.reliability(item=40, fault="saved bench result or index entry: a FIFO or a link to /dev/zero", variants=4,
                         checks=("one clear line", "no hang"))
@pytest.mark.parametrize("where", ["result", "index"])
@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_a_bench_file_that_is_no_file_is_skipped_and_named(tmp_path, where, kind):
    import os

    real = bench_doc(datetime.now(timezone.utc) - timedelta(hours=2), p95=90.0)
    (tmp_path / "h1-20261203T110000Z.json").write_text(json.dumps(real))
    bad = tmp_path / ("h1-zzz.json" if where == "result" else "elsewhere.json")
    if kind == "fifo":
        os.mkfifo(bad)
    else:
        bad.symlink_to("/dev/zero")
    if where == "index":
        (tmp_path / "index.json").write_text(json.dumps({"h1": [str(bad)]}))
    warn, k = latency_checks(SLO, tmp_path)
    assert warn.status == "WARN" and str(bad) in warn.seen and "not read" in warn.seen and "\n" not in warn.seen
    assert k.status == "FAIL" and "h1-20261203T110000Z.json" in k.seen, k.seen


BAD_FIELDS = {"finished 5": {"finished": 5}, "finished list": {"finished": ["x"]},
              "spread text": {"spread": "x"}, "repeats text": {"spread": {"repeats": "3"}}, "no concurrency": {}}


@pytest.mark.reliability(item=40, fault="saved bench result: finished not text, spread or repeats of the wrong kind, "
                                        "a point's field missing", variants=5, checks=("one clear line",))
@pytest.mark.parametrize("change", BAD_FIELDS.values(), ids=BAD_FIELDS.keys())
def test_a_bench_result_of_the_wrong_shape_is_not_checked_and_named(tmp_path, change):
    doc = bench_doc(datetime.now(timezone.utc) - timedelta(hours=1))
    if "finished" in change:
        doc.update(change)
    elif change:
        doc["points"][0].update(change)
    else:
        del doc["points"][0]["concurrency"]
    path = tmp_path / "h1-20261204T110000Z.json"
    path.write_text(json.dumps(doc))
    (k,) = latency_checks(SLO, tmp_path)
    assert k.status == "WARN" and str(path) in k.seen and "\n" not in k.seen, k.seen
    assert "unreadable" in k.seen or "not read" in k.seen, k.seen


@pytest.mark.reliability(item=40, fault="a saved bench result whose finished time is no time (2999-...Zjunk, "
                                        "+99:00, past year 9999 in UTC) beside a real one", variants=3,
                         checks=("one clear line",))
@pytest.mark.parametrize("when", ["2999-01-01T00:00:00Zjunk", "9999-12-31T23:59:59+99:00",
                                  "9999-12-31T23:59:59-23:00"])
def test_an_undated_bench_result_never_hides_the_real_one(tmp_path, when):
    real = bench_doc(datetime.now(timezone.utc) - timedelta(hours=2), p95=90.0)
    (tmp_path / "h1-20261203T110000Z.json").write_text(json.dumps(real))
    (tmp_path / "h1-29990101T000000Z.json").write_text(json.dumps({**bench_doc(datetime.now(timezone.utc), p95=1.0),
                                                                    "finished": when}))
    warn, k = latency_checks(SLO, tmp_path)
    assert warn.status == "WARN" and "h1-29990101T000000Z.json" in warn.seen and "is no time" in warn.seen, warn.seen
    assert k.status == "FAIL" and "h1-20261203T110000Z.json" in k.seen, k.seen

@pytest.mark.reliability(item=40, fault="drift's earlier textfile holding NaN, +Inf, -1 or 1e308", variants=1,
                         checks=("report written",))
def test_drift_does_not_carry_absurd_values_of_an_earlier_textfile(tmp_path):
    from bringup.engine.drift import read_previous

    p = tmp_path / "bringup.prom"
    p.write_text("# TYPE bringup_unreachable gauge\n"
                 'bringup_unreachable{host="a"} NaN\nbringup_unreachable{host="b"} +Inf\n'
                 'bringup_unreachable{host="c"} -1\nbringup_unreachable{host="d"} 1e308\n'
                 'bringup_unreachable{host="e"} 1\n')
    assert read_previous(p) == {("bringup_unreachable", "e"): 1.0}


@pytest.mark.reliability(item=40, fault="a JSON file on the host nested 100,000 deep or with 100,000 digits",
                         variants=2, checks=("one clear line", "nothing touched"))
@pytest.mark.parametrize("text", ["[" * 100_000, '{"a": ' + "1" * 100_000 + "}"])
def test_a_hostile_json_file_on_the_host_is_one_line_and_kept(tmp_path, text):
    import subprocess

    from bringup.resources.jsonfile import JsonFile

    f = tmp_path / "daemon.json"
    f.write_text(text)
    res = JsonFile(str(f), {"debug": True})
    plan = res.plan(subprocess.run(["/bin/sh", "-c", res.read()], capture_output=True, text=True).stdout)
    assert plan.error and plan.error.startswith(f"{f} is not valid JSON") and "\n" not in plan.error
    assert not plan.commands and f.read_text() == text


TOPO = ("\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \t0-15\t0\t\tN/A\n\nLegend:\n\n  X    = Self\n"
        "---\nnode 0 0-15\n")
LSCPU = "# CPU,Core,Socket,Node,L1d:L1i:L2:L3\n0,0,0,0,0:0:0:0\n1,1,0,0,1:1:1:0\n---\nnode 0 0-1\n"
#: CPU lists a host may print that no machine has: expanding them held the run (10^20 CPUs: for ever, all memory).
HUGE_LISTS = {"4,000,001 CPUs": "0-4000000", "10^20 CPUs": "0-99999999999999999999", "a 5,000-digit id": "9" * 5000,
              "one CPU past 65535": "65536"}


def _parsers(cpus: str):
    from bringup.facts.cpu import parse_lscpu_parse
    from bringup.facts.irq import parse_irq_affinity
    from bringup.facts.nvidia_topo import parse_topo_matrix

    return {"nvidia-smi topo -m's CPU affinity": lambda: parse_topo_matrix(TOPO.replace("\t0-15\t", f"\t{cpus}\t")),
            "nvidia-smi topo -m's node line": lambda: parse_topo_matrix(TOPO.replace("node 0 0-15", f"node 0 {cpus}")),
            "a NUMA node's cpulist": lambda: parse_lscpu_parse(LSCPU.replace("node 0 0-1", f"node 0 {cpus}")),
            "an IRQ's affinity": lambda: parse_irq_affinity(f"24 {cpus} 0\n")}


@pytest.mark.reliability(item=40, fault="a CPU list from a host naming CPUs past any machine's (nvidia-smi topo -m, a "
                         "NUMA node, an IRQ's affinity): 0-4000000, 0-10^20, a 5,000-digit id, 65536",
                         variants=4 * len(HUGE_LISTS), checks=("one clear line", "no hang"))
@pytest.mark.parametrize("cpus", HUGE_LISTS.values(), ids=HUGE_LISTS.keys())
@pytest.mark.parametrize("where", list(_parsers("0")))
def test_a_cpu_list_past_any_machine_is_refused_never_expanded(where, cpus):
    from tests.unit.test_saved_reads import _bounded

    def parsed():
        try:
            return _parsers(cpus)[where]()
        except UntrustedOutput as e:
            return e

    got = _bounded(parsed, 10)
    if isinstance(got, UntrustedOutput):
        assert "above 65535" in str(got) and len(str(got)) < 300, got
    else:  # a parser that refuses the device alone keeps no CPU of it (its error said beside)
        listed = json.dumps(got)
        assert "65536" not in listed and "4000000" not in listed, listed[:300]


def test_the_highest_cpu_id_still_reads():
    from bringup.facts.base import parse_cpulist

    assert parse_cpulist("0-65535")[-1] == 65535 and parse_cpulist("0-3,8") == [0, 1, 2, 3, 8]


# ---------------------------------------------------------------------------------------------------------
# Negative readings of quantities that cannot be below zero (nvidia-smi prints NVML's unsigned values)

_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hosts" / "h200-vm"


@pytest.mark.reliability(item=40, fault="a GPU or memory temperature below 0 °C in nvidia-smi -q (-5 C, -1 C, -40 C)",
                         variants=4, checks=("one clear line",))
@pytest.mark.parametrize("key,value", [("GPU Current Temp", "-5"), ("GPU Current Temp", "-1"),
                                       ("GPU Current Temp", "-40"), ("Memory Current Temp", "-5")])
def test_a_negative_gpu_temperature_is_not_checked_never_pass(key, value):
    import re

    from bringup.facts.nvidia_q import parse_nvidia_smi_q
    from bringup.hardware.health import health_checks
    text, n = re.subn(rf"({re.escape(key)}\s+:) -?\d+ C", rf"\1 {value} C", (_FIXTURES / "nvidia-smi-q.txt").read_text(),
                      count=1)
    assert n == 1
    (temp,) = [c for c in health_checks({"nvidia.query": parse_nvidia_smi_q(text)}, {}) if c.name == "temperature"]
    assert temp.status == "WARN" and temp.seen.startswith("not checked: nvidia.query unreadable: ")
    assert f"{key} '{value} C'" in temp.seen, temp.seen


@pytest.mark.reliability(item=40, fault="a GPU temperature below 0 °C sampled under accept's load", variants=1,
                         checks=("one clear line",))
def test_a_negative_temperature_under_load_is_named_not_shown_as_a_reading():
    from bringup.acceptance.judge import load_lines
    doc = {"gpus": [{"index": 0, "bus_id": "00000000:00:06.0", "h2d_gbs": 55.0}], "load": {
        "seconds": 10.0, "errors": {}, "samples": [{"t": 1.0, "gpus": [
            {"index": "0", "bus_id": "00000000:00:06.0", "reasons": "0x0", "temperature_c": "-5", "sm_mhz": "1980"}]}]}}
    (clk,) = load_lines(doc)
    assert "-5 °C" not in clk.seen and "'-5' is no reading: not checked" in clk.seen, clk.seen
    assert clk.value is None


@pytest.mark.reliability(item=40, fault="nvidia-smi --query-gpu printing a negative size, power, clock or index "
                         "(-143771 MiB, -700.00 W, -1980 MHz, index -1)", variants=4, checks=("one clear line",))
@pytest.mark.parametrize("old,new", [("143771 MiB", "-143771 MiB"), ("700.00 W", "-700.00 W"),
                                     ("1980 MHz", "-1980 MHz"), ("\n0, NVIDIA", "\n-1, NVIDIA")])
def test_a_negative_query_gpu_value_refuses_the_fact_naming_it(old, new):
    from bringup.facts.nvidia_csv import parse_query_gpu_csv
    text = (_FIXTURES / "nvidia-smi-query.csv").read_text()
    assert old in text
    with pytest.raises(UntrustedOutput) as e:
        parse_query_gpu_csv(text.replace(old, new, 1))
    assert "is below zero: no reading" in str(e.value) and repr(new.strip().split(",")[0]) in str(e.value), str(e.value)
    assert len(str(e.value)) < 200 and "\n" not in str(e.value)


@pytest.mark.reliability(item=40, fault="the probe's load length NaN, 1e308, negative or text (shown as 'NaN s' on the "
                         "clocks line)", variants=4, checks=("one clear line",))
@pytest.mark.parametrize("seconds", ["NaN", 1e308, -5, "10"])
def test_a_load_length_that_is_no_time_is_named_never_shown_as_seconds(seconds):
    from bringup.acceptance.judge import load_lines
    doc = {"gpus": [{"index": 0, "bus_id": "00000000:00:06.0", "h2d_gbs": 55.0}], "load": {
        "seconds": seconds, "errors": {}, "samples": [{"t": 1.0, "gpus": [
            {"index": "0", "bus_id": "00000000:00:06.0", "reasons": "0x0", "temperature_c": "40", "sm_mhz": "1980"}]}]}}
    (clk,) = load_lines(doc)
    assert f"over an unreadable time ({str(seconds)[:20]!r}) of copies" in clk.seen, clk.seen
    assert " s of copies" not in clk.seen
