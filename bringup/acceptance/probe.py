"""The acceptance probe: copy bandwidths of every GPU with the CUDA driver API alone, and a short load.

Python's standard library only: this one file is shipped to the host and run there by ``python3`` (no CUDA
toolkit, no container, no bringup).  It loads ``libcuda.so.1`` (every driver install has it) through ctypes
and measures, per GPU, pinned host-to-device (H2D), device-to-host (D2H) and device-to-device (D2D) copy
bandwidth (the median of ``--repeats`` timed runs), per GPU pair peer-to-peer copies (``cuMemcpyPeer``,
peer access enabled where the driver allows it), then ``--seconds`` of copies on every GPU at once while
``nvidia-smi`` is read every second (clock event reasons, temperature, SM clock).

It prints ONE JSON document on stdout, whatever happens.  Every failure is a named error in that document:
no ``libcuda.so.1``, a CUDA call's error (by ``cuGetErrorName``), a copy that did not return within
``--watchdog`` seconds (the process then ends itself: a hung copy never holds the host).  Never a traceback.
``BRINGUP_LIBCUDA`` names another library to load (the tests' stand-in: tests/unit/test_accept_probe.py).

    python3 probe.py --seconds 10 --size-mib 256 --repeats 5 --watchdog 20

Bandwidths are GB/s (10^9 bytes per second), bytes moved over wall time; D2D's ``d2d_gbs`` counts each
byte once (a copy reads and writes it: the judge doubles it against the memory's bandwidth).

Over 500 lines because this one file is the program the host runs (shipped alone, no bringup there): its CUDA
calls, its watchdog and its bounded read of nvidia-smi (:func:`capped`) cannot live in a module beside it.
"""
import ctypes
import json
import os
import statistics
import subprocess
import sys
import threading
import time

VERSION = 1
LIBRARY = "libcuda.so.1"
#: nvidia-smi's fields read during the load; older drivers name the reasons clocks_throttle_reasons.
SMI_FIELDS = "index,pci.bus_id,clocks_event_reasons.active,temperature.gpu,clocks.sm"
SMI_FIELDS_OLD = "index,pci.bus_id,clocks_throttle_reasons.active,temperature.gpu,clocks.sm"
#: D2D copies timed as one run (each is queued; one synchronize ends the run).
D2D_BATCH = 10


class CudaError(Exception):
    """A CUDA driver call that did not return CUDA_SUCCESS."""

    def __init__(self, call, code, name):
        super().__init__(f"{call}: {name} ({code})")
        self.call, self.code, self.name = call, code, name


class Driver:
    """The few driver API calls the probe makes, each checked."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        c = ctypes
        self.sig = {
            "cuInit": [c.c_uint],
            "cuDriverGetVersion": [c.POINTER(c.c_int)],
            "cuDeviceGetCount": [c.POINTER(c.c_int)],
            "cuDeviceGet": [c.POINTER(c.c_int), c.c_int],
            "cuDeviceGetName": [c.c_char_p, c.c_int, c.c_int],
            "cuDeviceGetPCIBusId": [c.c_char_p, c.c_int, c.c_int],
            "cuDevicePrimaryCtxRetain": [c.POINTER(c.c_void_p), c.c_int],
            "cuDevicePrimaryCtxRelease_v2": [c.c_int],
            "cuCtxSetCurrent": [c.c_void_p],
            "cuCtxSynchronize": [],
            "cuMemAllocHost_v2": [c.POINTER(c.c_void_p), c.c_size_t],
            "cuMemFreeHost": [c.c_void_p],
            "cuMemAlloc_v2": [c.POINTER(c.c_uint64), c.c_size_t],
            "cuMemFree_v2": [c.c_uint64],
            "cuMemcpyHtoD_v2": [c.c_uint64, c.c_void_p, c.c_size_t],
            "cuMemcpyDtoH_v2": [c.c_void_p, c.c_uint64, c.c_size_t],
            "cuMemcpyDtoD_v2": [c.c_uint64, c.c_uint64, c.c_size_t],
            "cuDeviceCanAccessPeer": [c.POINTER(c.c_int), c.c_int, c.c_int],
            "cuCtxEnablePeerAccess": [c.c_void_p, c.c_uint],
            "cuMemcpyPeer": [c.c_uint64, c.c_void_p, c.c_uint64, c.c_void_p, c.c_size_t],
        }
        for name, args in self.sig.items():
            try:
                fn = getattr(self.lib, name)
            except AttributeError:
                continue  # a call the library lacks is named when it is made
            fn.argtypes, fn.restype = args, c.c_int
        try:
            self.lib.cuGetErrorName.argtypes = [c.c_int, c.POINTER(c.c_char_p)]
            self.lib.cuGetErrorName.restype = c.c_int
        except AttributeError:
            pass

    def error_name(self, code):
        s = ctypes.c_char_p()
        try:
            if self.lib.cuGetErrorName(code, ctypes.byref(s)) == 0 and s.value:
                return s.value.decode("ascii", "replace")
        except AttributeError:
            pass
        return f"CUDA error {code}"

    def __call__(self, name, *args):
        try:
            fn = getattr(self.lib, name)
        except AttributeError:
            raise CudaError(name, -1, "symbol not in " + LIBRARY + " (driver too old?)") from None
        rc = fn(*args)
        if rc != 0:
            raise CudaError(name, rc, self.error_name(rc))


class Watchdog:
    """What each thread is doing and since when; the main thread ends the probe when a copy outlives its bound."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.lock = threading.Lock()
        self.doing = {}

    def start(self, what):
        with self.lock:
            self.doing[threading.get_ident()] = (what, time.monotonic())

    def done(self):
        with self.lock:
            self.doing.pop(threading.get_ident(), None)

    def overdue(self):
        now = time.monotonic()
        with self.lock:
            for what, since in self.doing.values():
                if now - since > self.seconds:
                    return what
        return None


def bus_id(text):
    """cuDeviceGetPCIBusId's ``0000:18:00.0`` in nvidia-smi's spelling, ``00000000:18:00.0``."""
    dom, _, rest = text.partition(":")
    return f"{dom.zfill(8).upper()}:{rest.upper()}" if rest else text.upper()


class Probe:
    def __init__(self, cu, size, repeats, dog):
        self.cu, self.size, self.repeats, self.dog = cu, size, repeats, dog
        self.ctx = {}

    def timed(self, what, fn, nbytes):
        """GB/s of ``fn()`` moving ``nbytes``, watched by the watchdog."""
        self.dog.start(what)
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        self.dog.done()
        return nbytes / dt / 1e9 if dt > 0 else None

    def use(self, i):
        self.cu("cuCtxSetCurrent", self.ctx[i])

    def device(self, i):
        c = ctypes
        dev = c.c_int()
        self.cu("cuDeviceGet", c.byref(dev), i)
        name = c.create_string_buffer(256)
        self.cu("cuDeviceGetName", name, 256, dev.value)
        bus = c.create_string_buffer(64)
        self.cu("cuDeviceGetPCIBusId", bus, 64, dev.value)
        ctx = c.c_void_p()
        self.cu("cuDevicePrimaryCtxRetain", c.byref(ctx), dev.value)
        self.ctx[i] = ctx
        return {"index": i, "name": name.value.decode("utf-8", "replace"),
                "bus_id": bus_id(bus.value.decode("ascii", "replace"))}

    def alloc(self):
        """A pinned host buffer and two device buffers in the current context."""
        c = ctypes
        host = c.c_void_p()
        self.cu("cuMemAllocHost_v2", c.byref(host), self.size)
        a, b = c.c_uint64(), c.c_uint64()
        self.cu("cuMemAlloc_v2", c.byref(a), self.size)
        self.cu("cuMemAlloc_v2", c.byref(b), self.size)
        return host, a, b

    def free(self, bufs):
        host, a, b = bufs
        for call, p in (("cuMemFree_v2", a), ("cuMemFree_v2", b), ("cuMemFreeHost", host)):
            try:
                self.cu(call, p)
            except CudaError:
                pass

    def gpu(self, g):
        """H2D, D2H, D2D of GPU ``g`` (its dict gains the medians and the samples)."""
        i = g["index"]
        self.use(i)
        bufs = g["_bufs"] = self.alloc()
        host, a, b = bufs
        n = self.size
        cu = self.cu

        def h2d():
            cu("cuMemcpyHtoD_v2", a, host, n)
            cu("cuCtxSynchronize")

        def d2h():
            cu("cuMemcpyDtoH_v2", host, a, n)
            cu("cuCtxSynchronize")

        def d2d():
            for _ in range(D2D_BATCH):
                cu("cuMemcpyDtoD_v2", b, a, n)
            cu("cuCtxSynchronize")

        self.dog.start(f"first copies on GPU {i} ({g['bus_id']})")
        h2d()  # first touch: page mappings and clocks up, not timed
        d2d()
        self.dog.done()
        for key, fn, nbytes in (("h2d", h2d, n), ("d2h", d2h, n), ("d2d", d2d, n * D2D_BATCH)):
            runs = [self.timed(f"{key.upper()} copy on GPU {i} ({g['bus_id']})", fn, nbytes)
                    for _ in range(self.repeats)]
            runs = [r for r in runs if r is not None]
            g[key + "_runs"] = [round(r, 3) for r in runs]
            g[key + "_gbs"] = round(statistics.median(runs), 3) if runs else None

    def pair(self, gi, gj):
        """Peer-to-peer copies from GPU ``gi`` to ``gj`` (their first device buffers)."""
        c = ctypes
        i, j = gi["index"], gj["index"]
        p = {"src": i, "dst": j, "src_bus_id": gi["bus_id"], "dst_bus_id": gj["bus_id"]}
        can = c.c_int()
        self.cu("cuDeviceCanAccessPeer", c.byref(can), i, j)
        p["peer_access"] = bool(can.value)
        if can.value:
            for x, y in ((i, j), (j, i)):
                self.use(x)
                try:
                    self.cu("cuCtxEnablePeerAccess", self.ctx[y], 0)
                except CudaError as e:
                    if e.name != "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED":
                        raise
        src, dst = gi["_bufs"][1], gj["_bufs"][1]
        n = self.size

        def copy():
            self.cu("cuMemcpyPeer", dst, self.ctx[j], src, self.ctx[i], n)
            self.use(j)
            self.cu("cuCtxSynchronize")
            self.use(i)

        self.use(i)
        self.dog.start(f"first P2P copy GPU {i} -> GPU {j}")
        copy()
        self.dog.done()
        runs = [self.timed(f"P2P copy GPU {i} -> GPU {j}", copy, n) for _ in range(self.repeats)]
        runs = [r for r in runs if r is not None]
        p["runs"] = [round(r, 3) for r in runs]
        p["gbs"] = round(statistics.median(runs), 3) if runs else None
        return p

    def load(self, gpus, seconds, smi):
        """``seconds`` of D2D and H2D copies on every GPU at once, nvidia-smi read every second meanwhile."""
        stop = threading.Event()
        errors = {}
        copies = {}

        def work(g):
            i = g["index"]
            host, a, b = g["_bufs"]
            n = 0
            try:
                self.use(i)
                while not stop.is_set():
                    self.dog.start(f"copy under load on GPU {i} ({g['bus_id']})")
                    for _ in range(D2D_BATCH):
                        self.cu("cuMemcpyDtoD_v2", b, a, self.size)
                    self.cu("cuMemcpyHtoD_v2", a, host, self.size)
                    self.cu("cuCtxSynchronize")
                    self.dog.done()
                    n += 1
            except CudaError as e:
                self.dog.done()
                errors[i] = str(e)
            copies[i] = n

        threads = [threading.Thread(target=work, args=(g,), daemon=True) for g in gpus]
        for t in threads:
            t.start()
        samples = []
        t0 = time.monotonic()
        time.sleep(min(1.0, seconds))
        while True:
            samples.append(smi.read(time.monotonic() - t0))
            if time.monotonic() - t0 >= seconds:
                break
            time.sleep(min(1.0, max(0.0, seconds - (time.monotonic() - t0))))
        stop.set()
        for t in threads:
            while t.is_alive():
                t.join(0.2)
        return {"seconds": round(time.monotonic() - t0, 2),
                "field": smi.field.split(",")[2] if smi.field else None, "samples": samples,
                "rounds": {str(k): v for k, v in sorted(copies.items())},
                "errors": {str(k): v for k, v in sorted(errors.items())}}


class Smi:
    """``nvidia-smi --query-gpu`` during the load (the reasons' field name as this driver knows it)."""

    def __init__(self, command="nvidia-smi"):
        self.command = command
        self.field = None

    def _run(self, fields):
        try:
            rc, out, err, why = capped([self.command, "--query-gpu=" + fields, "--format=csv,noheader,nounits"],
                                       SMI_OUT_MAX, SMI_S)
        except FileNotFoundError:
            return None, "nvidia-smi not found"
        except OSError as e:
            return None, "nvidia-smi could not run: " + (e.strerror or str(e))
        if why:
            return None, "nvidia-smi " + why
        if rc != 0:
            return None, " ".join((out + err).split())[:200] or "nvidia-smi exit {}".format(rc)
        return out, None

    def read(self, at):
        fields = [self.field] if self.field else [SMI_FIELDS, SMI_FIELDS_OLD]
        err = None
        for f in fields:
            out, err = self._run(f)
            if out is not None:
                self.field = f
                rows = []
                for line in out.splitlines():
                    cells = [c.strip() for c in line.split(",")]
                    if len(cells) == 5:
                        rows.append({"index": cells[0], "bus_id": cells[1], "reasons": cells[2],
                                     "temperature_c": cells[3], "sm_mhz": cells[4]})
                if not rows and out.strip():
                    # Printed, but no row of the fields asked: damaged, said as such (never "no sample").
                    return {"t": round(at, 2), "error": "nvidia-smi printed no row of the {} fields asked: {!r}".format(
                        len(f.split(",")), out.strip()[:80])}
                return {"t": round(at, 2), "gpus": rows}
        return {"t": round(at, 2), "error": err}


#: The most of one nvidia-smi answer read during the load (bytes: a row is some 60 per GPU), and the seconds it
#: may take: past either it is ended, process group and all, and the sample says why (a flood of /dev/zero was read
#: whole into the probe's memory on the host under test; a child left holding the pipe held the read).
SMI_OUT_MAX = 1 << 20
SMI_S = 10


def capped(argv, cap, seconds):
    """Run ``argv`` in a process group of its own; ``(rc, stdout, stderr, why)``, each output at most ``cap`` bytes
    (decoded, undecodable bytes replaced).  ``why`` (else None): it printed more than ``cap`` or did not end within
    ``seconds``: its group is killed and its output not read.  Once the program itself has ended, what is already
    in the pipes is read and its group's leftovers are killed: a child that keeps the pipe open holds nothing."""
    import select
    import signal

    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    out_fd, err_fd = p.stdout.fileno(), p.stderr.fileno()
    got = {out_fd: [], err_fd: []}
    size = {fd: 0 for fd in got}
    open_fds = set(got)
    end = time.monotonic() + seconds
    why = None
    try:
        while open_fds:
            exited = p.poll() is not None
            left = end - time.monotonic()
            if left <= 0:
                why = "did not answer within {:g} s".format(seconds)
                break
            ready = select.select(list(open_fds), [], [], 0 if exited else min(left, 0.5))[0]
            if not ready:
                if exited:
                    break  # ended, its pipes drained: a leftover child's open end holds nothing
                continue
            for fd in ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    open_fds.discard(fd)
                    continue
                size[fd] += len(chunk)
                if size[fd] > cap:
                    why = "printed more than {} bytes (not read)".format(cap)
                    break
                got[fd].append(chunk)
            if why:
                break
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        p.stdout.close()
        p.stderr.close()
        rc = p.wait()
    out, err = (b"".join(got[fd]).decode("utf-8", "replace") for fd in (out_fd, err_fd))
    return rc, out, err, why


def measure(doc, args, dog):
    """Everything, filling ``doc`` as it goes (the watchdog prints what is there if a copy hangs)."""
    path = os.environ.get("BRINGUP_LIBCUDA") or LIBRARY
    # CUDA's device ordinals in PCI order, as nvidia-smi's indexes (CUDA's default puts the fastest first).
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    try:
        cu = Driver(path)
    except OSError:
        doc["error"] = f"{LIBRARY} not found: install the NVIDIA driver" if path == LIBRARY else \
            f"{path} could not be loaded (BRINGUP_LIBCUDA)"
        return
    c = ctypes
    try:
        cu("cuInit", 0)
        v = c.c_int()
        cu("cuDriverGetVersion", c.byref(v))
        doc["cuda_driver_version"] = v.value
        count = c.c_int()
        cu("cuDeviceGetCount", c.byref(count))
    except CudaError as e:
        doc["error"] = str(e)
        return
    if count.value == 0:
        doc["error"] = "the CUDA driver sees no GPU (cuDeviceGetCount: 0)"
        return
    probe = Probe(cu, args.size_mib << 20, args.repeats, dog)
    gpus = doc["gpus"]
    for i in range(count.value):
        g = {"index": i}
        gpus.append(g)
        try:
            g.update(probe.device(i))
            probe.gpu(g)
        except CudaError as e:
            dog.done()
            g["error"] = str(e)
    good = [g for g in gpus if "error" not in g]
    for a in range(len(good)):
        for b in range(a + 1, len(good)):
            try:
                doc["pairs"].append(probe.pair(good[a], good[b]))
            except CudaError as e:
                dog.done()
                doc["pairs"].append({"src": good[a]["index"], "dst": good[b]["index"],
                                     "src_bus_id": good[a]["bus_id"], "dst_bus_id": good[b]["bus_id"],
                                     "error": str(e)})
    if args.seconds > 0 and good:
        doc["load"] = probe.load(good, args.seconds, Smi(os.environ.get("BRINGUP_NVIDIA_SMI") or "nvidia-smi"))
    for g in gpus:
        bufs = g.pop("_bufs", None)
        if bufs is not None:
            try:
                probe.use(g["index"])
                probe.free(bufs)
            except CudaError:
                pass
    for i in probe.ctx:
        try:
            cu("cuDevicePrimaryCtxRelease_v2", i)
        except CudaError:
            pass


def public(doc):
    """``doc`` without the probe's private keys (buffers)."""
    return {k: ([{kk: vv for kk, vv in g.items() if not kk.startswith("_")} for g in v] if k == "gpus" else v)
            for k, v in doc.items()}


def main(argv=None):
    import argparse

    p = argparse.ArgumentParser(prog="probe", description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=10.0, help="load duration (0: no load)")
    p.add_argument("--size-mib", type=int, default=256, help="bytes per copy, MiB")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per figure (the median is reported)")
    p.add_argument("--watchdog", type=float, default=20.0, help="seconds one copy may take")
    args = p.parse_args(argv)
    if not (0 <= args.seconds <= 600 and 1 <= args.size_mib <= 4096 and 1 <= args.repeats <= 100
            and 0 < args.watchdog <= 600):
        print(json.dumps({"probe": VERSION, "error": "bad arguments: --seconds 0..600, --size-mib 1..4096, "
                          "--repeats 1..100, --watchdog 0..600", "gpus": [], "pairs": []}))
        return 2
    doc = {"probe": VERSION, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "size_mib": args.size_mib, "repeats": args.repeats, "watchdog_s": args.watchdog,
           "error": None, "gpus": [], "pairs": [], "load": None}
    dog = Watchdog(args.watchdog)
    t0 = time.monotonic()
    box = {}

    def body():
        try:
            measure(doc, args, dog)
        except Exception as e:  # noqa: BLE001 - the one document is printed whatever happens
            doc["error"] = f"probe failed: {type(e).__name__}: {e}"
        box["done"] = True

    worker = threading.Thread(target=body, daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.1)
        late = dog.overdue()
        if late:
            doc["error"] = f"{late} did not return within {args.watchdog:g} s (watchdog): the GPU hangs or is lost"
            doc["elapsed_s"] = round(time.monotonic() - t0, 2)
            sys.stdout.write(json.dumps(public(doc)) + "\n")
            sys.stdout.flush()
            os._exit(3)  # the stuck copy's thread cannot be joined: end the process, and with it the copy
    doc["elapsed_s"] = round(time.monotonic() - t0, 2)
    sys.stdout.write(json.dumps(public(doc)) + "\n")
    sys.stdout.flush()
    return 0 if not doc["error"] else 1


if __name__ == "__main__":
    sys.exit(main())
