// fanout.c: the C floor vsync-bench compares vsyncd against.
//
// One sender paced by an absolute timerfd at HZ; N client processes, each blocking in recv()
// on its own AF_UNIX SOCK_SEQPACKET socketpair. Every tick carries its sequence and a
// CLOCK_MONOTONIC timestamp; a client's latency is its receipt time minus that timestamp,
// the same definition vsync-bench-client uses for DisplayLink callbacks.
//
// The timestamp (--stamp) is by default the tick's deadline, start + k·period: what vsyncd's
// timer source stamps (the ideal vblank time, as the kernel stamps a real vblank), so both sides'
// latency includes the timer's wake-up delay. --stamp wake stamps the sender's wake-up instead.
//
// --drain makes each client act as vsyncd's clients do: after each wake-up it reads everything
// waiting (MSG_DONTWAIT) and acts on the newest tick only, so a client that fell behind counts
// the ticks it passed over as lost rather than working through a backlog (the draining floor).
//
// --nice N, --rr P or --fifo P schedule the sender once its clients are forked (vsync-bench
// gives it what vsyncd gets, which is what vsyncd.service sets), so both senders compete alike.
// --epoll makes the sender wait in epoll_wait on its timerfd before reading it, as an event loop
// that also serves sockets and signals must: the floor's cost with vsyncd's way of waking.
//
// Build: cc -O2 -o fanout fanout.c      Run: ./fanout --clients N --rate HZ --seconds S
// Prints one JSON line (see report()). Only the ticks after --warmup seconds are measured,
// so process start-up and first-touch page faults stay out of the figures, as in vsync-bench.
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { MSG_TICK = 1, MSG_END = 2, MSG_SAMPLES = 3, MSG_SUMMARY = 4 };
enum { FLAG_RECORD = 1 };

// seq: timer period index; it jumps when the sender itself wakes more than a period late.
// sent: ticks sent so far. A client counts `lost` from gaps in seq, the definition vsync-bench
// uses for vsyncd (gaps in the vblank sequence, whoever dropped the tick), and `missed` from
// gaps in sent (ticks sent to it that it never got).
struct tick_msg { uint32_t type, flags; uint64_t seq, stamp_ns, sent; };
struct summary_msg { uint32_t type, pad; uint64_t received, lost, missed; };
#define SAMPLES_PER_MSG 1000 /* 4 KB of uint32 ns per datagram */

static uint64_t now_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "fanout: %s failed: %s\n", what, strerror(errno));
    exit(1);
}

// A client: records latency of ticks flagged FLAG_RECORD, counts sequence gaps among them,
// and on MSG_END sends its samples back over the same socket.
static void run_client(int fd, uint64_t capacity, int drain) {
    uint32_t *samples = malloc(capacity * sizeof *samples);
    if (!samples) die("malloc");
    uint64_t count = 0, received = 0, lost = 0, missed = 0, prev_seq = 0, prev_sent = 0;
    int have_prev = 0;
    for (;;) {
        struct tick_msg m;
        ssize_t n = recv(fd, &m, sizeof m, 0);
        uint64_t t = now_ns(CLOCK_MONOTONIC);
        if (n == 0) exit(0);
        if (n < 0) { if (errno == EINTR) continue; die("client recv"); }
        int ended = m.type == MSG_END;
        // Draining: the newest tick waiting is the one acted on (an END read here ends the run
        // once that tick is counted).
        while (drain && !ended) {
            struct tick_msg next;
            if (recv(fd, &next, sizeof next, MSG_DONTWAIT) <= 0) break;
            if (next.type == MSG_END) ended = 2;
            else m = next;
        }
        if (ended == 1) break;
        if (!(m.flags & FLAG_RECORD)) { if (ended) break; continue; }
        received++;
        if (have_prev && m.seq > prev_seq + 1) lost += m.seq - prev_seq - 1;
        if (have_prev && m.sent > prev_sent + 1) missed += m.sent - prev_sent - 1;
        prev_seq = m.seq; prev_sent = m.sent; have_prev = 1;
        uint64_t lat = t > m.stamp_ns ? t - m.stamp_ns : 0;
        if (count < capacity) samples[count++] = lat > UINT32_MAX ? UINT32_MAX : (uint32_t)lat;
        if (ended) break;
    }
    for (uint64_t i = 0; i < count; i += SAMPLES_PER_MSG) {
        uint32_t buf[1 + SAMPLES_PER_MSG];
        uint64_t k = count - i < SAMPLES_PER_MSG ? count - i : SAMPLES_PER_MSG;
        buf[0] = MSG_SAMPLES;
        memcpy(buf + 1, samples + i, k * sizeof *samples);
        if (send(fd, buf, (1 + k) * sizeof *buf, 0) < 0) die("client send samples");
    }
    struct summary_msg s = { MSG_SUMMARY, 0, received, lost, missed };
    if (send(fd, &s, sizeof s, 0) < 0) die("client send summary");
    exit(0);
}

// VmHWM, not getrusage's ru_maxrss: that one survives execve, so under posix_spawn (vfork) it
// reports the spawning process's peak instead of ours.
static long peak_rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
    if (f) fclose(f);
    return kib;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

// Value at rank ceil(p% of count), as HdrHistogram's valueAtPercentile defines it.
static double percentile_us(const uint32_t *sorted, uint64_t count, double p) {
    if (count == 0) return 0;
    uint64_t rank = (uint64_t)((p / 100.0) * (double)count + 0.999999);
    if (rank < 1) rank = 1;
    if (rank > count) rank = count;
    return sorted[rank - 1] / 1000.0;
}

static void usage(void) {
    fprintf(stderr, "usage: fanout --clients N --rate HZ --seconds S [--warmup S] [--stamp deadline|wake] [--sndbuf BYTES] [--work-ns W] [--drain] [--nice N | --rr P | --fifo P] [--epoll]\n");
    exit(2);
}

int main(int argc, char **argv) {
    long clients = 1; double rate = 60, seconds = 5, warmup = 1; int stamp_deadline = 1, sndbuf = 0;
    uint64_t work_ns = 0; int drain = 0, nice_value = 0, use_epoll = 0, rt_policy = SCHED_OTHER, rt_priority = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--drain")) { drain = 1; continue; }
        if (!strcmp(argv[i], "--epoll")) { use_epoll = 1; continue; }
        if (i + 1 >= argc) usage();
        if (!strcmp(argv[i], "--clients")) clients = atol(argv[++i]);
        else if (!strcmp(argv[i], "--rate")) rate = atof(argv[++i]);
        else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--warmup")) warmup = atof(argv[++i]);
        else if (!strcmp(argv[i], "--stamp")) { i++; stamp_deadline = !strcmp(argv[i], "deadline"); }
        else if (!strcmp(argv[i], "--sndbuf")) sndbuf = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--work-ns")) work_ns = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--nice")) nice_value = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rr")) { rt_policy = SCHED_RR; rt_priority = atoi(argv[++i]); }
        else if (!strcmp(argv[i], "--fifo")) { rt_policy = SCHED_FIFO; rt_priority = atoi(argv[++i]); }
        else usage();
    }
    if (clients < 1 || rate <= 0 || seconds <= 0 || warmup < 0) usage();

    // Two fds per client in the sender before the children close theirs.
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)(2 * clients + 64)) {
        rl.rlim_cur = rl.rlim_max < (rlim_t)(2 * clients + 64) ? rl.rlim_max : (rlim_t)(2 * clients + 64);
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    uint64_t period_ns = (uint64_t)(1e9 / rate + 0.5);
    uint64_t warm_ticks = (uint64_t)(warmup * rate + 0.5);
    uint64_t run_ticks = (uint64_t)(seconds * rate + 0.5);
    uint64_t capacity = run_ticks + 16;
    pid_t sender = getpid();

    int *fds = calloc((size_t)clients, sizeof *fds);
    pid_t *pids = calloc((size_t)clients, sizeof *pids);
    if (!fds || !pids) die("calloc");
    for (long c = 0; c < clients; c++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) die("socketpair");
        pid_t pid = fork();
        if (pid < 0) die("fork");
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != sender) _exit(1);
            close(sv[0]);
            for (long k = 0; k < c; k++) close(fds[k]);
            run_client(sv[1], capacity, drain);
        }
        close(sv[1]);
        // --sndbuf: the sender's per-client buffer, to compare with vsyncd's (default: the kernel's).
        if (sndbuf > 0) setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
        fds[c] = sv[0];
        pids[c] = pid;
    }

    // The clients keep the scheduling they were forked with; only the sender's changes.
    if (nice_value != 0 && setpriority(PRIO_PROCESS, 0, nice_value) < 0) die("setpriority (--nice needs root for a negative value)");
    struct sched_param sp = { .sched_priority = rt_priority };
    if (rt_policy != SCHED_OTHER && sched_setscheduler(0, rt_policy, &sp) < 0) die("sched_setscheduler (--rr and --fifo need root)");

    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    if (tfd < 0) die("timerfd_create");
    int efd = -1;
    if (use_epoll) {
        struct epoll_event ev = { .events = EPOLLIN, .data.fd = tfd };
        if ((efd = epoll_create1(EPOLL_CLOEXEC)) < 0 || epoll_ctl(efd, EPOLL_CTL_ADD, tfd, &ev) < 0) die("epoll");
    }
    uint64_t start = now_ns(CLOCK_MONOTONIC) + 100000000u; // 100 ms for the children to reach recv()
    // --work-ns W: wake W before each period boundary, as vsyncd wakes a paced client W before
    // its target vblank; stamped with that instant (for a periodic timer only the phase moves).
    start = start + period_ns - work_ns % period_ns;
    struct itimerspec its = {
        .it_interval = { (time_t)(period_ns / 1000000000u), (long)(period_ns % 1000000000u) },
        .it_value = { (time_t)(start / 1000000000u), (long)(start % 1000000000u) },
    };
    if (timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL) < 0) die("timerfd_settime");

    uint64_t seq = 0, sent = 0, sent_ticks = 0, send_drops = 0, timer_overruns = 0;
    uint64_t cpu_start = 0, cpu_end = 0, wall_start = 0, wall_end = 0;
    struct rusage ru_start = {0}, ru_end;
    uint64_t total = warm_ticks + run_ticks;
    if (warm_ticks == 0) { cpu_start = now_ns(CLOCK_PROCESS_CPUTIME_ID); wall_start = now_ns(CLOCK_MONOTONIC); getrusage(RUSAGE_SELF, &ru_start); }
    while (seq < total) {
        uint64_t expirations;
        struct epoll_event ev;
        if (efd >= 0 && epoll_wait(efd, &ev, 1, -1) < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        if (read(tfd, &expirations, sizeof expirations) != sizeof expirations) {
            if (errno == EINTR) continue;
            die("read timerfd");
        }
        uint64_t wake = now_ns(CLOCK_MONOTONIC);
        if (expirations > 1) timer_overruns += expirations - 1;
        seq += expirations; // a late sender skips ticks rather than bunching them
        struct tick_msg m = {
            MSG_TICK, seq > warm_ticks ? FLAG_RECORD : 0, seq,
            stamp_deadline ? start + (seq - 1) * period_ns : wake, ++sent,
        };
        for (long c = 0; c < clients; c++) {
            if (send(fds[c], &m, sizeof m, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
                if (errno == EAGAIN) { if (m.flags & FLAG_RECORD) send_drops++; }
                else die("send tick");
            }
        }
        if (m.flags & FLAG_RECORD) sent_ticks++;
        // Measured window: from the end of the last warm-up tick to the end of the last tick.
        if (seq == warm_ticks || (seq > warm_ticks && cpu_start == 0)) {
            cpu_start = now_ns(CLOCK_PROCESS_CPUTIME_ID); wall_start = now_ns(CLOCK_MONOTONIC);
            getrusage(RUSAGE_SELF, &ru_start);
            if (seq > warm_ticks) sent_ticks = 0; // overran the boundary: measure from here
        }
    }
    cpu_end = now_ns(CLOCK_PROCESS_CPUTIME_ID);
    wall_end = now_ns(CLOCK_MONOTONIC);
    getrusage(RUSAGE_SELF, &ru_end);
    long sender_rss_kib = peak_rss_kib();

    struct tick_msg end = { MSG_END, 0, 0, 0, 0 };
    for (long c = 0; c < clients; c++)
        if (send(fds[c], &end, sizeof end, MSG_NOSIGNAL) < 0) die("send end");

    uint32_t *all = malloc((size_t)clients * capacity * sizeof *all);
    if (!all) die("malloc");
    uint64_t n = 0, received = 0, lost = 0, missed = 0;
    for (long c = 0; c < clients; c++) {
        for (;;) {
            uint32_t buf[1 + SAMPLES_PER_MSG];
            ssize_t r = recv(fds[c], buf, sizeof buf, 0);
            if (r <= 0) { fprintf(stderr, "fanout: client %ld ended without a summary\n", c); break; }
            if (buf[0] == MSG_SUMMARY) {
                struct summary_msg s; memcpy(&s, buf, sizeof s);
                received += s.received; lost += s.lost; missed += s.missed;
                break;
            }
            uint64_t k = (uint64_t)r / sizeof *buf - 1;
            memcpy(all + n, buf + 1, k * sizeof *buf);
            n += k;
        }
        close(fds[c]);
    }
    for (long c = 0; c < clients; c++) waitpid(pids[c], NULL, 0);
    qsort(all, n, sizeof *all, cmp_u32);

    uint64_t cpu_ticks = sent_ticks ? sent_ticks : 1;
    printf("{\"impl\":\"c-reference\",\"clients\":%ld,\"rate\":%g,\"seconds\":%.3f,\"ticks\":%" PRIu64
           ",\"samples\":%" PRIu64 ",\"received\":%" PRIu64 ",\"p50_us\":%.1f,\"p99_us\":%.1f,\"p999_us\":%.1f,\"max_us\":%.1f"
           ",\"lost\":%" PRIu64 ",\"missed\":%" PRIu64 ",\"send_drops\":%" PRIu64 ",\"timer_overruns\":%" PRIu64
           ",\"cpu_ns_per_tick\":%.0f,\"rss_kib\":%ld,\"voluntary_switches_per_tick\":%.2f"
           ",\"nonvoluntary_switches_per_tick\":%.2f,\"stamp\":\"%s\",\"drain\":%s}\n",
           clients, rate, (wall_end - wall_start) / 1e9, sent_ticks, n, received,
           percentile_us(all, n, 50), percentile_us(all, n, 99), percentile_us(all, n, 99.9), n ? all[n - 1] / 1000.0 : 0,
           lost, missed, send_drops, timer_overruns, (double)(cpu_end - cpu_start) / (double)cpu_ticks,
           sender_rss_kib, (double)(ru_end.ru_nvcsw - ru_start.ru_nvcsw) / (double)cpu_ticks,
           (double)(ru_end.ru_nivcsw - ru_start.ru_nivcsw) / (double)cpu_ticks, stamp_deadline ? "deadline" : "wake",
           drain ? "true" : "false");
    return 0;
}
