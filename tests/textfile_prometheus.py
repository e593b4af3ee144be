"""A real Prometheus (the binary scripts/ci-setup.sh installs) scraping node exporter textfiles: each host's file
in ``folder`` (``<host>.prom``) served on 127.0.0.1 at its own path, as the host's node exporter would serve it,
and scraped every second.  For the tests of ``bringup fleet`` (unit: files written here; integration: files
copied out of sandbox hosts)."""
from __future__ import annotations

import http.server
import shutil
import socket
import subprocess
import threading
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TextfilePrometheus:
    """Started on construction; ``url`` is its HTTP API; ``close()`` stops it and the file server."""

    def __init__(self, folder: Path, hosts: list[str] | tuple[str, ...]):
        binary = shutil.which("prometheus")
        assert binary, "prometheus is not installed: apt-get install prometheus (scripts/ci-setup.sh does)"
        self.folder = folder

        class Serve(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                try:  # a host whose file is not there yet: an empty scrape
                    body = (folder / f"{self.path.strip('/')}.prom").read_bytes()
                except OSError:
                    body = b""
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Serve)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        port = free_port()
        targets = "\n".join(f"      - targets: ['127.0.0.1:{self.httpd.server_port}']\n"
                            f"        labels: {{__metrics_path__: /{name}}}" for name in hosts)
        (folder / "prometheus.yml").write_text(
            f"global: {{scrape_interval: 1s}}\nscrape_configs:\n  - job_name: node\n    static_configs:\n{targets}\n")
        self.proc = subprocess.Popen([binary, f"--config.file={folder / 'prometheus.yml'}",
                                      f"--storage.tsdb.path={folder / 'data'}",
                                      f"--web.listen-address=127.0.0.1:{port}"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{port}"

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.httpd.shutdown()
