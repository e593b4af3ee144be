/* TEST DOUBLE of libcuda.so.1: the few CUDA driver API symbols bringup/acceptance/probe.py calls, no GPU.
 *
 * Built by tests/unit/test_accept_probe.py with gcc into a temporary folder as libcuda.so.1, and loaded by
 * the probe through BRINGUP_LIBCUDA.  It is NOT NVIDIA's library: copies sleep for size / rate instead of
 * moving data, so the probe's timing, error naming and watchdog can be exercised on a machine without a GPU.
 *
 * FAKE_CUDA_MODE (or /run/fake_cuda_mode):  ok (default) | nogpu (cuDeviceGetCount: 0) | initfail (cuInit: CUDA_ERROR_NO_DEVICE)
 *                  | lost (the 2nd device copy fails with CUDA_ERROR_LAUNCH_FAILED: the GPU lost mid-test)
 *                  | hang (the 2nd device copy never returns)
 * FAKE_CUDA_GPUS:  how many GPUs (default 1).
 * FAKE_CUDA_H2D_GBS, FAKE_CUDA_D2D_GBS, FAKE_CUDA_P2P_GBS: the rates the copies sleep at (default 50, 2000, 40).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
#define OK 0
#define CUDA_ERROR_NO_DEVICE 100
#define CUDA_ERROR_LAUNCH_FAILED 719

static int copies = 0;

/* The mode: FAKE_CUDA_MODE, else the first word of /run/fake_cuda_mode (a sandbox host, whose SSH session
 * carries no environment of the test's), else ok. */
static const char *mode(void) {
    static char buf[32];
    const char *m = getenv("FAKE_CUDA_MODE");
    if (m) return m;
    FILE *f = fopen("/run/fake_cuda_mode", "r");
    if (f && fscanf(f, "%31s", buf) == 1) { fclose(f); return buf; }
    if (f) fclose(f);
    return "ok";
}
static double rate(const char *name, double dflt) { const char *v = getenv(name); return v ? atof(v) : dflt; }
static int gpus(void) { const char *v = getenv("FAKE_CUDA_GPUS"); return v ? atoi(v) : 1; }

static void nap(size_t bytes, double gbs) {
    double s = (double)bytes / (gbs * 1e9);
    struct timespec ts = { (time_t)s, (long)((s - (time_t)s) * 1e9) };
    nanosleep(&ts, NULL);
}

static CUresult copy(size_t bytes, double gbs) {
    copies++;
    if (copies == 2 && strcmp(mode(), "lost") == 0) return CUDA_ERROR_LAUNCH_FAILED;
    if (copies == 2 && strcmp(mode(), "hang") == 0) for (;;) pause();
    nap(bytes, gbs);
    return OK;
}

CUresult cuInit(unsigned f) { (void)f; return strcmp(mode(), "initfail") == 0 ? CUDA_ERROR_NO_DEVICE : OK; }
CUresult cuDriverGetVersion(int *v) { *v = 13000; return OK; }
CUresult cuDeviceGetCount(int *n) { *n = strcmp(mode(), "nogpu") == 0 ? 0 : gpus(); return OK; }
CUresult cuDeviceGet(int *d, int i) { *d = i; return OK; }
CUresult cuDeviceGetName(char *s, int len, int d) { snprintf(s, len, "Fake GPU %d (test double)", d); return OK; }
CUresult cuDeviceGetPCIBusId(char *s, int len, int d) { snprintf(s, len, "0000:%02X:00.0", 0x18 + d); return OK; }
CUresult cuDevicePrimaryCtxRetain(void **c, int d) { *c = (void *)(intptr_t)(d + 1); return OK; }
CUresult cuDevicePrimaryCtxRelease_v2(int d) { (void)d; return OK; }
CUresult cuCtxSetCurrent(void *c) { (void)c; return OK; }
CUresult cuCtxSynchronize(void) { return OK; }
CUresult cuMemAllocHost_v2(void **p, size_t n) { *p = malloc(n ? n : 1); return *p ? OK : 2; }
CUresult cuMemFreeHost(void *p) { free(p); return OK; }
static uint64_t next = 0x100000;
CUresult cuMemAlloc_v2(uint64_t *p, size_t n) { *p = next; next += n + 4096; return OK; }
CUresult cuMemFree_v2(uint64_t p) { (void)p; return OK; }
CUresult cuMemcpyHtoD_v2(uint64_t d, const void *h, size_t n) { (void)d; (void)h; return copy(n, rate("FAKE_CUDA_H2D_GBS", 50)); }
CUresult cuMemcpyDtoH_v2(void *h, uint64_t d, size_t n) { (void)d; (void)h; return copy(n, rate("FAKE_CUDA_H2D_GBS", 50)); }
CUresult cuMemcpyDtoD_v2(uint64_t a, uint64_t b, size_t n) { (void)a; (void)b; return copy(n, rate("FAKE_CUDA_D2D_GBS", 2000)); }
CUresult cuDeviceCanAccessPeer(int *can, int a, int b) { (void)a; (void)b; *can = 1; return OK; }
CUresult cuCtxEnablePeerAccess(void *c, unsigned f) { (void)c; (void)f; return OK; }
CUresult cuMemcpyPeer(uint64_t d, void *dc, uint64_t s, void *sc, size_t n) {
    (void)d; (void)dc; (void)s; (void)sc; return copy(n, rate("FAKE_CUDA_P2P_GBS", 40)); }
CUresult cuGetErrorName(CUresult e, const char **s) {
    switch (e) {
    case CUDA_ERROR_NO_DEVICE: *s = "CUDA_ERROR_NO_DEVICE"; return OK;
    case CUDA_ERROR_LAUNCH_FAILED: *s = "CUDA_ERROR_LAUNCH_FAILED"; return OK;
    default: *s = 0; return 1;
    }
}
