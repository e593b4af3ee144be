"""A TEST DOUBLE of NVIDIA's dcgm-exporter image: a static C program serving /metrics.

No registry is reachable here and there is no GPU, so the real image cannot
run.  The double takes the real exporter's flags (``-f <counters csv>``,
``-a :<port>``) and serves one sample per counter of the CSV, value 0, with
the labels dcgm-exporter uses; the image is ``docker import``-ed from a root
holding only that binary and is labelled ``bringup.test-double=1``.
"""
from __future__ import annotations

import hashlib
import io
import subprocess
import tarfile
from pathlib import Path

TAG = "bringup-test-double/dcgm-exporter:3.3.9-3.6.1-double"

SOURCE = r'''
/* TEST DOUBLE of dcgm-exporter (bringup test suite): serves /metrics for the
   counters of the CSV given with -f, each with value 0.  Not NVIDIA's program. */
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static char body[1 << 16];

static void quit(int sig) { (void)sig; _exit(0); }

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t') s++;
    char *e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\n' || e[-1] == '\r' || e[-1] == '\t')) *--e = 0;
    return s;
}

int main(int argc, char **argv) {
    const char *csv = "/etc/dcgm-exporter/default-counters.csv";
    int port = 9400;
    for (int i = 1; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "-f") || !strcmp(argv[i], "--collectors")) csv = argv[++i];
        else if (!strcmp(argv[i], "-a") || !strcmp(argv[i], "--address")) {
            const char *c = strrchr(argv[++i], ':'); port = atoi(c ? c + 1 : argv[i]);
        }
    }
    signal(SIGTERM, quit);
    signal(SIGINT, quit);
    FILE *f = fopen(csv, "r");
    if (!f) { fprintf(stderr, "TEST DOUBLE dcgm-exporter: cannot read %s\n", csv); return 1; }
    char host[256] = "unknown";
    gethostname(host, sizeof host - 1);
    char line[1024];
    size_t n = 0;
    while (fgets(line, sizeof line, f)) {
        char *s = trim(line);
        if (!*s || *s == '#') continue;
        char *name = strtok(s, ","), *type = strtok(NULL, ","), *help = strtok(NULL, "");
        if (!name || !type) continue;
        name = trim(name); type = trim(type); help = help ? trim(help) : "";
        n += snprintf(body + n, sizeof body - n,
                      "# HELP %s %s\n# TYPE %s %s\n%s{gpu=\"0\",UUID=\"GPU-00000000-0000-0000-0000-000000000000\","
                      "pci_bus_id=\"00000000:00:06.0\",device=\"nvidia0\",modelName=\"TEST DOUBLE\",Hostname=\"%s\"} 0\n",
                      name, help, name, type, name, host);
    }
    fclose(f);
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET; a.sin_port = htons(port); a.sin_addr.s_addr = htonl(INADDR_ANY);
    if (bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 16)) { perror("bind"); return 1; }
    fprintf(stderr, "TEST DOUBLE dcgm-exporter: serving %s on :%d\n", csv, port);
    for (;;) {
        int c = accept(s, NULL, NULL);
        if (c < 0) continue;
        char req[2048];
        ssize_t r = read(c, req, sizeof req - 1);
        req[r > 0 ? r : 0] = 0;
        char head[256];
        if (!strncmp(req, "GET /metrics", 12)) {
            int h = snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
                             "Content-Length: %zu\r\nConnection: close\r\n\r\n", n);
            write(c, head, h); write(c, body, n);
        } else {
            const char *nf = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
            write(c, nf, strlen(nf));
        }
        close(c);
    }
}
'''

DEFAULT_CSV = "# TEST DOUBLE image's own default\nDCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).\n"


def build_image(workdir: Path, tag: str = TAG) -> str:
    """Compile the double (static), import it as ``tag`` on this machine's Docker; return its image ID.

    The image is reused when the source is unchanged (a label carries its hash).
    """
    digest = hashlib.sha256(SOURCE.encode()).hexdigest()[:12]
    cp = subprocess.run(["docker", "image", "inspect", "--format",
                         '{{.Id}} {{index .Config.Labels "bringup.test-double.source"}}', tag],
                        capture_output=True, text=True)
    if cp.returncode == 0 and cp.stdout.split()[1:] == [digest]:
        return cp.stdout.split()[0]
    workdir.mkdir(parents=True, exist_ok=True)
    src = workdir / "dcgm-exporter.c"
    src.write_text(SOURCE)
    binary = workdir / "dcgm-exporter"
    subprocess.run(["gcc", "-O2", "-static", "-o", str(binary), str(src)], check=True, capture_output=True)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        def add(name: str, data: bytes, mode: int) -> None:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
        for d in ("usr", "usr/bin", "etc", "etc/dcgm-exporter", "tmp"):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        add("usr/bin/dcgm-exporter", binary.read_bytes(), 0o755)
        add("etc/dcgm-exporter/default-counters.csv", DEFAULT_CSV.encode(), 0o644)
        add("TEST-DOUBLE", b"bringup TEST DOUBLE of nvcr.io/nvidia/k8s/dcgm-exporter; not NVIDIA's image.\n", 0o644)
    subprocess.run(["docker", "import", "--change", 'ENTRYPOINT ["/usr/bin/dcgm-exporter"]',
                    "--change", "LABEL bringup.test-double=1", "--change", f"LABEL bringup.test-double.source={digest}",
                    "--change", "EXPOSE 9400", "-", tag], input=buf.getvalue(), check=True, capture_output=True)
    return subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", tag], check=True,
                          capture_output=True, text=True).stdout.strip()
