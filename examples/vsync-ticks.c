/*
 * vsync-ticks: print frame ticks from vsyncd at a chosen rate, from a plain poll() loop.
 *
 *   cc vsync-ticks.c $(pkg-config --cflags --libs vsync) -o vsync-ticks
 *   ./vsync-ticks [--fps N] [--frames N] [--work-ms MS] [--display NAME] [--socket PATH]
 *
 * The loop is the shape any program with its own event loop uses: poll the client's fd with
 * your other fds, call vsync_client_dispatch(client, 0) when it is readable.
 *
 * With --work-ms, frame pacing: each frame comes MS before the vblank it is for (its target),
 * the time a renderer would have to draw and present by target_timestamp_ns.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vsync/vsync.h>

struct state {
    long frames_wanted;
    long frames_seen;
};

static void on_frame(struct vsync_link *link, const struct vsync_frame *f, void *user) {
    struct state *s = user;
    uint64_t now = vsync_now_ns();
    /* target_sequence and the timelines came in libvsync 0.3.0: check struct_size for them. */
    int paced = f->struct_size >= offsetof(struct vsync_frame, timelines) + sizeof f->timelines;
    printf("seq %" PRIu64 "  t %.6f  target %.6f  interval %.3f ms  divisor %u  skipped %u  flags %s%s%s  latency %" PRIu64 " us",
           f->sequence, f->timestamp_ns / 1e9, f->target_timestamp_ns / 1e9, f->interval_ns / 1e6, f->divisor,
           f->skipped, (f->flags & VSYNC_FRAME_HARDWARE) ? "hardware" : "",
           (f->flags & VSYNC_FRAME_PREDICTED) ? "predicted" : "", (f->flags & VSYNC_FRAME_SYNTHETIC) ? "synthetic" : "",
           (now - f->timestamp_ns) / 1000);
    if (paced)
        printf("  target_seq %" PRIu64 "  lead %" PRId64 " us  next %" PRIu64, f->target_sequence,
               ((int64_t)f->target_timestamp_ns - (int64_t)now) / 1000, f->timelines[1].sequence);
    printf("\n");
    fflush(stdout);
    if (s->frames_wanted > 0 && ++s->frames_seen >= s->frames_wanted) vsync_link_set_paused(link, true);
}

static void on_display(struct vsync_link *link, const struct vsync_display_event *e, void *user) {
    (void)link;
    (void)user;
    const char *kind = e->kind == VSYNC_DISPLAY_MODE_CHANGED ? "mode changed"
                       : e->kind == VSYNC_DISPLAY_OFF       ? "off"
                       : e->kind == VSYNC_DISPLAY_WAITING   ? "not there yet, waiting"
                                                            : "on";
    printf("display %u %s: %.3f Hz\n", e->display_id, kind, e->refresh_mhz / 1000.0);
    fflush(stdout);
}

static void on_error(struct vsync_link *link, int code, const char *message, void *user) {
    (void)link;
    (void)user;
    fprintf(stderr, "vsync-ticks: %s (%s)\n", message, vsync_strerror(code));
}

static void usage(const char *why) {
    fprintf(stderr, "vsync-ticks: %s\nusage: vsync-ticks [--fps N] [--frames N] [--work-ms MS] [--display NAME] [--socket PATH]\n", why);
    exit(64);
}

int main(int argc, char **argv) {
    double fps = 0, work_ms = 0;
    const char *display = NULL, *socket_path = NULL;
    struct state s = {0, 0};
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) usage("every option takes a value");
        if (!strcmp(argv[i], "--fps")) fps = atof(argv[++i]);
        else if (!strcmp(argv[i], "--frames")) s.frames_wanted = atol(argv[++i]);
        else if (!strcmp(argv[i], "--work-ms")) work_ms = atof(argv[++i]);
        else if (!strcmp(argv[i], "--display")) display = argv[++i];
        else if (!strcmp(argv[i], "--socket")) socket_path = argv[++i];
        else usage("unknown option");
    }

    struct vsync_client *client;
    int rc = vsync_client_connect(socket_path, &client);
    if (rc < 0) {
        fprintf(stderr, "vsync-ticks: %s\n", vsync_client_last_error(NULL));
        return 1;
    }
    struct vsync_link *link;
    if ((rc = vsync_link_create(client, display, on_frame, &s, &link)) < 0) {
        fprintf(stderr, "vsync-ticks: %s\n", vsync_client_last_error(client));
        return 64;
    }
    vsync_link_set_display_callback(link, on_display);
    vsync_link_set_error_callback(link, on_error);
    if ((rc = vsync_link_set_rate(link, 0, 0, fps)) < 0) {
        fprintf(stderr, "vsync-ticks: --fps %g: %s\n", fps, vsync_client_last_error(client));
        return 64;
    }

    if (work_ms > 0 && (rc = vsync_link_set_work_duration(link, (uint64_t)(work_ms * 1e6))) < 0) {
        fprintf(stderr, "vsync-ticks: --work-ms %g: %s\n", work_ms, vsync_client_last_error(client));
        return 64;
    }

    struct pollfd pfd = {.fd = vsync_client_get_fd(client), .events = POLLIN};
    while (s.frames_wanted == 0 || s.frames_seen < s.frames_wanted) {
        if (poll(&pfd, 1, -1) < 0 && errno != EINTR) {
            perror("vsync-ticks: poll");
            return 1;
        }
        if ((rc = vsync_client_dispatch(client, 0)) < 0) {
            fprintf(stderr, "vsync-ticks: %s\n", vsync_strerror(rc));
            return 1;
        }
    }
    uint64_t refresh_mhz = 0, period_ns = 0;
    vsync_link_get_refresh(link, &refresh_mhz, &period_ns);
    printf("%ld frames; display %.3f Hz (max %d fps), period %" PRIu64 " ns\n", s.frames_seen, refresh_mhz / 1000.0,
           vsync_link_get_max_fps(link), period_ns);
    vsync_link_destroy(link);
    vsync_client_destroy(client);
    return 0;
}
