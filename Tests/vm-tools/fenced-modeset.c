/*
 * fenced-modeset: a compositor's mode set, as weston makes it, for the VM tests: the
 * kernel flushes the old mode's pending vblank events after the new mode is readable.
 *
 *   fenced-modeset [--device /dev/dri/card0] [--fence-ms MS] [--hold-ms MS] [--signal-on FILE:TEXT] HZ...
 *
 * For each HZ: a nonblocking atomic commit (ALLOW_MODESET) of a 1024x768 mode at exactly HZ on
 * the first connected connector's CRTC, whose primary plane waits on an sw_sync fence. The
 * kernel swaps in the new state at once (drmModeGetCrtc shows the new mode) but turns the CRTC
 * off for the mode set, which flushes every pending vblank event with the last count and time,
 * only when the fence signals, MS later: the window in which a non-master reader learns of the
 * new mode before it reads the old mode's flushed events. With --signal-on, the fence signals
 * as soon as FILE holds one more line containing TEXT than at the commit (a client's log of
 * vsyncd's modeChanged event), or after MS at the latest: so the flush comes right after the
 * reader acted on the new mode, before the old mode's next vblank. Then it waits for the commit's event
 * and holds the mode --hold-ms. It stays DRM master throughout (closing would let fbdev restore
 * its own mode). Prints one line per step: "committed HZ NS", "signalled NS", "done NS"
 * (CLOCK_MONOTONIC). Needs CONFIG_SW_SYNC and debugfs (mounted here if it is not).
 * Built by the tests with: cc -O2 -I/usr/include/libdrm fenced-modeset.c -ldrm
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <time.h>
#include <unistd.h>
#include <xf86drm.h>
#include <xf86drmMode.h>

/* sw_sync's ioctls (drivers/dma-buf/sw_sync.c; no uapi header carries them). */
struct sw_sync_create_fence_data {
    uint32_t value;
    char name[32];
    int32_t fence;
};
#define SW_SYNC_IOC_CREATE_FENCE _IOWR('W', 0, struct sw_sync_create_fence_data)
#define SW_SYNC_IOC_INC _IOW('W', 1, uint32_t)

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "fenced-modeset: %s: %s\n", what, strerror(errno));
    exit(1);
}

static uint32_t prop_id(int fd, uint32_t object, uint32_t type, const char *name) {
    drmModeObjectProperties *props = drmModeObjectGetProperties(fd, object, type);
    uint32_t id = 0;
    for (uint32_t i = 0; props && i < props->count_props && !id; i++) {
        drmModePropertyRes *p = drmModeGetProperty(fd, props->props[i]);
        if (p && !strcmp(p->name, name)) id = p->prop_id;
        drmModeFreeProperty(p);
    }
    drmModeFreeObjectProperties(props);
    if (!id) { fprintf(stderr, "fenced-modeset: no property %s on object %u\n", name, object); exit(1); }
    return id;
}

static uint64_t prop_value(int fd, uint32_t object, uint32_t type, const char *name) {
    drmModeObjectProperties *props = drmModeObjectGetProperties(fd, object, type);
    uint64_t value = 0;
    for (uint32_t i = 0; props && i < props->count_props; i++) {
        drmModePropertyRes *p = drmModeGetProperty(fd, props->props[i]);
        if (p && !strcmp(p->name, name)) value = props->prop_values[i];
        drmModeFreeProperty(p);
    }
    drmModeFreeObjectProperties(props);
    return value;
}

/* Lines of `path` containing `text`. */
static int count_lines(const char *path, const char *text) {
    FILE *f = fopen(path, "r");
    char line[4096];
    int n = 0;
    while (f && fgets(line, sizeof line, f)) n += strstr(line, text) != NULL;
    if (f) fclose(f);
    return n;
}

static int flip_done;
static void on_flip(int fd, unsigned seq, unsigned sec, unsigned usec, unsigned crtc, void *data) {
    (void)fd, (void)seq, (void)sec, (void)usec, (void)crtc, (void)data;
    flip_done = 1;
}

int main(int argc, char **argv) {
    const char *device = "/dev/dri/card0";
    int fence_ms = 1500, hold_ms = 300, first = 1;
    char *watch_file = NULL, *watch_text = NULL;
    for (; first + 1 < argc && argv[first][0] == '-'; first += 2) {
        if (!strcmp(argv[first], "--device")) device = argv[first + 1];
        else if (!strcmp(argv[first], "--fence-ms")) fence_ms = atoi(argv[first + 1]);
        else if (!strcmp(argv[first], "--hold-ms")) hold_ms = atoi(argv[first + 1]);
        else if (!strcmp(argv[first], "--signal-on") && strchr(argv[first + 1], ':')) {
            watch_file = argv[first + 1];
            watch_text = strchr(watch_file, ':');
            *watch_text++ = 0;
        }
        else { fprintf(stderr, "fenced-modeset: unknown option %s\n", argv[first]); return 64; }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    int timeline = open("/sys/kernel/debug/sync/sw_sync", O_RDWR | O_CLOEXEC);
    if (timeline < 0 && mount("debugfs", "/sys/kernel/debug", "debugfs", 0, NULL) == 0)
        timeline = open("/sys/kernel/debug/sync/sw_sync", O_RDWR | O_CLOEXEC);
    if (timeline < 0) die("open /sys/kernel/debug/sync/sw_sync (a kernel with CONFIG_SW_SYNC and CONFIG_DEBUG_FS)");
    int fd = open(device, O_RDWR | O_CLOEXEC);
    if (fd < 0) die(device);
    if (drmSetClientCap(fd, DRM_CLIENT_CAP_UNIVERSAL_PLANES, 1) || drmSetClientCap(fd, DRM_CLIENT_CAP_ATOMIC, 1)) die("atomic client caps");
    if (drmSetMaster(fd) && !drmIsMaster(fd)) die("drmSetMaster");

    drmModeRes *res = drmModeGetResources(fd);
    if (!res) die("drmModeGetResources");
    uint32_t connector = 0, crtc = 0;
    for (int i = 0; i < res->count_connectors && !connector; i++) {
        drmModeConnector *c = drmModeGetConnector(fd, res->connectors[i]);
        if (c && c->connection == DRM_MODE_CONNECTED) {
            connector = c->connector_id;
            drmModeEncoder *e = c->encoder_id ? drmModeGetEncoder(fd, c->encoder_id) : NULL;
            crtc = e && e->crtc_id ? e->crtc_id : (uint32_t)res->crtcs[0];
            drmModeFreeEncoder(e);
        }
        drmModeFreeConnector(c);
    }
    if (!connector) { fprintf(stderr, "fenced-modeset: no connected connector on %s\n", device); return 1; }
    int pipe = 0;
    while (pipe < res->count_crtcs && res->crtcs[pipe] != crtc) pipe++;
    drmModePlaneRes *planes = drmModeGetPlaneResources(fd);
    uint32_t plane = 0;
    for (uint32_t i = 0; planes && i < planes->count_planes && !plane; i++) {
        drmModePlane *p = drmModeGetPlane(fd, planes->planes[i]);
        if (p && (p->possible_crtcs & (1u << pipe)) &&
            prop_value(fd, p->plane_id, DRM_MODE_OBJECT_PLANE, "type") == DRM_PLANE_TYPE_PRIMARY)
            plane = p->plane_id;
        drmModeFreePlane(p);
    }
    if (!plane) { fprintf(stderr, "fenced-modeset: no primary plane for CRTC %u\n", crtc); return 1; }

    const uint32_t w = 1024, h = 768;
    struct drm_mode_create_dumb dumb = {.width = w, .height = h, .bpp = 32};
    if (drmIoctl(fd, DRM_IOCTL_MODE_CREATE_DUMB, &dumb)) die("DRM_IOCTL_MODE_CREATE_DUMB");
    uint32_t fb = 0;
    if (drmModeAddFB(fd, w, h, 24, 32, dumb.pitch, dumb.handle, &fb)) die("drmModeAddFB");

    uint32_t conn_crtc = prop_id(fd, connector, DRM_MODE_OBJECT_CONNECTOR, "CRTC_ID");
    uint32_t mode_id = prop_id(fd, crtc, DRM_MODE_OBJECT_CRTC, "MODE_ID");
    uint32_t active = prop_id(fd, crtc, DRM_MODE_OBJECT_CRTC, "ACTIVE");
    const char *names[] = {"FB_ID", "CRTC_ID", "SRC_X", "SRC_Y", "SRC_W", "SRC_H", "CRTC_X", "CRTC_Y", "CRTC_W", "CRTC_H", "IN_FENCE_FD"};
    uint32_t pp[11];
    for (int i = 0; i < 11; i++) pp[i] = prop_id(fd, plane, DRM_MODE_OBJECT_PLANE, names[i]);

    drmEventContext ctx = {.version = 3, .page_flip_handler2 = on_flip};
    for (int step = first; step < argc; step++) {
        double hz = atof(argv[step]);
        /* The vkms default's blanking (1344x806 total), the pixel clock set for exactly HZ. */
        drmModeModeInfo mode = {.hdisplay = w, .hsync_start = 1048, .hsync_end = 1184, .htotal = 1344,
                                .vdisplay = h, .vsync_start = 771, .vsync_end = 777, .vtotal = 806,
                                .flags = DRM_MODE_FLAG_NHSYNC | DRM_MODE_FLAG_NVSYNC, .type = DRM_MODE_TYPE_USERDEF};
        mode.clock = (uint32_t)(hz * 1344 * 806 / 1000 + 0.5);
        mode.vrefresh = (uint32_t)(hz + 0.5);
        snprintf(mode.name, sizeof mode.name, "%ux%u@%.3f", w, h, hz);
        uint32_t blob = 0;
        if (drmModeCreatePropertyBlob(fd, &mode, sizeof mode, &blob)) die("drmModeCreatePropertyBlob");
        struct sw_sync_create_fence_data fence = {.value = (uint32_t)(step - first + 1)};
        snprintf(fence.name, sizeof fence.name, "modeset-%d", step - first);
        if (ioctl(timeline, SW_SYNC_IOC_CREATE_FENCE, &fence)) die("SW_SYNC_IOC_CREATE_FENCE");

        drmModeAtomicReq *req = drmModeAtomicAlloc();
        drmModeAtomicAddProperty(req, connector, conn_crtc, crtc);
        drmModeAtomicAddProperty(req, crtc, mode_id, blob);
        drmModeAtomicAddProperty(req, crtc, active, 1);
        uint64_t values[11] = {fb, crtc, 0, 0, (uint64_t)w << 16, (uint64_t)h << 16, 0, 0, w, h, (uint64_t)fence.fence};
        for (int i = 0; i < 11; i++) drmModeAtomicAddProperty(req, plane, pp[i], values[i]);
        flip_done = 0;
        int seen = watch_file ? count_lines(watch_file, watch_text) : 0;
        if (drmModeAtomicCommit(fd, req, DRM_MODE_ATOMIC_NONBLOCK | DRM_MODE_ATOMIC_ALLOW_MODESET | DRM_MODE_PAGE_FLIP_EVENT, NULL))
            die("drmModeAtomicCommit");
        drmModeAtomicFree(req);
        close(fence.fence);
        printf("committed %.3f %" PRIu64 "\n", hz, now_ns());
        uint64_t deadline = now_ns() + (uint64_t)fence_ms * 1000000u;
        if (watch_file) {
            while (now_ns() < deadline && count_lines(watch_file, watch_text) <= seen) usleep(500);
        } else {
            usleep((useconds_t)fence_ms * 1000);
        }
        uint32_t one = 1;
        if (ioctl(timeline, SW_SYNC_IOC_INC, &one)) die("SW_SYNC_IOC_INC");
        printf("signalled %" PRIu64 "\n", now_ns());
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        while (!flip_done && poll(&pfd, 1, 5000) > 0) drmHandleEvent(fd, &ctx);
        if (!flip_done) { fprintf(stderr, "fenced-modeset: the commit for %.3f Hz never completed\n", hz); return 1; }
        printf("done %" PRIu64 "\n", now_ns());
        drmModeDestroyPropertyBlob(fd, blob);
        usleep((useconds_t)hold_ms * 1000);
    }
    return 0;
}
