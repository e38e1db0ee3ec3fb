/*
 * libvsync-client: one client process of `vsync-bench --client-mode c`, driving libvsync's
 * dispatch loop the way a C program would: vsync_client_dispatch(client, -1) in a loop (which
 * in the steady state waits in one blocking read per frame). vsync-bench compiles it at run
 * time against include/ and the built libvsync.so. Not meant to be run by hand.
 *
 *   libvsync-client --index I [--mode M] [--fps N] [--max-seconds S] [--window-file F]    (socket: $VSYNCD_SOCKET)
 *
 * The same contract as vsync-bench-client: it writes "I\n" to fd 3 after its first frame;
 * SIGUSR1 starts recording; SIGUSR2 prints one JSON line (ClientReport) and exits. Latency is
 * callback entry minus the frame's timestamp, CLOCK_MONOTONIC; lost ticks are gaps in the
 * sequence at the link's divisor among recorded frames.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <vsync/vsync.h>

static volatile sig_atomic_t start_recording, finish;
static int index_, announced, recording;
static uint64_t work_ns;
/* --mode page (vsync-bench --client-mode page): a page-only link, woken by libvsync's own timer
 * aimed from vsyncd's timing page instead of by a tick. */
static int page_only;
static uint64_t *latencies;
static size_t count, capacity;
static uint64_t received, lost, skipped_total, divisor = 1, previous;
/* --window-file: only ticks stamped in [window_start, window_end) are recorded (vsync-bench). */
static const char *window_file;
static uint64_t window_start, window_end = UINT64_MAX;

static void on_signal(int signo) {
    if (signo == SIGUSR1) start_recording = 1;
    else finish = 1;
}

static void on_frame(struct vsync_link *link, const struct vsync_frame *f, void *user) {
    uint64_t entry = vsync_now_ns();
    (void)link;
    (void)user;
    if (!announced) {
        char line[32];
        int n = snprintf(line, sizeof line, "%d\n", index_);
        if (write(3, line, (size_t)n) != n) { /* the bench notices the missing announcement */ }
        announced = 1;
    }
    if (!recording) return;
    divisor = f->divisor ? f->divisor : 1;
    if (count == capacity) {
        capacity = capacity ? 2 * capacity : 16384;
        latencies = realloc(latencies, capacity * sizeof *latencies);
        if (!latencies) abort();
    }
    /* Paced (--work-ns): from the wake instant vsyncd aimed at, lost frames by target sequence. */
    uint64_t reference = work_ns ? f->target_timestamp_ns - work_ns : f->timestamp_ns;
    uint64_t sequence = work_ns ? f->target_sequence : f->sequence;
    if (reference < window_start || reference >= window_end) return;
    latencies[count++] = entry > reference ? entry - reference : 0;
    received++;
    skipped_total += f->skipped;
    if (previous && sequence > previous + divisor) lost += (sequence - previous) / divisor - 1;
    previous = sequence;
}

static int compare(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *note) {
    qsort(latencies, count, sizeof *latencies, compare);
    printf("{\"index\":%d,\"received\":%llu,\"lost\":%llu,\"skipped\":%llu,\"divisor\":%llu,\"latencyNs\":[", index_,
           (unsigned long long)received, (unsigned long long)lost, (unsigned long long)skipped_total,
           (unsigned long long)divisor);
    for (size_t i = 0; i < count;) {
        size_t j = i;
        while (j < count && latencies[j] == latencies[i]) j++;
        printf("%s[%llu,%zu]", i ? "," : "", (unsigned long long)latencies[i], j - i);
        i = j;
    }
    printf("],\"notes\":[%s%s%s]}\n", note ? "\"" : "", note ? note : "", note ? "\"" : "");
    fflush(stdout);
}

int main(int argc, char **argv) {
    double fps = 0;
    int max_seconds = 600;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--index")) index_ = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--fps")) fps = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--max-seconds")) max_seconds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--work-ns")) work_ns = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--mode")) page_only = !strcmp(argv[i + 1], "page");
        else if (!strcmp(argv[i], "--window-file")) window_file = argv[i + 1];
    }
    // No SA_RESTART: a signal must end dispatch's wait so the flags are seen at once.
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);

    struct vsync_client *client;
    if (vsync_client_connect(NULL, &client) < 0) {
        report(vsync_client_last_error(NULL));
        return 2;
    }
    struct vsync_link *link;
    if (vsync_link_create(client, NULL, on_frame, NULL, &link) < 0) {
        report(vsync_client_last_error(client));
        return 2;
    }
    vsync_link_set_rate(link, 0, 0, fps);
    if (work_ns) vsync_link_set_work_duration(link, work_ns);
    if (page_only) vsync_link_set_page_only(link, true);
    time_t give_up = time(NULL) + max_seconds;
    while (!finish && time(NULL) < give_up) {
        if (start_recording && !recording) {
            recording = 1;
            count = received = lost = skipped_total = previous = 0;
            FILE *w = window_file ? fopen(window_file, "r") : NULL;
            if (w) {
                unsigned long long a, b;
                if (fscanf(w, "%llu %llu", &a, &b) == 2 && a < b) { window_start = a; window_end = b; }
                fclose(w);
            }
        }
        if (vsync_client_dispatch(client, -1) < 0) break;
    }
    report(finish ? NULL : "gave up without SIGUSR2");
    vsync_client_destroy(client);
    return finish ? 0 : 3;
}
