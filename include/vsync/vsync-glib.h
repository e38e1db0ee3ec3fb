/*
 * vsync-glib.h: vsyncd's frames as a GLib main-loop source, for GTK and GStreamer programs and
 * anything else that runs a GMainContext.
 *
 *   GError *error = NULL;
 *   GSource *source = vsync_source_new(NULL, "primary", &error);   // NULL and error set on failure
 *   vsync_link_set_rate(vsync_source_get_link(source), 0, 0, 30);  // any libvsync link call
 *   g_source_set_callback(source, G_SOURCE_FUNC(on_frame), app, NULL);
 *   g_source_attach(source, NULL);                                 // or any thread's context
 *   g_source_unref(source);
 *
 *   static gboolean on_frame(const struct vsync_frame *frame, gpointer user_data);
 *
 * Header-only (static inline), so libvsync itself gains no dependency on GLib:
 *   cc app.c $(pkg-config --cflags --libs vsync-glib)
 *
 * A source owns one libvsync client (one connection to vsyncd) and one link to a display, and
 * calls its callback once per frame of that link on the thread that iterates the context it is
 * attached to; returning G_SOURCE_REMOVE (FALSE) destroys the source. Its one fd sits in the
 * context's poll set (g_source_add_unix_fd) with no timeout: while the link is paused, or no
 * frame comes, the loop sleeps. Links made on vsync_source_get_client() with their own libvsync
 * callbacks are dispatched by the same source. Finalizing the source destroys the link and the
 * client. docs/LIBVSYNC.md has the details.
 *
 * Threading: as for any libvsync client, one thread at a time. Make libvsync calls on the
 * source's link and client from the thread that iterates its context (or before attaching it).
 * The link's error and display callbacks (vsync_link_set_error_callback, ..._display_callback)
 * get the GSource as their user pointer.
 */
#ifndef VSYNC_VSYNC_GLIB_H
#define VSYNC_VSYNC_GLIB_H

#include <glib.h>
#include <vsync/vsync.h>

G_BEGIN_DECLS

/* The callback g_source_set_callback() takes for a vsync source (cast with G_SOURCE_FUNC). The
 * frame is valid during the call. Return G_SOURCE_CONTINUE to keep the source. */
typedef gboolean (*VsyncSourceFunc)(const struct vsync_frame *frame, gpointer user_data);

/* GError domain of vsync_source_new(); codes are the VSYNC_E* values (positive errnos). */
#define VSYNC_ERROR (vsync_error_quark())

static inline GQuark vsync_error_quark(void) {
    return g_quark_from_static_string("vsync-error-quark");
}

/* The source's state. Public only because the functions are inline: use the accessors. */
typedef struct {
    GSource source;
    gpointer fd_tag;
    struct vsync_client *client;
    struct vsync_link *link;
    /* Set only while the source dispatches: where the link's frame goes. */
    VsyncSourceFunc callback;
    gpointer user_data;
    gboolean keep;
} VsyncSource;

static inline void vsync_source_on_frame_(struct vsync_link *link, const struct vsync_frame *frame, void *user) {
    VsyncSource *self = (VsyncSource *)user;
    (void)link;
    if (self->keep && self->callback != NULL && !self->callback(frame, self->user_data)) self->keep = FALSE;
}

/* No prepare and no check: the fd alone says when to dispatch, so the source never makes the
 * loop wake on a timeout of its own. */
static inline gboolean vsync_source_dispatch_(GSource *source, GSourceFunc callback, gpointer user_data) {
    VsyncSource *self = (VsyncSource *)source;
    if (callback == NULL) {
        /* GLib's own sources say the same: frames are read (the fd must be drained) and dropped. */
        g_warning("vsync source dispatched without callback: call g_source_set_callback()");
    }
    self->callback = (VsyncSourceFunc)(void (*)(void))callback;
    self->user_data = user_data;
    self->keep = TRUE;
    /* 0: never wait here; the fd was readable. Connection trouble goes to the link's error
     * callback and the client reconnects by itself, so a negative return needs nothing else. */
    vsync_client_dispatch(self->client, 0);
    self->callback = NULL;
    self->user_data = NULL;
    return self->keep;
}

static inline void vsync_source_finalize_(GSource *source) {
    VsyncSource *self = (VsyncSource *)source;
    /* GLib has taken the fd out of the context's poll set by now, so closing it is safe. */
    if (self->link != NULL) vsync_link_destroy(self->link);
    if (self->client != NULL) vsync_client_destroy(self->client);
    self->link = NULL;
    self->client = NULL;
}

static inline const GSourceFuncs *vsync_source_funcs_(void) {
    static const GSourceFuncs funcs = {NULL, NULL, vsync_source_dispatch_, vsync_source_finalize_, NULL, NULL};
    return &funcs;
}

/* A source for frames of `display` (NULL or "primary", a connector name, "crtc:ID", ... as
 * vsync_link_create takes it) at its full rate, connected to vsyncd at socket_path (NULL:
 * $VSYNCD_SOCKET, else the system's socket). Connecting waits for vsyncd's handshake (up to
 * 2 s), as vsync_client_connect() does. NULL with *error set (VSYNC_ERROR, the code and
 * libvsync's line saying what to do) when it cannot connect or the selector is invalid. */
static inline GSource *vsync_source_new(const char *socket_path, const char *display, GError **error) {
    struct vsync_client *client = NULL;
    int rc = vsync_client_connect(socket_path, &client);
    if (rc < 0) {
        g_set_error_literal(error, VSYNC_ERROR, -rc, vsync_client_last_error(NULL));
        return NULL;
    }
    /* GLib copies the funcs' pointer, not the table: the table is static. */
    GSource *source = g_source_new((GSourceFuncs *)vsync_source_funcs_(), sizeof(VsyncSource));
    VsyncSource *self = (VsyncSource *)source;
    self->client = client;
    rc = vsync_link_create(client, display, vsync_source_on_frame_, self, &self->link);
    if (rc < 0) {
        g_set_error_literal(error, VSYNC_ERROR, -rc, vsync_client_last_error(client));
        g_source_unref(source); /* finalize destroys the client */
        return NULL;
    }
    self->fd_tag = g_source_add_unix_fd(source, vsync_client_get_fd(client), G_IO_IN);
    g_source_set_name(source, "vsync");
    return source;
}

/* The source's link: set its rate, pause it, give it a work duration, read its refresh. */
static inline struct vsync_link *vsync_source_get_link(GSource *source) {
    return ((VsyncSource *)source)->link;
}

/* The source's client: list displays, read the timing page, make more links on the same
 * connection (their callbacks run when this source dispatches). */
static inline struct vsync_client *vsync_source_get_client(GSource *source) {
    return ((VsyncSource *)source)->client;
}

G_END_DECLS

#endif
