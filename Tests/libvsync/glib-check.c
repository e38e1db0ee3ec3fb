/*
 * glib-check: the GLib adapter (include/vsync/vsync-glib.h) against a real vsyncd, run by
 * LibvsyncGLibTests, which compares what it prints with the ticks vsyncd sent.
 *
 *   glib-check SOCKET FRAMES WINDOW
 *
 * A vsync source runs on a GMainContext iterated by a thread of its own (not the main one). Its
 * callback prints FRAMES frames, then pauses the link. The loop thread then settles: a request
 * vsyncd answers (the display list) follows the pause, so every tick sent before it has been
 * read, and one dispatch drains them. From there the loop must sleep: the main thread, on a
 * second client whose link keeps running, counts WINDOW vblanks and reads the loop thread's
 * wake-ups (poll returns, through the context's poll function) and its voluntary context
 * switches (/proc/self/task/TID/status) at both ends of that window. Finally the source is
 * destroyed and the process's open fds counted: finalize must close the client's.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vsync/vsync-glib.h>

struct loop_state {
    GMainContext *context;
    GMainLoop *loop;
    GSource *source;
    long frames_wanted;
    long frames_seen;
    long late_frames;      /* frames the callback got after it paused the link */
    int user_check;        /* the callback's user_data arrived intact */
    atomic_int tid;
    atomic_long polls_returned;
    atomic_int in_poll;
    atomic_long settled_at; /* polls_returned when the loop settled; -1 before */
};

static struct loop_state state;

/* The context's poll function: counts every return from poll(), i.e. every wake-up of the loop. */
static gint counting_poll(GPollFD *fds, guint nfds, gint timeout) {
    atomic_store(&state.in_poll, 1);
    gint n = g_poll(fds, nfds, timeout);
    atomic_store(&state.in_poll, 0);
    atomic_fetch_add(&state.polls_returned, 1);
    return n;
}

static gboolean settle(gpointer user_data) {
    (void)user_data;
    struct vsync_client *client = vsync_source_get_client(state.source);
    /* vsyncd answers requests in order and sends no tick of a paused link after the pause, so
     * once the display list is here every tick it will ever send for the link has been read. */
    int n = vsync_client_get_displays(client, NULL, 0, sizeof(struct vsync_display));
    int drained = vsync_client_dispatch(client, 0);
    printf("settled displays=%d drained=%d\n", n, drained);
    fflush(stdout);
    atomic_store(&state.settled_at, atomic_load(&state.polls_returned));
    return G_SOURCE_REMOVE;
}

static gboolean on_frame(const struct vsync_frame *f, gpointer user_data) {
    struct loop_state *s = user_data;
    s->user_check = s == &state;
    if (s->frames_seen >= s->frames_wanted) {
        s->late_frames++;
        return G_SOURCE_CONTINUE;
    }
    printf("frame seq=%" PRIu64 " ts=%" PRIu64 " target=%" PRIu64 " duration=%" PRIu64 " interval=%" PRIu64
           " divisor=%u skipped=%u flags=%u display=%u\n",
           f->sequence, f->timestamp_ns, f->target_timestamp_ns, f->duration_ns, f->interval_ns, f->divisor, f->skipped,
           f->flags, f->display_id);
    fflush(stdout);
    if (++s->frames_seen == s->frames_wanted) {
        vsync_link_set_paused(vsync_source_get_link(s->source), true);
        GSource *idle = g_idle_source_new();
        g_source_set_callback(idle, settle, NULL, NULL);
        g_source_attach(idle, s->context);
        g_source_unref(idle);
    }
    return G_SOURCE_CONTINUE;
}

static gpointer loop_thread(gpointer unused) {
    (void)unused;
    atomic_store(&state.tid, (int)gettid());
    g_main_context_push_thread_default(state.context);
    g_main_loop_run(state.loop);
    g_main_context_pop_thread_default(state.context);
    return NULL;
}

/* One field of /proc/self/task/TID/status. */
static long task_field(int tid, const char *name, char *text, size_t text_size) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/status", tid);
    FILE *f = fopen(path, "r");
    long value = -1;
    if (f == NULL) return -1;
    size_t len = strlen(name);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, name, len) == 0 && line[len] == ':') {
            const char *v = line + len + 1;
            while (*v == ' ' || *v == '\t') v++;
            if (text != NULL) snprintf(text, text_size, "%s", v);
            value = strtol(v, NULL, 10);
            break;
        }
    }
    fclose(f);
    return value;
}

static int open_fds(void) {
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL) return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n - 1; /* opendir's own */
}

static long helper_frames;
static uint64_t helper_sequence;

static void on_helper_frame(struct vsync_link *link, const struct vsync_frame *f, void *user) {
    (void)link;
    (void)user;
    helper_frames++;
    helper_sequence = f->sequence;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: glib-check SOCKET FRAMES WINDOW\n");
        return 64;
    }
    const char *socket_path = argv[1];
    long window = atol(argv[3]);
    state.frames_wanted = atol(argv[2]);
    atomic_store(&state.settled_at, -1);

    /* GLib makes the default context (and its wakeup fd) on first use, somewhere below: make it
     * now, so the fd count compares only what the sources opened and closed. */
    g_main_context_default();
    int fds_before = open_fds();
    GError *error = NULL;
    GSource *missing = vsync_source_new("/nonexistent/vsyncd.sock", NULL, &error);
    printf("no daemon: source=%s domain=%d code=%d message=%s\n", missing ? "yes" : "null",
           error && error->domain == VSYNC_ERROR, error ? error->code : 0, error ? error->message : "");
    g_clear_error(&error);
    GSource *invalid = vsync_source_new(socket_path, "crtc:0", &error);
    printf("bad selector: source=%s code=%d message=%s\n", invalid ? "yes" : "null", error ? error->code : 0,
           error ? error->message : "");
    g_clear_error(&error);
    printf("fds after failures: before=%d after=%d\n", fds_before, open_fds());

    state.context = g_main_context_new();
    g_main_context_set_poll_func(state.context, counting_poll);
    state.loop = g_main_loop_new(state.context, FALSE);
    state.source = vsync_source_new(socket_path, "timer", &error);
    if (state.source == NULL) {
        printf("FAIL vsync_source_new: %s\n", error->message);
        return 1;
    }
    g_source_set_callback(state.source, G_SOURCE_FUNC(on_frame), &state, NULL);
    g_source_attach(state.source, state.context);

    /* The window's clock: a second client whose link runs throughout. */
    struct vsync_client *helper;
    struct vsync_link *helper_link;
    if (vsync_client_connect(socket_path, &helper) < 0 ||
        vsync_link_create(helper, "timer", on_helper_frame, NULL, &helper_link) < 0) {
        printf("FAIL helper client: %s\n", vsync_client_last_error(NULL));
        return 1;
    }

    GThread *thread = g_thread_new("vsync-loop", loop_thread, NULL);
    long start_sequence = -1, start_switches = 0, start_polls = 0;
    long end_switches = 0, end_polls = 0;
    char sleep_state[64] = "";
    for (;;) {
        if (vsync_client_dispatch(helper, -1) <= 0) continue;
        int tid = atomic_load(&state.tid);
        long settled = atomic_load(&state.settled_at);
        if (start_sequence < 0) {
            /* The window opens at the first vblank that finds the loop settled and asleep in poll. */
            if (tid == 0 || settled < 0 || !atomic_load(&state.in_poll)) continue;
            char text[64];
            task_field(tid, "State", text, sizeof text);
            if (text[0] != 'S') continue;
            start_switches = task_field(tid, "voluntary_ctxt_switches", NULL, 0);
            start_polls = atomic_load(&state.polls_returned);
            start_sequence = (long)helper_sequence;
            printf("window opens at vblank %" PRIu64 " (%ld polls returned, settled after %ld)\n", helper_sequence,
                   start_polls, settled);
        } else if ((long)helper_sequence - start_sequence >= window) {
            end_switches = task_field(tid, "voluntary_ctxt_switches", NULL, 0);
            end_polls = atomic_load(&state.polls_returned);
            task_field(tid, "State", sleep_state, sizeof sleep_state);
            break;
        }
    }
    printf("idle window=%ld vblanks wakeups=%ld switches=%ld state=%c\n", (long)helper_sequence - start_sequence,
           end_polls - start_polls, end_switches - start_switches, sleep_state[0]);

    g_main_loop_quit(state.loop);
    g_thread_join(thread);
    printf("frames=%ld late=%ld user_data=%s\n", state.frames_seen, state.late_frames, state.user_check ? "ok" : "wrong");

    int fds_running = open_fds();
    vsync_link_destroy(helper_link);
    vsync_client_destroy(helper);
    g_source_destroy(state.source);
    g_source_unref(state.source);
    g_main_loop_unref(state.loop);
    g_main_context_unref(state.context);
    printf("fds: before=%d running=%d after=%d\n", fds_before, fds_running, open_fds());
    return 0;
}
