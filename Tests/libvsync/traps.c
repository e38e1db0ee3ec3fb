/*
 * traps: the C API's former traps, each driven through the ABI for
 * Tests/DaemonTests/LibvsyncTrapTests.swift, which checks the lines it prints.
 *
 *   traps errno SOCKET          calls fail with negative errno values that strerror(-rc) names
 *   traps threads DIR           two threads connect to missing sockets at once: each reads its own line
 *   traps failures SOCKET       link_create and the setters say why they fail; a dead link's calls
 *   traps destroy ORDER SOCKET  client-first | links-first | in-callback | client-in-callback
 *                               (run under valgrind: no access to freed memory in any order)
 *   traps signal SOCKET         a SA_RESTART SIGALRM ends dispatch(-1) on a paused link
 *   traps displays SOCKET       vsync_client_get_displays, one line per display
 *   traps version               the header's version and the library's
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vsync/vsync.h>

/* The header's numbers are Linux's errno values: a mismatch does not compile. */
_Static_assert(VSYNC_ENODAEMON == ECONNREFUSED, "ENODAEMON");
_Static_assert(VSYNC_EACCES == EACCES, "EACCES");
_Static_assert(VSYNC_ECONNECT == EIO, "ECONNECT");
_Static_assert(VSYNC_ECONNLOST == ECONNRESET, "ECONNLOST");
_Static_assert(VSYNC_EREFUSED == ECONNABORTED, "EREFUSED");
_Static_assert(VSYNC_ENODISPLAY == ENODEV, "ENODISPLAY");
_Static_assert(VSYNC_EDISPLAYGONE == ENXIO, "EDISPLAYGONE");
_Static_assert(VSYNC_EREQUEST == EREMOTEIO, "EREQUEST");
_Static_assert(VSYNC_EPROTO == EPROTO, "EPROTO");
_Static_assert(VSYNC_EINVAL == EINVAL, "EINVAL");
_Static_assert(VSYNC_ENOMEM == ENOMEM, "ENOMEM");
_Static_assert(VSYNC_ETIMEDOUT == ETIMEDOUT, "ETIMEDOUT");
_Static_assert(VSYNC_ENOTCONN == ENOTCONN, "ENOTCONN");
_Static_assert(VSYNC_EBUSY == EBUSY, "EBUSY");
_Static_assert(VSYNC_ENOPAGE == ENODATA, "ENOPAGE");
_Static_assert(VSYNC_ENOTONPAGE == ENOENT, "ENOTONPAGE");
_Static_assert(VSYNC_EAGAIN == EAGAIN, "EAGAIN");

static struct vsync_client *client;

static struct vsync_client *connect_or_die(const char *path) {
    struct vsync_client *c;
    int rc = vsync_client_connect(path, &c);
    if (rc < 0) {
        printf("connect failed %d %s\n", rc, vsync_client_last_error(NULL));
        exit(1);
    }
    return c;
}

static void on_frame_count(struct vsync_link *link, const struct vsync_frame *f, void *user) {
    (void)link;
    (void)f;
    ++*(long *)user;
}

/* Dispatches until `*count` reaches `want` (or 10 s of dispatch waits pass). */
static void run_until(long *count, long want) {
    for (int i = 0; i < 100 && *count < want; i++) vsync_client_dispatch(client, 100);
}

static int errno_case(const char *path) {
    client = connect_or_die(path);
    struct vsync_link *link;
    long frames = 0;
    vsync_link_create(client, NULL, on_frame_count, &frames, &link);
    int rc = vsync_link_set_rate(link, -5, 0, 0);
    printf("set_rate rc=%d errno-name=%s strerror=%s\n", rc, rc == -EINVAL ? "EINVAL" : "other", strerror(-rc));
    printf("last=%s\n", vsync_client_last_error(client));
    rc = vsync_link_set_work_duration(link, 2000000000ull);
    printf("work_duration rc=%d strerror=%s\n", rc, strerror(-rc));
    rc = vsync_client_connect("/nonexistent/vsyncd.sock", &(struct vsync_client *){0});
    printf("connect rc=%d is-ECONNREFUSED=%d strerror=%s\n", rc, rc == -ECONNREFUSED, strerror(-rc));
    printf("vsync_strerror(-EPIPE)=%s\n", vsync_strerror(-EPIPE));
    vsync_link_destroy(link);
    vsync_client_destroy(client);
    return 0;
}

struct thread_arg {
    const char *dir;
    int index;
    int mismatches;
};

static void *connect_loop(void *p) {
    struct thread_arg *a = p;
    char path[256], want[300];
    snprintf(path, sizeof path, "%s/missing-%d.sock", a->dir, a->index);
    snprintf(want, sizeof want, "no vsyncd at %s:", path);
    for (int i = 0; i < 2000; i++) {
        struct vsync_client *c;
        if (vsync_client_connect(path, &c) == 0) vsync_client_destroy(c);
        const char *line = vsync_client_last_error(NULL);
        if (strncmp(line, want, strlen(want)) != 0) a->mismatches++;
    }
    return NULL;
}

static int threads_case(const char *dir) {
    pthread_t t[2];
    struct thread_arg args[2] = {{dir, 1, 0}, {dir, 2, 0}};
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, connect_loop, &args[i]);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    printf("threads mismatches=%d,%d\n", args[0].mismatches, args[1].mismatches);
    return 0;
}

static void on_display_noop(struct vsync_link *link, const struct vsync_display_event *e, void *user) {
    (void)link, (void)e, (void)user;
}

static int failures_case(const char *path) {
    client = connect_or_die(path);
    struct vsync_link *link = (struct vsync_link *)&link; /* not NULL: the call must clear it */
    int rc = vsync_link_create(client, "crtc:x", on_frame_count, NULL, &link);
    printf("create crtc:x rc=%d link=%s last=%s\n", rc, link ? "set" : "null", vsync_client_last_error(client));
    rc = vsync_link_create(client, "crtc:0", on_frame_count, NULL, &link);
    printf("create crtc:0 rc=%d link=%s\n", rc, link ? "set" : "null");
    printf("create out=NULL rc=%d\n", vsync_link_create(client, NULL, on_frame_count, NULL, NULL));
    printf("set_display_callback NULL rc=%d\n", vsync_link_set_display_callback(NULL, on_display_noop));
    printf("set_error_callback NULL rc=%d\n", vsync_link_set_error_callback(NULL, NULL));
    rc = vsync_link_create(client, NULL, on_frame_count, NULL, &link);
    printf("create primary rc=%d link=%s\n", rc, link ? "set" : "null");
    printf("set_display_callback live rc=%d\n", vsync_link_set_display_callback(link, on_display_noop));
    vsync_client_destroy(client);
    printf("dead set_rate rc=%d set_paused rc=%d set_error_callback rc=%d max_fps rc=%d\n",
           vsync_link_set_rate(link, 0, 0, 30), vsync_link_set_paused(link, true),
           vsync_link_set_error_callback(link, NULL), vsync_link_get_max_fps(link));
    vsync_link_destroy(link);
    return 0;
}

static struct vsync_link *victim;

static void on_frame_destroying(struct vsync_link *link, const struct vsync_frame *f, void *user) {
    (void)f;
    long *count = user;
    if (++*count == 2) {
        if (victim) vsync_link_destroy(victim); /* another link, from this one's callback */
        victim = NULL;
        vsync_link_destroy(link); /* itself */
    }
}

static void on_frame_destroying_client(struct vsync_link *link, const struct vsync_frame *f, void *user) {
    (void)link, (void)f;
    if (++*(long *)user == 2) {
        vsync_client_destroy(client);
        client = NULL;
    }
}

static int destroy_case(const char *order, const char *path) {
    client = connect_or_die(path);
    long a_frames = 0, b_frames = 0;
    struct vsync_link *a, *b;
    if (!strcmp(order, "in-callback")) {
        vsync_link_create(client, NULL, on_frame_count, &b_frames, &victim);
        vsync_link_create(client, NULL, on_frame_destroying, &a_frames, &a);
        run_until(&a_frames, 2);
        long more = 0;
        vsync_link_create(client, NULL, on_frame_count, &more, &b);
        run_until(&more, 2);
        printf("destroy in-callback a=%ld more=%ld\n", a_frames, more);
        vsync_client_destroy(client);
        vsync_link_destroy(b);
        return 0;
    }
    if (!strcmp(order, "client-in-callback")) {
        vsync_link_create(client, NULL, on_frame_destroying_client, &a_frames, &a);
        vsync_link_create(client, NULL, on_frame_count, &b_frames, &b);
        for (int i = 0; i < 100 && client; i++) vsync_client_dispatch(client, 100);
        printf("destroy client-in-callback client=%s a=%ld\n", client ? "alive" : "destroyed", a_frames);
        printf("dead set_rate rc=%d\n", vsync_link_set_rate(b, 0, 0, 30));
        vsync_link_destroy(b);
        vsync_link_destroy(a);
        return 0;
    }
    vsync_link_create(client, NULL, on_frame_count, &a_frames, &a);
    vsync_link_create(client, "display:1", on_frame_count, &b_frames, &b);
    run_until(&a_frames, 3);
    if (!strcmp(order, "client-first")) {
        vsync_client_destroy(client);
        printf("dead set_rate rc=%d get_refresh rc=%d\n", vsync_link_set_rate(a, 0, 0, 30),
               vsync_link_get_refresh(b, NULL, NULL));
        vsync_link_destroy(b);
        vsync_link_destroy(a);
    } else {
        vsync_link_destroy(a);
        vsync_link_destroy(b);
        vsync_client_destroy(client);
    }
    printf("destroy %s a=%ld\n", order, a_frames);
    return 0;
}

static volatile sig_atomic_t alarms;
static void on_alarm(int signo) {
    (void)signo;
    alarms++;
}

static int signal_case(const char *path) {
    client = connect_or_die(path);
    struct vsync_link *link;
    long frames = 0;
    vsync_link_create(client, NULL, on_frame_count, &frames, &link);
    vsync_link_set_paused(link, true);
    /* Until vsyncd answered the SUBSCRIBE (its refresh is known): the client is then steady. */
    uint64_t mhz = 0;
    for (int i = 0; i < 100 && mhz == 0; i++) {
        vsync_client_dispatch(client, 100);
        vsync_link_get_refresh(link, &mhz, NULL);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART; /* the kernel restarts a plain blocking recv after this handler */
    sigaction(SIGALRM, &sa, NULL);
    /* A parent (the test runner) may hand down a mask that blocks SIGALRM. */
    sigset_t alrm;
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);
    sigprocmask(SIG_UNBLOCK, &alrm, NULL);
    alarm(1);
    uint64_t start = vsync_now_ns();
    int rc = vsync_client_dispatch(client, -1);
    printf("dispatch returned rc=%d alarms=%d after_ms=%llu refresh=%llu\n", rc, (int)alarms,
           (unsigned long long)((vsync_now_ns() - start) / 1000000), (unsigned long long)mhz);
    vsync_link_destroy(link);
    vsync_client_destroy(client);
    return 0;
}

static int displays_case(const char *path) {
    client = connect_or_die(path);
    int n = vsync_client_get_displays(client, NULL, 0, sizeof(struct vsync_display));
    printf("count %d\n", n);
    struct vsync_display list[VSYNC_MAX_DISPLAYS];
    n = vsync_client_get_displays(client, list, VSYNC_MAX_DISPLAYS, sizeof list[0]);
    for (int i = 0; i < n && i < VSYNC_MAX_DISPLAYS; i++) {
        struct vsync_display *d = &list[i];
        printf("display id=%u name=%s state=%u flags=%u refresh_mhz=%llu period_ns=%llu size=%ux%u device=[%s] bus=[%s] "
               "make=[%s] model=[%s] serial=[%s] struct_size=%u generation=%u residual_samples=%u\n",
               d->display_id, d->name, d->state, d->flags, (unsigned long long)d->refresh_mhz,
               (unsigned long long)d->period_ns, d->width, d->height, d->device_path, d->bus_path, d->edid_make,
               d->edid_model, d->edid_serial, d->struct_size, d->generation, d->residual_samples);
    }
    /* A program built against 0.3.0's header passes its 360-byte struct: it gets those fields. */
    unsigned char old[2][360];
    memset(old, 0xEE, sizeof old);
    int rc = vsync_client_get_displays(client, (struct vsync_display *)(void *)old, 1, 360);
    uint32_t old_size;
    memcpy(&old_size, old[0], sizeof old_size);
    printf("old element rc=%d struct_size=%u untouched=%d\n", rc, old_size, old[1][0] == 0xEE);
    printf("small element rc=%d\n", vsync_client_get_displays(client, list, 1, 8));
    vsync_client_destroy(client);
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *what = argc >= 2 ? argv[1] : "";
    if (!strcmp(what, "version")) {
        printf("header %d.%d.%d 0x%06x library 0x%06x\n", VSYNC_VERSION_MAJOR, VSYNC_VERSION_MINOR, VSYNC_VERSION_MICRO,
               (unsigned)VSYNC_VERSION, (unsigned)vsync_version());
        return 0;
    }
    if (argc >= 3 && !strcmp(what, "errno")) return errno_case(argv[2]);
    if (argc >= 3 && !strcmp(what, "threads")) return threads_case(argv[2]);
    if (argc >= 3 && !strcmp(what, "failures")) return failures_case(argv[2]);
    if (argc >= 4 && !strcmp(what, "destroy")) return destroy_case(argv[2], argv[3]);
    if (argc >= 3 && !strcmp(what, "signal")) return signal_case(argv[2]);
    if (argc >= 3 && !strcmp(what, "displays")) return displays_case(argv[2]);
    fprintf(stderr, "usage: traps errno|threads|failures|destroy ORDER|signal|displays SOCKET, or traps version\n");
    return 64;
}
