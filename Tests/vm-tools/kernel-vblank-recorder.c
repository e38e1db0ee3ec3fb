/*
 * kernel-vblank-recorder: the kernel's own vblank events of CRTCs, independent of vsyncd, as the
 * truth the VM tests check vsyncd's ticks against (matched by card, CRTC and sequence).
 *
 *   kernel-vblank-recorder [--device /dev/dri/card0] [--crtc ID] [--seconds S]
 *   kernel-vblank-recorder --watch /dev/dri/card0:ID [--watch /dev/dri/card1:ID ...] [--seconds S]
 *
 * The first form records one CRTC (default: the one driving the first connected connector of
 * card0) and prints "<64-bit sequence> <timestamp ns> <received ns>" per vblank. The second
 * records every CRTC named, on any cards, at once, and prints "<card> <crtc id> <sequence> <ns>
 * <received ns>" (card: the node's name, e.g. card1; CRTC ids repeat across cards). Timestamps
 * are the kernel's CLOCK_MONOTONIC time_ns of drmCrtcQueueSequence's event; "received" is when
 * this process read it (CLOCK_MONOTONIC): how long the guest kept even a minimal reader of the
 * kernel's events from running, the yardstick for a client's own delays. Lines are flushed one
 * by one. Up to DEPTH requests per CRTC are kept queued ahead (fewer with many CRTCs: the
 * kernel gives a file 4 KiB of pending events), each for an absolute sequence, so a recorder
 * descheduled for that many frames on a loaded machine still records every vblank. While a CRTC is off (the queue fails
 * with EINVAL) it retries every 2 ms (a mode set turns the CRTC off and on within
 * a few ms, and a slower retry missed the new mode's first vblanks at 144 Hz on Linux 7.3), so it records across a display going off and on, or lit
 * only after it started. Turning a CRTC off sends every pending event at once with the last
 * vblank's sequence and time: repeated lines, which readers drop. A stream with no event for 200 ms
 * whose counter went back behind its requests is aimed afresh on a new file; one only stalled is
 * left alone (queueing again on top of requests still held would exhaust the event space). A card that goes (its device
 * disabled) ends that card's recording with one line on stderr; the others go on.
 * Built by the tests with: cc -O2 -I/usr/include/libdrm ... -ldrm
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

/* DRM gives each open file 4096 bytes of pending events, 32 per sequence event: 128 at once. */
enum { DEPTH = 64, EVENT_BUDGET = 120, MAX_STREAMS = 64, MAX_CARDS = 16 };
static int depth = DEPTH;

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

struct card {
    const char *path;
    const char *name; /* "card1" */
    int fd;
    int dead;
};

/* One CRTC's recording: requests in the kernel, and the sequence the next one is for. */
struct stream {
    struct card *card;
    uint32_t crtc;
    int pending;
    uint64_t next_seq;
    uint64_t last_activity_ns; /* last event, or the last (re)aim */
    uint64_t retry_at_ns;      /* while off: when to try again */
};

static struct card cards[MAX_CARDS];
static int ncards;
static struct stream streams[MAX_STREAMS];
static int nstreams;
static int legacy_output = 1;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void on_sequence(int fd, uint64_t sequence, uint64_t ns, uint64_t user) {
    (void)fd;
    if (user >= (uint64_t)nstreams) return;
    struct stream *s = &streams[user];
    if (s->pending > 0) s->pending--;
    if (sequence >= s->next_seq) s->next_seq = sequence + 1;
    uint64_t received = now_ns();
    s->last_activity_ns = received;
    if (legacy_output) printf("%" PRIu64 " %" PRIu64 " %" PRIu64 "\n", sequence, ns, received);
    else printf("%s %u %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", s->card->name, s->crtc, sequence, ns, received);
}

/* The CRTC driving the first connected connector, else the first CRTC: vsyncd's primary on vkms. */
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

static struct card *card_for(const char *path) {
    for (int i = 0; i < ncards; i++)
        if (!strcmp(cards[i].path, path)) return &cards[i];
    if (ncards == MAX_CARDS) { fprintf(stderr, "kernel-vblank-recorder: more than %d cards\n", MAX_CARDS); exit(64); }
    struct card *c = &cards[ncards++];
    c->path = path;
    const char *slash = strrchr(path, '/');
    c->name = slash ? slash + 1 : path;
    c->fd = open(path, O_RDWR | O_CLOEXEC);
    if (c->fd < 0) { fprintf(stderr, "kernel-vblank-recorder: open %s: %s\n", path, strerror(errno)); exit(1); }
    /* Not master: a recorder must not stand in the way of a mode set. */
    drmDropMaster(c->fd);
    return c;
}

static void add_stream(const char *path, uint32_t crtc) {
    if (nstreams == MAX_STREAMS) { fprintf(stderr, "kernel-vblank-recorder: more than %d CRTCs\n", MAX_STREAMS); exit(64); }
    struct card *c = card_for(path);
    if (!crtc) crtc = first_crtc(c->fd);
    if (!crtc) { fprintf(stderr, "kernel-vblank-recorder: no CRTC on %s\n", path); exit(1); }
    streams[nstreams++] = (struct stream){.card = c, .crtc = crtc};
}

/* Opens a card again: closing its file is the only way to take back requests the kernel still
 * holds, and requests left behind use up the file's event space until a queue fails. */
static void reopen(struct card *c) {
    int fd = open(c->path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "kernel-vblank-recorder: reopening %s: %s\n", c->path, strerror(errno));
        c->dead = 1;
        return;
    }
    drmDropMaster(fd);
    close(c->fd);
    c->fd = fd;
    for (int i = 0; i < nstreams; i++)
        if (streams[i].card == c) streams[i].pending = 0, streams[i].retry_at_ns = 0;
}

/* No event for 200 ms: a guest that stalled (TCG on a loaded host) still has its requests coming,
 * while a count that went back behind them (the CRTC's counter restarted) never answers them. */
static int still_counting(struct stream *s, uint64_t now) {
    uint64_t seq = 0, ns = 0;
    s->last_activity_ns = now;
    if (drmCrtcGetSequence(s->card->fd, s->crtc, &seq, &ns) != 0) return 0;
    return seq + 1 >= s->next_seq - (uint64_t)s->pending;
}

/* Keeps DEPTH requests queued on one CRTC; false if its card has gone. */
static int feed(struct stream *s, uint64_t now) {
    int fd = s->card->fd;
    uint64_t user = (uint64_t)(s - streams);
    if (s->pending == 0) {
        if (now < s->retry_at_ns) return 1;
        /* Start, or the CRTC came back: aim at the next vblank, then fill up behind it. */
        uint64_t queued_seq = 0;
        if (drmCrtcQueueSequence(fd, s->crtc, DRM_CRTC_SEQUENCE_RELATIVE | DRM_CRTC_SEQUENCE_NEXT_ON_MISS, 1,
                                 &queued_seq, user) != 0) {
            if (errno == EINVAL) { s->retry_at_ns = now + 2000000u; return 1; } /* CRTC off: wait for it */
            fprintf(stderr, "kernel-vblank-recorder: drmCrtcQueueSequence on %s CRTC %u: %s\n", s->card->path, s->crtc,
                    strerror(errno));
            return 0;
        }
        s->pending = 1;
        s->next_seq = queued_seq + 1;
        s->last_activity_ns = now;
    }
    while (s->pending < depth) {
        uint64_t queued_seq = 0;
        if (drmCrtcQueueSequence(fd, s->crtc, DRM_CRTC_SEQUENCE_NEXT_ON_MISS, s->next_seq, &queued_seq, user) != 0) break;
        s->pending++;
        s->next_seq = queued_seq + 1;
    }
    return 1;
}

int main(int argc, char **argv) {
    const char *device = "/dev/dri/card0";
    uint32_t crtc = 0;
    double seconds = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--device")) device = argv[i + 1];
        else if (!strcmp(argv[i], "--crtc")) crtc = (uint32_t)strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--watch")) {
            char *colon = strrchr(argv[i + 1], ':');
            if (!colon || !strtoul(colon + 1, NULL, 10)) {
                fprintf(stderr, "kernel-vblank-recorder: --watch wants DEVICE:CRTC, got %s\n", argv[i + 1]);
                return 64;
            }
            *colon = 0;
            legacy_output = 0;
            add_stream(argv[i + 1], (uint32_t)strtoul(colon + 1, NULL, 10));
        } else { fprintf(stderr, "kernel-vblank-recorder: unknown option %s\n", argv[i]); return 64; }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    if (nstreams == 0) add_stream(device, crtc);
    /* The budget is per open file, one per card: the card with the most CRTCs sets the depth. */
    for (int c = 0; c < ncards; c++) {
        int n = 0;
        for (int i = 0; i < nstreams; i++) n += streams[i].card == &cards[c];
        if (n && EVENT_BUDGET / n < depth) depth = EVENT_BUDGET / n;
    }
    drmEventContext ctx = {.version = 4, .sequence_handler = on_sequence};
    uint64_t end = seconds > 0 ? now_ns() + (uint64_t)(seconds * 1e9) : 0;
    while (!stop && (!end || now_ns() < end)) {
        uint64_t now = now_ns();
        int alive = 0;
        for (int i = 0; i < nstreams; i++) {
            struct stream *s = &streams[i];
            if (s->card->dead) continue;
            if (s->pending > 0 && now - s->last_activity_ns > 200000000u && !still_counting(s, now)) reopen(s->card);
            if (!feed(s, now)) s->card->dead = 1;
        }
        struct pollfd pfds[MAX_CARDS];
        struct card *polled[MAX_CARDS];
        int n = 0;
        for (int i = 0; i < ncards; i++) {
            if (cards[i].dead) continue;
            alive++;
            pfds[n] = (struct pollfd){.fd = cards[i].fd, .events = POLLIN};
            polled[n++] = &cards[i];
        }
        if (!alive) return 1;
        /* While a CRTC waits to come back, wake for its retry. */
        int wait_ms = 50;
        for (int i = 0; i < nstreams; i++)
            if (!streams[i].card->dead && streams[i].pending == 0) wait_ms = 2;
        int ready = poll(pfds, (nfds_t)n, wait_ms);
        for (int i = 0; ready > 0 && i < n; i++) {
            if (pfds[i].revents & POLLIN) drmHandleEvent(polled[i]->fd, &ctx);
            else if (pfds[i].revents & (POLLERR | POLLHUP | POLLNVAL)) {
                fprintf(stderr, "kernel-vblank-recorder: %s is gone\n", polled[i]->path);
                polled[i]->dead = 1;
            }
        }
    }
    return 0;
}
