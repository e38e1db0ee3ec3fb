/*
 * vsync-phase: a software vsync timer, as Chromium's and Firefox's are, aligned to the display's
 * real vblank phase from vsyncd's timing page: no message per frame.
 *
 *   cc vsync-phase.c $(pkg-config --cflags --libs vsync) -o vsync-phase
 *   ./vsync-phase [--frames N] [--margin-us US] [--display ID] [--socket PATH]
 *
 * Each frame it reads the display's timing (vsync_display_timing: a shared page under a
 * seqlock, no syscall), sleeps with clock_nanosleep(TIMER_ABSTIME) until US before the next
 * vblank the model predicts, and prints how far from that vblank it woke (negative: before it,
 * the margin a renderer has left). A page-only link keeps the display's record current: vsyncd
 * keeps the display's vblank events on and sends this program no ticks.
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <vsync/vsync.h>

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The primary display's id (or the first's), from vsyncd's list. */
static int primary_display(struct vsync_client *client, uint32_t *id) {
    struct vsync_display displays[VSYNC_MAX_DISPLAYS];
    int n = vsync_client_get_displays(client, displays, VSYNC_MAX_DISPLAYS, sizeof displays[0]);
    if (n <= 0) return n < 0 ? n : -VSYNC_ENODISPLAY;
    *id = displays[0].display_id;
    for (int i = 0; i < n && i < VSYNC_MAX_DISPLAYS; i++)
        if (displays[i].flags & VSYNC_DISPLAY_FLAG_PRIMARY) *id = displays[i].display_id;
    return 0;
}

int main(int argc, char **argv) {
    long frames = 120;
    int64_t margin_ns = 500000;
    uint32_t display_id = 0;
    const char *socket_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--frames") && i + 1 < argc) frames = atol(argv[++i]);
        else if (!strcmp(argv[i], "--margin-us") && i + 1 < argc) margin_ns = atol(argv[++i]) * 1000;
        else if (!strcmp(argv[i], "--display") && i + 1 < argc) display_id = (uint32_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--socket") && i + 1 < argc) socket_path = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--frames N] [--margin-us US] [--display ID] [--socket PATH]\n", argv[0]);
            return 64;
        }
    }
    struct vsync_client *client;
    int rc = vsync_client_connect(socket_path, &client);
    if (rc < 0) {
        fprintf(stderr, "vsync-phase: %s\n", vsync_client_last_error(NULL));
        return 1;
    }
    if (!display_id && (rc = primary_display(client, &display_id)) < 0) {
        fprintf(stderr, "vsync-phase: no display: %s\n", vsync_strerror(rc));
        return 1;
    }
    /* Page only: no ticks, but vsyncd keeps the display's vblank events on, so its record moves. */
    char selector[32];
    snprintf(selector, sizeof selector, "display:%u", display_id);
    struct vsync_link *link;
    if ((rc = vsync_link_create(client, selector, NULL, NULL, &link)) < 0 || (rc = vsync_link_set_page_only(link, true)) < 0) {
        fprintf(stderr, "vsync-phase: %s\n", vsync_client_last_error(client));
        return 1;
    }

    int64_t *errors = calloc((size_t)frames, sizeof *errors);
    long done = 0, waits = 0;
    while (done < frames) {
        /* The socket still needs reading (display events, a reconnect), never waiting here. */
        vsync_client_dispatch(client, 0);
        struct vsync_display_timing t;
        rc = vsync_display_timing(client, display_id, 0, &t);
        if (rc < 0 || t.period_ns == 0) {
            /* Not on the page yet (or not measured): wait on the socket a little, then retry. */
            if (++waits > 300) {
                fprintf(stderr, "vsync-phase: no timing for display %u: %s\n", display_id, vsync_strerror(rc));
                return 1;
            }
            vsync_client_dispatch(client, 10);
            continue;
        }
        uint64_t wake = t.next_ns - (uint64_t)margin_ns;
        if (wake <= vsync_now_ns()) { /* too close to this vblank: aim at the one after */
            vsync_display_timing(client, display_id, t.next_ns, &t);
            wake = t.next_ns - (uint64_t)margin_ns;
        }
        struct timespec ts = {(time_t)(wake / 1000000000u), (long)(wake % 1000000000u)};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        uint64_t woke = vsync_now_ns();
        int64_t from_vblank = (int64_t)woke - (int64_t)t.next_ns;
        errors[done++] = (int64_t)woke - (int64_t)wake;
        printf("vblank %" PRIu64 " at %.6f  woke %+.1f us from it (%+.1f us late on the timer)  period %.3f ns\n",
               t.next_sequence, t.next_ns / 1e9, from_vblank / 1e3, ((int64_t)woke - (int64_t)wake) / 1e3, t.period);
    }
    qsort(errors, (size_t)frames, sizeof *errors, cmp_i64);
    printf("%ld wakes, %.1f us before each predicted vblank: timer lateness p50 %.1f us, max %.1f us\n", frames,
           margin_ns / 1e3, errors[frames / 2] / 1e3, errors[frames - 1] / 1e3);
    free(errors);
    vsync_link_destroy(link);
    vsync_client_destroy(client);
    return 0;
}
