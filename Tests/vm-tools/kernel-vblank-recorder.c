/*
 * kernel-vblank-recorder: the kernel's own vblank events of one CRTC, independent of vsyncd, as
 * the truth the VM tests check vsyncd's ticks against (matched by sequence).
 *
 *   kernel-vblank-recorder [--device /dev/dri/card0] [--crtc ID] [--seconds S]
 *
 * Prints "<64-bit sequence> <timestamp ns>" per vblank (the kernel's CLOCK_MONOTONIC time_ns of
 * drmCrtcQueueSequence's event), flushed line by line. DEPTH requests are kept queued ahead, each
 * for an absolute sequence, so a recorder descheduled for up to DEPTH frames on a loaded machine
 * still records every vblank (the kernel sends each event when its vblank comes, whether or not
 * the recorder is running). While the CRTC is off (the queue fails with EINVAL) it retries every
 * 50 ms, so it records across a display going off and on, or lit only after it started. Turning
 * a CRTC off sends every pending event at once with the last vblank's sequence and time: repeated
 * lines, which readers drop. Built by the tests with: cc -O2 -I/usr/include/libdrm ... -ldrm
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xf86drm.h>
#include <xf86drmMode.h>

enum { DEPTH = 16 };

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

/* Requests in the kernel, and the sequence the next one is for. */
static int pending;
static uint64_t next_seq;
static void on_sequence(int fd, uint64_t sequence, uint64_t ns, uint64_t user) {
    (void)fd;
    (void)user;
    if (pending > 0) pending--;
    if (sequence >= next_seq) next_seq = sequence + 1;
    printf("%" PRIu64 " %" PRIu64 "\n", sequence, ns);
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The CRTC driving the first connected connector, else the first CRTC: what vsyncd's primary is on vkms. */
static uint32_t first_crtc(int fd) {
    drmModeRes *res = drmModeGetResources(fd);
    uint32_t crtc = 0;
    if (!res) return 0;
    for (int i = 0; i < res->count_connectors && !crtc; i++) {
        drmModeConnector *c = drmModeGetConnector(fd, res->connectors[i]);
        if (c && c->connection == DRM_MODE_CONNECTED && c->encoder_id) {
            drmModeEncoder *e = drmModeGetEncoder(fd, c->encoder_id);
            if (e) crtc = e->crtc_id, drmModeFreeEncoder(e);
        }
        if (c) drmModeFreeConnector(c);
    }
    if (!crtc && res->count_crtcs > 0) crtc = res->crtcs[0];
    drmModeFreeResources(res);
    return crtc;
}

int main(int argc, char **argv) {
    const char *device = "/dev/dri/card0";
    uint32_t crtc = 0;
    double seconds = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--device")) device = argv[i + 1];
        else if (!strcmp(argv[i], "--crtc")) crtc = (uint32_t)strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
        else { fprintf(stderr, "kernel-vblank-recorder: unknown option %s\n", argv[i]); return 64; }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    int fd = open(device, O_RDWR | O_CLOEXEC);
    if (fd < 0) { fprintf(stderr, "kernel-vblank-recorder: open %s: %s\n", device, strerror(errno)); return 1; }
    /* Not master: a recorder must not stand in the way of a mode set. */
    drmDropMaster(fd);
    if (!crtc) crtc = first_crtc(fd);
    if (!crtc) { fprintf(stderr, "kernel-vblank-recorder: no CRTC on %s\n", device); return 1; }
    drmEventContext ctx = {.version = 4, .sequence_handler = on_sequence};
    uint64_t end = seconds > 0 ? now_ns() + (uint64_t)(seconds * 1e9) : 0;
    while (!stop && (!end || now_ns() < end)) {
        if (pending == 0) {
            /* Start, or the CRTC came back: aim at the next vblank, then fill up behind it. */
            uint64_t queued_seq = 0;
            if (drmCrtcQueueSequence(fd, crtc, DRM_CRTC_SEQUENCE_RELATIVE | DRM_CRTC_SEQUENCE_NEXT_ON_MISS, 1,
                                     &queued_seq, 1) != 0) {
                if (errno != EINVAL) {
                    fprintf(stderr, "kernel-vblank-recorder: drmCrtcQueueSequence on CRTC %u: %s\n", crtc, strerror(errno));
                    return 1;
                }
                usleep(50000); /* CRTC off: wait for it */
                continue;
            }
            pending = 1;
            next_seq = queued_seq + 1;
        }
        while (pending < DEPTH) {
            uint64_t queued_seq = 0;
            if (drmCrtcQueueSequence(fd, crtc, DRM_CRTC_SEQUENCE_NEXT_ON_MISS, next_seq, &queued_seq, 1) != 0) break;
            pending++;
            next_seq = queued_seq + 1;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int n = poll(&pfd, 1, 200);
        if (n > 0) {
            drmHandleEvent(fd, &ctx);
        } else if (n == 0) {
            /* No event in 200 ms: the CRTC went off or its count restarted; aim afresh. Requests
             * still in the kernel only repeat lines. */
            pending = 0;
        }
    }
    return 0;
}
