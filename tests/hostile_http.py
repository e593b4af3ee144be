"""A real HTTP server on 127.0.0.1 that answers as a hostile or broken one would (issue 40 items 3 and 6).

    with HostileHTTP("flood") as url: ...   # 200, then bytes without end (a 1 GiB answer and more)
    with HostileHTTP("drip") as url: ...    # 200, then one byte every 0.2 s, never ending
    with HostileHTTP("drip-headers") as url: ...  # a status line, then a header's bytes one every 0.2 s
    with HostileHTTP(body=b"...") as url: ... # 200 with this body (deep JSON, 100,000 digits, NaN)

Each connection is served by its own thread; the server stops (and its threads end at their next write) when
the ``with`` ends.
"""
from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class HostileHTTP:
    def __init__(self, mode: str = "body", body: bytes = b"", content_type: str = "application/json"):
        self.mode, self.body, self.content_type = mode, body, content_type
        self.stopped = threading.Event()
        self.sent = 0  # bytes of body sent, all connections
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                if outer.mode == "drip-headers":  # each byte well within a read's timeout, the headers never done
                    try:
                        self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Drip: ")
                        while not outer.stopped.is_set():
                            self.wfile.write(b"a")
                            self.wfile.flush()
                            outer.sent += 1
                            time.sleep(0.2)
                    except OSError:
                        pass
                    return
                self.send_response(200)
                self.send_header("Content-Type", outer.content_type)
                if outer.mode == "body":
                    self.send_header("Content-Length", str(len(outer.body)))
                    self.end_headers()
                    self.wfile.write(outer.body)
                    return
                self.end_headers()
                chunk = b"x" * 65536 if outer.mode == "flood" else b"{"
                try:
                    while not outer.stopped.is_set():
                        self.wfile.write(chunk)
                        outer.sent += len(chunk)
                        if outer.mode == "drip":
                            self.wfile.flush()
                            time.sleep(0.2)
                except OSError:
                    pass

        Handler.do_POST = Handler.do_GET
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> str:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self.url

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        self.server.shutdown()
        self.server.server_close()
