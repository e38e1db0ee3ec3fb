/*
 * vsync-glib: vsyncd's frames in a GLib main loop (as a GTK or GStreamer program has one).
 *
 *   cc vsync-glib.c $(pkg-config --cflags --libs vsync-glib) -o vsync-glib
 *   ./vsync-glib [--fps N] [--frames N] [--display NAME] [--socket PATH]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vsync/vsync-glib.h>

struct app {
    GMainLoop *loop;
    long frames_wanted, frames_seen;
};

static gboolean on_frame(const struct vsync_frame *f, gpointer user_data) {
    struct app *app = user_data;
    printf("seq %" PRIu64 "  t %.6f  interval %.3f ms  skipped %u\n", f->sequence, f->timestamp_ns / 1e9,
           f->interval_ns / 1e6, f->skipped);
    if (app->frames_wanted > 0 && ++app->frames_seen >= app->frames_wanted) {
        g_main_loop_quit(app->loop);
        return G_SOURCE_REMOVE; /* the source, its link and its connection go */
    }
    return G_SOURCE_CONTINUE;
}

int main(int argc, char **argv) {
    double fps = 0;
    const char *display = NULL, *socket_path = NULL;
    struct app app = {g_main_loop_new(NULL, FALSE), 0, 0};
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--fps")) fps = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--frames")) app.frames_wanted = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--display")) display = argv[i + 1];
        else if (!strcmp(argv[i], "--socket")) socket_path = argv[i + 1];
    }
    GError *error = NULL;
    GSource *source = vsync_source_new(socket_path, display, &error);
    if (source == NULL) {
        fprintf(stderr, "vsync-glib: %s\n", error->message);
        return 1;
    }
    vsync_link_set_rate(vsync_source_get_link(source), 0, 0, fps);
    g_source_set_callback(source, G_SOURCE_FUNC(on_frame), &app, NULL);
    g_source_attach(source, NULL);
    g_source_unref(source);
    g_main_loop_run(app.loop);
    g_main_loop_unref(app.loop);
    printf("%ld frames\n", app.frames_seen);
    return 0;
}
