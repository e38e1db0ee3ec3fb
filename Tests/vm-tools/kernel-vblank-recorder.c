/*
 * kernel-vblank-recorder: the kernel's own vblank events of one CRTC, independent of vsyncd, as
 * the truth the VM tests check vsyncd's ticks against (matched by sequence).
 *
 *   kernel-vblank-recorder [--device /dev/dri/card0] [--crtc ID] [--seconds S]
 *
 * Prints "<64-bit sequence> <timestamp ns>" per vblank (the kernel's CLOCK_MONOTONIC time_ns of
 * drmCrtcQueueSequence's event), flushed line by line. While the CRTC is off (the queue fails
 * with EINVAL) it retries every 50 ms, so it records across a display going off and on, or lit
 * only after it started. The next event is queued before a line is written, so writing never
 * makes it miss one. Built by the tests with: cc -O2 -I/usr/include/libdrm ... -ldrm
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

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

static int queued, have_line;
static uint64_t line_seq, line_ns;
static void on_sequence(int fd, uint64_t sequence, uint64_t ns, uint64_t user) {
    (void)fd;
    (void)user;
    queued = 0;
    have_line = 1;
    line_seq = sequence;
    line_ns = ns;
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
        if (!queued) {
            uint64_t queued_seq = 0;
            if (drmCrtcQueueSequence(fd, crtc, DRM_CRTC_SEQUENCE_RELATIVE | DRM_CRTC_SEQUENCE_NEXT_ON_MISS, 1,
                                     &queued_seq, 1) != 0) {
                if (errno != EINVAL) {
                    fprintf(stderr, "kernel-vblank-recorder: drmCrtcQueueSequence on CRTC %u: %s\n", crtc, strerror(errno));
                    return 1;
                }
                if (have_line) have_line = 0, printf("%" PRIu64 " %" PRIu64 "\n", line_seq, line_ns);
                usleep(50000); /* CRTC off: wait for it */
                continue;
            }
            queued = 1;
        }
        if (have_line) {
            have_line = 0;
            printf("%" PRIu64 " %" PRIu64 "\n", line_seq, line_ns);
        }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int n = poll(&pfd, 1, 200);
        if (n > 0) {
            /* The handler keeps the line; the loop queues the next request, then prints it. */
            drmHandleEvent(fd, &ctx);
        } else if (n == 0 && queued) {
            /* No event in 200 ms: the CRTC may have gone off, which drops the request. */
            queued = 0;
        }
    }
    return 0;
}
