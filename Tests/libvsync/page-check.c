/*
 * page-check: libvsync's timing-page calls through the real libvsync.so, against the stand-in
 * daemon of page-server.h (a real sealed memfd sent as SCM_RIGHTS). For
 * Tests/DaemonTests/LibvsyncPageTests.swift; prints one fact per line, "FAIL ..." for a failure.
 *
 *   page-check check SOCKET           the calls' answers, and no syscall on the read path
 *   page-check serve SOCKET SECONDS   a 60 Hz stand-in daemon writing display 1's record
 */
#include <linux/seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>

#include <vsync/vsync.h>

#include "page-server.h"

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; printf("FAIL line %d: ", __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* In a child under SECCOMP_MODE_STRICT (read, write, exit, sigreturn only: any other syscall kills
 * it), 10^5 reads of the page: the read path makes no syscall, or the child dies. The control
 * (`dispatch`) also calls vsync_client_dispatch, which reads the socket: it must die, which shows
 * the check can fail. Returns 1 if the child ended normally. */
static int reads_without_syscalls(struct vsync_client *client, int dispatch) {
    pid_t pid = fork();
    if (pid == 0) {
        struct vsync_display_timing t;
        if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT) != 0) syscall(SYS_exit, 3);
        if (dispatch) vsync_client_dispatch(client, 0);
        int bad = 0;
        for (int i = 0; i < 100000; i++)
            if (vsync_display_timing(client, 1, 1000000000u + (uint64_t)i, &t) != 0 || t.display_id != 1) bad++;
        if (vsync_display_timing(client, 99, 1, &t) != -VSYNC_ENOTONPAGE) bad++;
        syscall(SYS_exit, bad ? 2 : 0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!dispatch)
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "strict-seccomp reader: %s %d",
              WIFSIGNALED(status) ? "killed by signal" : "exit", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static int check(const char *path) {
    struct page_server server;
    int rc = page_server_start(&server, path);
    if (rc < 0) { printf("FAIL server %d\n", rc); return 1; }
    struct vsync_client *client = NULL;
    struct vsync_display_timing t;
    CHECK(vsync_display_timing(NULL, 1, 0, &t) == -VSYNC_EINVAL, "NULL client");
    rc = vsync_client_connect(path, &client);
    CHECK(rc == 0, "connect %d %s", rc, vsync_client_last_error(NULL));
    if (!client) return 1;
    CHECK(vsync_display_timing(client, 1, 0, NULL) == -VSYNC_EINVAL, "NULL out");
    /* Connected, the page is there: no record of display 1 yet. */
    rc = vsync_display_timing(client, 1, 0, &t);
    CHECK(rc == -VSYNC_ENOTONPAGE, "no record: %d", rc);
    CHECK(strlen(vsync_strerror(rc)) > 0 && strstr(vsync_strerror(rc), "timing page"), "strerror: %s", vsync_strerror(rc));

    /* 59.94 Hz: 16683350.0166 ns, vblank 600 at 10 s. */
    uint32_t frac = (uint32_t)(0.0166 * 4294967296.0);
    page_server_vblank(&server, 7, 1, 600, 10000000000u, 16683350, frac, 59940, 10000100000u);
    rc = vsync_display_timing(client, 1, 10000000000u + 5 * 16683350u + 1000, &t);
    CHECK(rc == 0, "read %d", rc);
    CHECK(t.struct_size == sizeof t, "struct_size %u", t.struct_size);
    CHECK(t.display_id == 1 && t.generation == 1 && t.last_sequence == 600 && t.last_timestamp_ns == 10000000000u,
          "record %u %u %llu", t.display_id, t.generation, (unsigned long long)t.last_sequence);
    CHECK(t.flags == (1u | VSYNC_TIMING_ON | VSYNC_TIMING_CURRENT), "flags %#x", t.flags);
    CHECK(t.period_ns == 16683350 && t.period_frac == frac && t.period > 16683350.016 && t.period < 16683350.017,
          "period %llu %u %f", (unsigned long long)t.period_ns, t.period_frac, t.period);
    CHECK(t.refresh_mhz == 59940 && t.updated_ns == 10000100000u, "refresh %llu", (unsigned long long)t.refresh_mhz);
    /* The next vblank after 5 frames + 1 us is 606, at 10 s + 6 periods (rounded to ns). */
    CHECK(t.next_sequence == 606 && t.next_ns == 10000000000u + 100100100u, "next %llu at %llu",
          (unsigned long long)t.next_sequence, (unsigned long long)t.next_ns);
    /* Exactly on a vblank: strictly after it, so the next one. */
    vsync_display_timing(client, 1, 10000000000u, &t);
    CHECK(t.next_sequence == 601, "on the vblank: %llu", (unsigned long long)t.next_sequence);
    /* after_ns 0 is now: the next vblank is within a period of now. */
    uint64_t before = now_ns();
    vsync_display_timing(client, 1, 0, &t);
    CHECK(t.next_ns > before && t.next_ns <= now_ns() + 16683351u, "now: next %llu, now %llu",
          (unsigned long long)t.next_ns, (unsigned long long)before);
    printf("read display 1 next_sequence=%llu\n", (unsigned long long)t.next_sequence);

    /* A page-only link: its SUBSCRIBE has flag bit 2, and it gets no frames (the daemon's part). */
    struct vsync_link *link = NULL;
    CHECK(vsync_link_create(client, "display:1", NULL, NULL, &link) == 0, "link");
    CHECK(vsync_link_set_page_only(link, true) == 0, "set_page_only");
    CHECK(vsync_link_set_page_only(NULL, true) == -VSYNC_EINVAL, "set_page_only NULL");
    vsync_client_dispatch(client, 0);
    for (int i = 0; i < 200 && __atomic_load_n(&server.page_only_subscribes, __ATOMIC_RELAXED) == 0; i++)
        vsync_client_dispatch(client, 10);
    CHECK(server.page_only_subscribes == 1 && server.subscribes == 1, "subscribes %d, page-only %d",
          server.subscribes, server.page_only_subscribes);

    if (reads_without_syscalls(client, 0)) printf("no syscall in 100000 reads\n");
    int control = reads_without_syscalls(client, 1);
    CHECK(!control, "the control child that dispatches was not stopped: the seccomp check proves nothing");
    if (!control) printf("control with a dispatch was stopped\n");

    vsync_link_destroy(link);
    vsync_client_destroy(client);
    printf(failures ? "failures %d\n" : "all passed\n", failures);
    return failures ? 1 : 0;
}

/* 60 Hz vblanks on a grid of CLOCK_MONOTONIC, display 1's record rewritten at each. */
static int serve(const char *path, int seconds) {
    struct page_server server;
    int rc = page_server_start(&server, path);
    if (rc < 0) { printf("FAIL server %d\n", rc); return 1; }
    const uint64_t period = 16666666;
    const uint32_t frac = 0xAAAAAAAAu; /* + 2/3 ns: 60 Hz exactly */
    uint64_t start = now_ns(), seq = 1000;
    printf("serving %s\n", path);
    fflush(stdout);
    for (uint64_t k = 1;; k++) {
        uint64_t at = start + k * period + (k * 2) / 3;
        struct timespec ts = {(time_t)(at / 1000000000u), (long)(at % 1000000000u)};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        page_server_vblank(&server, 0, 1, seq + k, at, period, frac, 60000, now_ns());
        if (at - start >= (uint64_t)seconds * 1000000000u) break;
    }
    printf("served connections=%d subscribes=%d page_only=%d\n", server.connections, server.subscribes,
           server.page_only_subscribes);
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 3 && !strcmp(argv[1], "check")) return check(argv[2]);
    if (argc >= 4 && !strcmp(argv[1], "serve")) return serve(argv[2], atoi(argv[3]));
    fprintf(stderr, "usage: page-check check SOCKET | serve SOCKET SECONDS\n");
    return 64;
}
