"""Templates rendered by many hosts at once: each template is compiled once."""
from __future__ import annotations

import threading

from bringup.project import content_root
from bringup.engine.templates import Templates


def test_hosts_rendering_together_compile_a_template_once():
    t = Templates(content_root() / "templates")
    compiled: list[str] = []
    real = t.env.compile

    def counting(source, name=None, filename=None, raw=False, defer_init=False):
        compiled.append(name)
        return real(source, name, filename, raw, defer_init)

    t.env.compile = counting
    start = threading.Barrier(16)
    out: list[str] = []

    def host() -> None:
        start.wait()
        out.append(t.render("sysctl/90-trt-latency.conf.j2", entries=[("vm.swappiness", (1, "why"))], missing=[],
                            profile="test"))

    threads = [threading.Thread(target=host) for _ in range(16)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(out) == 16 and len(set(out)) == 1
    assert compiled == ["sysctl/90-trt-latency.conf.j2"]
