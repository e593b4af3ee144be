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


def test_jinja2_loads_at_the_first_render_not_with_the_templates(tmp_path):
    # A run's input check may build Templates and render nothing (the triton role with no models): Jinja2 then
    # loads once the run renders, while its first round trip is out (issue 42).
    import subprocess
    import sys

    code = ("import sys\nfrom bringup.project import content_root\nfrom bringup.engine.templates import Templates\n"
            "t = Templates(content_root() / 'templates')\nprint('jinja2' in sys.modules)\n"
            "t.render('sysctl/90-trt-latency.conf.j2', entries=[], missing=[], profile='p')\n"
            "print('jinja2' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd=content_root())
    assert r.stdout.split() == ["False", "True"], (r.stdout, r.stderr[-2000:])
