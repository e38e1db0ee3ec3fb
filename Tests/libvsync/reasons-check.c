/* Late frames' reasons through libvsync against a real vsyncd: every fourth frame's work
 * deliberately lasts a display period and 2 ms from the tick's receipt, longer than the whole
 * period the frame had, and ends after its target; the others take no time (they end when the tick
 * was read). Prints one line per frame ("frame SEQ overran=0|1 in_time=0|1 skipped=N lag_ns=L
 * reason=NAME", in_time: the tick came right after the last one and was read by its target), the
 * counts ("counts frames=F late=L NAME=N ..."), then a "FAIL ..." line for each error check that
 * failed and "done".
 *
 *   reasons-check SOCKET FRAMES
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vsync/vsync.h>

static int frames_seen, frames_wanted, failures;

static void check(int ok, const char *what) {
    if (!ok) {
        printf("FAIL %s\n", what);
        failures++;
    }
}

/* Sleeps until the CLOCK_MONOTONIC time ns: the overrun is real time passing, as slow work is. */
static void sleep_until(uint64_t ns) {
    struct timespec t;
    t.tv_sec = (time_t)(ns / 1000000000u);
    t.tv_nsec = (long)(ns % 1000000000u);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR) {
    }
}

static void on_frame(struct vsync_link *link, const struct vsync_frame *frame, void *user) {
    int overran = frames_seen % 4 == 1;
    int reason;
    (void)user;
    if (frames_seen >= frames_wanted) return;
    /* 0: the work ended now, after the overrun. */
    if (overran) sleep_until(frame->received_ns + frame->duration_ns + 2000000u);
    reason = vsync_link_frame_done(link, frame, overran ? 0 : frame->received_ns);
    printf("frame %llu overran=%d in_time=%d skipped=%u lag_ns=%llu reason=%s\n",
           (unsigned long long)frame->target_sequence, overran,
           frame->skipped == 0 && frame->received_ns <= frame->target_timestamp_ns, frame->skipped,
           (unsigned long long)(frame->received_ns - frame->timestamp_ns),
           reason >= 0 ? vsync_frame_reason_name(reason) : "error");
    check(vsync_link_frame_done(link, frame, 0) == -EINVAL, "judging a frame twice is not -EINVAL");
    frames_seen++;
}

int main(int argc, char **argv) {
    struct vsync_client *client;
    struct vsync_link *link;
    struct vsync_frame_counts counts;
    struct vsync_frame small;
    int rc, i;
    if (argc != 3) {
        fprintf(stderr, "usage: reasons-check SOCKET FRAMES\n");
        return 2;
    }
    frames_wanted = atoi(argv[2]);
    rc = vsync_client_connect(argv[1], &client);
    if (rc < 0) {
        fprintf(stderr, "connect: %s\n", vsync_client_last_error(NULL));
        return 1;
    }
    rc = vsync_link_create(client, NULL, on_frame, NULL, &link);
    if (rc < 0) {
        fprintf(stderr, "link: %s\n", vsync_client_last_error(client));
        return 1;
    }
    while (frames_seen < frames_wanted) {
        rc = vsync_client_dispatch(client, 1000);
        if (rc < 0) {
            fprintf(stderr, "dispatch: %s\n", vsync_strerror(rc));
            return 1;
        }
    }

    memset(&counts, 0, sizeof counts);
    counts.struct_size = sizeof counts;
    check(vsync_link_get_frame_counts(link, &counts) == 0, "get_frame_counts failed");
    check(counts.struct_size == sizeof counts, "counts.struct_size is not the header's");
    check(counts.reason_count == VSYNC_REASON_COUNT, "counts.reason_count is not VSYNC_REASON_COUNT");
    printf("counts frames=%llu late=%llu", (unsigned long long)counts.frames, (unsigned long long)counts.late);
    for (i = 0; i < VSYNC_REASON_COUNT; i++)
        printf(" %s=%llu", vsync_frame_reason_name(i), (unsigned long long)counts.by_reason[i]);
    printf("\n");

    /* The errors: NULL handles and pointers, struct sizes that are not the library's. */
    memset(&small, 0, sizeof small);
    small.struct_size = 8;
    check(vsync_link_frame_done(NULL, &small, 0) == -EINVAL, "frame_done(NULL link) is not -EINVAL");
    check(vsync_link_frame_done(link, NULL, 0) == -EINVAL, "frame_done(NULL frame) is not -EINVAL");
    check(vsync_link_frame_done(link, &small, 0) == -EINVAL, "frame_done(struct_size 8) is not -EINVAL");
    check(strstr(vsync_client_last_error(client), "struct_size") != NULL, "the last error does not name struct_size");
    counts.struct_size = 4;
    check(vsync_link_get_frame_counts(link, &counts) == -EINVAL, "get_frame_counts(struct_size 4) is not -EINVAL");
    check(vsync_link_get_frame_counts(link, NULL) == -EINVAL, "get_frame_counts(NULL out) is not -EINVAL");
    check(vsync_link_get_frame_counts(NULL, &counts) == -EINVAL, "get_frame_counts(NULL link) is not -EINVAL");
    check(vsync_frame_reason_name(-1) == NULL && vsync_frame_reason_name(VSYNC_REASON_COUNT) == NULL,
          "a value that is no reason has a name");
    check(strcmp(vsync_frame_reason_name(VSYNC_REASON_APP_DEADLINE_MISSED), "appDeadlineMissed") == 0,
          "APP_DEADLINE_MISSED's name is not appDeadlineMissed");

    vsync_link_destroy(link);
    vsync_client_destroy(client);
    printf("done failures=%d\n", failures);
    return failures == 0 ? 0 : 1;
}
