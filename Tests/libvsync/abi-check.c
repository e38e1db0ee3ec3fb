/*
 * abi-check: drives libvsync through its C ABI for Tests/DaemonTests/LibvsyncTests.swift and
 * prints what happened, one fact per line, for the Swift test to check.
 *
 *   abi-check strerror                  every code's vsync_strerror line
 *   abi-check layout                    sizeof/offsetof of the public structs
 *   abi-check connect SOCKET            one connect; its code and last-error line
 *   abi-check run SOCKET FRAMES         a link at full rate that, on its 3rd frame, destroys
 *                                       itself from its own callback and makes one at 30 fps;
 *                                       then runs until FRAMES frames came after an error
 *                                       (the test restarts vsyncd meanwhile)
 */
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vsync/vsync.h>

static struct vsync_client *client;
static struct vsync_link *second;
static long frames, frames_after_error = -1;

static void on_error(struct vsync_link *link, int code, const char *message, void *user) {
    (void)user;
    printf("error link=%s code=%d message=%s\n", link == second ? "second" : "first", code, message);
    if (frames_after_error < 0) frames_after_error = 0;
}

static void on_second(struct vsync_link *link, const struct vsync_frame *f, void *user) {
    (void)link;
    (void)user;
    frames++;
    if (frames_after_error >= 0) frames_after_error++;
    printf("frame link=second seq=%llu divisor=%u skipped=%u size=%u\n", (unsigned long long)f->sequence,
           f->divisor, f->skipped, f->struct_size);
}

static void on_first(struct vsync_link *link, const struct vsync_frame *f, void *user) {
    long *count = user;
    printf("frame link=first seq=%llu divisor=%u skipped=%u size=%u\n", (unsigned long long)f->sequence, f->divisor,
           f->skipped, f->struct_size);
    if (++*count == 3) {
        vsync_link_destroy(link);
        printf("destroyed first\n");
        vsync_link_create(client, "primary", on_second, NULL, &second);
        vsync_link_set_error_callback(second, on_error);
        if (vsync_link_set_rate(second, 0, 0, 30) != 0) printf("set_rate failed\n");
        if (vsync_link_set_rate(second, 40, 10, 0) != -VSYNC_EINVAL) printf("bad range accepted\n");
    }
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 2 && !strcmp(argv[1], "strerror")) {
        for (int code = 1; code <= 133; code++) printf("%d %s\n", code, vsync_strerror(-code));
        printf("positive %s\n", vsync_strerror(VSYNC_ENODAEMON));
        printf("unknown %s\n", vsync_strerror(999));
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "layout")) {
        printf("vsync_frame %zu struct_size=%zu display_id=%zu sequence=%zu timestamp_ns=%zu target_timestamp_ns=%zu "
               "duration_ns=%zu skipped=%zu flags=%zu interval_ns=%zu received_ns=%zu divisor=%zu reserved=%zu "
               "target_sequence=%zu timeline_count=%zu reserved2=%zu timelines=%zu generation=%zu reserved3=%zu\n",
               sizeof(struct vsync_frame), offsetof(struct vsync_frame, struct_size),
               offsetof(struct vsync_frame, display_id), offsetof(struct vsync_frame, sequence),
               offsetof(struct vsync_frame, timestamp_ns), offsetof(struct vsync_frame, target_timestamp_ns),
               offsetof(struct vsync_frame, duration_ns), offsetof(struct vsync_frame, skipped),
               offsetof(struct vsync_frame, flags), offsetof(struct vsync_frame, interval_ns),
               offsetof(struct vsync_frame, received_ns), offsetof(struct vsync_frame, divisor),
               offsetof(struct vsync_frame, reserved), offsetof(struct vsync_frame, target_sequence),
               offsetof(struct vsync_frame, timeline_count), offsetof(struct vsync_frame, reserved2),
               offsetof(struct vsync_frame, timelines), offsetof(struct vsync_frame, generation),
               offsetof(struct vsync_frame, reserved3));
        printf("vsync_display %zu struct_size=%zu display_id=%zu crtc_id=%zu connector_id=%zu state=%zu flags=%zu "
               "refresh_mhz=%zu period_ns=%zu width=%zu height=%zu name=%zu device_path=%zu bus_path=%zu edid_make=%zu "
               "edid_model=%zu edid_serial=%zu generation=%zu residual_rms_ns=%zu residual_p99_ns=%zu "
               "residual_samples=%zu min_interval_ns=%zu max_interval_ns=%zu\n",
               sizeof(struct vsync_display), offsetof(struct vsync_display, struct_size),
               offsetof(struct vsync_display, display_id), offsetof(struct vsync_display, crtc_id),
               offsetof(struct vsync_display, connector_id), offsetof(struct vsync_display, state),
               offsetof(struct vsync_display, flags), offsetof(struct vsync_display, refresh_mhz),
               offsetof(struct vsync_display, period_ns), offsetof(struct vsync_display, width),
               offsetof(struct vsync_display, height), offsetof(struct vsync_display, name),
               offsetof(struct vsync_display, device_path), offsetof(struct vsync_display, bus_path),
               offsetof(struct vsync_display, edid_make), offsetof(struct vsync_display, edid_model),
               offsetof(struct vsync_display, edid_serial), offsetof(struct vsync_display, generation),
               offsetof(struct vsync_display, residual_rms_ns), offsetof(struct vsync_display, residual_p99_ns),
               offsetof(struct vsync_display, residual_samples), offsetof(struct vsync_display, min_interval_ns),
               offsetof(struct vsync_display, max_interval_ns));
        printf("vsync_display_event %zu flags=%zu min_interval_ns=%zu max_interval_ns=%zu monotonic_ns=%zu realtime_ns=%zu\n",
               sizeof(struct vsync_display_event), offsetof(struct vsync_display_event, flags),
               offsetof(struct vsync_display_event, min_interval_ns), offsetof(struct vsync_display_event, max_interval_ns),
               offsetof(struct vsync_display_event, monotonic_ns), offsetof(struct vsync_display_event, realtime_ns));
        return 0;
    }
    if (argc >= 3 && !strcmp(argv[1], "connect")) {
        int rc = vsync_client_connect(argv[2], &client);
        printf("rc=%d client=%s last=%s\n", rc, client ? "set" : "null", vsync_client_last_error(NULL));
        if (client) vsync_client_destroy(client);
        return 0;
    }
    if (argc >= 4 && !strcmp(argv[1], "run")) {
        long want = atol(argv[3]), first_count = 0;
        int rc = vsync_client_connect(argv[2], &client);
        if (rc < 0) {
            printf("connect failed %d %s\n", rc, vsync_client_last_error(NULL));
            return 1;
        }
        struct vsync_link *first;
        if (vsync_link_create(client, "crtc:0", on_first, NULL, &first) != -VSYNC_EINVAL) printf("crtc:0 accepted\n");
        if (vsync_link_create(client, "crtc:x", on_first, NULL, &first) != -VSYNC_EINVAL) printf("crtc:x accepted\n");
        vsync_link_create(client, NULL, on_first, &first_count, &first);
        vsync_link_set_error_callback(first, on_error);
        struct pollfd pfd = {.fd = vsync_client_get_fd(client), .events = POLLIN};
        int fd = pfd.fd;
        while (frames_after_error < want) {
            poll(&pfd, 1, 1000);
            if ((rc = vsync_client_dispatch(client, 0)) < 0) {
                printf("dispatch failed %d\n", rc);
                return 1;
            }
            if (vsync_client_get_fd(client) != fd) printf("fd changed\n");
        }
        uint64_t mhz = 0, period = 0;
        vsync_link_get_refresh(second, &mhz, &period);
        printf("done refresh_mhz=%llu period_ns=%llu max_fps=%d\n", (unsigned long long)mhz, (unsigned long long)period,
               vsync_link_get_max_fps(second));
        vsync_client_destroy(client);
        return 0;
    }
    fprintf(stderr, "usage: abi-check strerror|layout|connect SOCKET|run SOCKET FRAMES\n");
    return 64;
}
