/*
 * page-read: vsync-bench --page-read's microbenchmark. ns per call of vsync_display_timing (the
 * timing page read: seqlock copy, next vblank after now, no syscall) next to clock_gettime
 * (CLOCK_MONOTONIC)'s, in alternating rounds of N calls each. Built at run time by vsync-bench
 * with cc -O2 against include/ and libvsync.so.
 *
 *   page-read ROUNDS CALLS [SOCKET]
 *
 * With SOCKET: a running vsyncd's page (its first display, followed by a page-only link). Without:
 * a page this program makes itself with Tests/libvsync/page-server.h's stand-in daemon (a
 * sealed memfd as vsyncd makes it, one display written at 60 Hz), labelled as such.
 * Each round times batches of 1000 calls (one clock read per batch, so the clock's own cost is
 * spread over the batch) and prints the batches' p50, p99 and mean ns per call.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <vsync/vsync.h>

#include "page-server.h"

#define BATCH 1000

static uint64_t mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static volatile uint64_t sink;

/* One round: `calls` calls in batches; fills p50/p99/mean ns per call. kind 0: page, 1: clock. */
static int round_of(int kind, struct vsync_client *client, uint32_t display, long calls, double *out) {
    long batches = calls / BATCH;
    double *per = malloc(sizeof(double) * (size_t)batches);
    double sum = 0;
    struct vsync_display_timing t;
    for (long b = 0; b < batches; b++) {
        uint64_t start = mono();
        if (kind == 0) {
            for (int i = 0; i < BATCH; i++) {
                if (vsync_display_timing(client, display, 0, &t) != 0) { free(per); return -1; }
                sink += t.next_ns;
            }
        } else {
            for (int i = 0; i < BATCH; i++) sink += mono();
        }
        per[b] = (double)(mono() - start) / BATCH;
        sum += per[b];
    }
    qsort(per, (size_t)batches, sizeof *per, cmp_double);
    out[0] = per[batches / 2];
    out[1] = per[(size_t)((double)batches * 0.99)];
    out[2] = sum / (double)batches;
    free(per);
    return 0;
}

static struct page_server server;
static volatile int serving = 1;

static void *vblanks(void *arg) {
    (void)arg;
    uint64_t start = mono(), seq = 1;
    while (__atomic_load_n(&serving, __ATOMIC_RELAXED)) {
        uint64_t at = start + seq * 16666667u;
        struct timespec ts = {(time_t)(at / 1000000000u), (long)(at % 1000000000u)};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        page_server_vblank(&server, 0, 1, seq++, at, 16666666, 0xAAAAAAAAu, 60000, mono());
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: page-read ROUNDS CALLS [SOCKET]\n");
        return 64;
    }
    int rounds = atoi(argv[1]);
    long calls = atol(argv[2]);
    const char *socket_path = argc > 3 ? argv[3] : NULL;
    char own[108];
    pthread_t writer;
    if (!socket_path) {
        snprintf(own, sizeof own, "/tmp/vsync-page-read-%d.sock", (int)getpid());
        if (page_server_start(&server, own) < 0) { perror("page-read: stand-in daemon"); return 1; }
        pthread_create(&writer, NULL, vblanks, NULL);
        socket_path = own;
        printf("page: SELF-MADE (stand-in daemon in this process: a sealed memfd as vsyncd makes it, display 1 at 60 Hz), not vsyncd's\n");
    }
    struct vsync_client *client;
    if (vsync_client_connect(socket_path, &client) < 0) {
        fprintf(stderr, "page-read: %s\n", vsync_client_last_error(NULL));
        return 1;
    }
    uint32_t display = 1;
    if (argc > 3) {
        struct vsync_display d[VSYNC_MAX_DISPLAYS];
        int n = vsync_client_get_displays(client, d, VSYNC_MAX_DISPLAYS, sizeof d[0]);
        if (n <= 0) { fprintf(stderr, "page-read: no display (%s)\n", vsync_strerror(n)); return 1; }
        display = d[0].display_id;
        printf("page: vsyncd's at %s, display %u\n", socket_path, display);
    }
    char selector[32];
    snprintf(selector, sizeof selector, "display:%u", display);
    struct vsync_link *link;
    vsync_link_create(client, selector, NULL, NULL, &link);
    vsync_link_set_page_only(link, true);
    struct vsync_display_timing t;
    int rc;
    for (int i = 0; (rc = vsync_display_timing(client, display, 0, &t)) != 0 || t.period_ns == 0; i++) {
        if (i > 300) { fprintf(stderr, "page-read: no timing for display %u: %s\n", display, vsync_strerror(rc)); return 1; }
        vsync_client_dispatch(client, 10);
    }
    printf("%d rounds of %ld calls, alternating (page first in odd rounds), batches of %d\n", rounds, calls, BATCH);
    double page_p50[64], clock_p50[64];
    if (rounds > 64) rounds = 64;
    for (int r = 0; r < rounds; r++) {
        double page[3], clock[3];
        for (int k = 0; k < 2; k++) {
            int kind = (r % 2 == 0) ? k : 1 - k;
            if (round_of(kind, client, display, calls, kind == 0 ? page : clock) < 0) {
                fprintf(stderr, "page-read: a read failed\n");
                return 1;
            }
        }
        page_p50[r] = page[0];
        clock_p50[r] = clock[0];
        printf("round %d  vsync_display_timing p50 %.1f ns  p99 %.1f  mean %.1f  |  clock_gettime p50 %.1f ns  p99 %.1f  mean %.1f\n",
               r + 1, page[0], page[1], page[2], clock[0], clock[1], clock[2]);
    }
    qsort(page_p50, (size_t)rounds, sizeof(double), cmp_double);
    qsort(clock_p50, (size_t)rounds, sizeof(double), cmp_double);
    printf("median of rounds: vsync_display_timing %.1f ns per call, clock_gettime %.1f ns per call (x%.2f)\n",
           page_p50[rounds / 2], clock_p50[rounds / 2], page_p50[rounds / 2] / clock_p50[rounds / 2]);
    vsync_link_destroy(link);
    vsync_client_destroy(client);
    if (argc <= 3) {
        __atomic_store_n(&serving, 0, __ATOMIC_RELAXED);
        pthread_join(writer, NULL);
        unlink(own);
    }
    return 0;
}
