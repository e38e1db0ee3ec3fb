/*
 * libvsync: frame ticks from vsyncd (the display's real vertical blanks) for any program.
 *
 * One client is one connection to vsyncd. Put its one fd in whatever loop you have (poll, epoll,
 * GLib, libuv, a game loop) and call vsync_client_dispatch() when it is readable: the library
 * owns no thread, and every callback runs inside dispatch, on the calling thread. Each link
 * follows one display at its own rate and gets a callback per frame. The library reconnects
 * by itself after a daemon restart and renews every link. docs/LIBVSYNC.md has the details.
 *
 * Threading: a client and its links are used by one thread at a time (like the default queue
 * of libwayland-client). Callbacks run inside vsync_client_dispatch(); a callback may change or
 * destroy its own link or others, and create links, but must not call vsync_client_dispatch()
 * or vsync_client_destroy().
 *
 * ABI: libvsync.so.0. Structs the library fills start with struct_size (the size the library
 * filled); fields are only ever appended. Error codes are negative VSYNC_E* values.
 *
 * Build: cc app.c $(pkg-config --cflags --libs vsync)
 */
#ifndef VSYNC_VSYNC_H
#define VSYNC_VSYNC_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes; calls return them negated. vsync_strerror() explains each in one line. */
#define VSYNC_ENODAEMON 1      /* no vsyncd listens on the socket */
#define VSYNC_EACCES 2         /* the user may not connect: not in the socket's group */
#define VSYNC_ECONNECT 3       /* connecting or talking to vsyncd failed otherwise */
#define VSYNC_ECONNLOST 4      /* vsyncd closed the connection; the client reconnects */
#define VSYNC_EREFUSED 5       /* vsyncd refused the handshake (version, too many clients) */
#define VSYNC_ENODISPLAY 6     /* no display matches the link's selector */
#define VSYNC_EDISPLAYGONE 7   /* the link's display was unplugged or its card went away */
#define VSYNC_EREQUEST 8       /* vsyncd rejected a request */
#define VSYNC_EPROTO 9         /* an unreadable message from vsyncd */
#define VSYNC_EINVAL 10        /* a bad argument */
#define VSYNC_ENOMEM 11        /* out of memory */
#define VSYNC_ETIMEDOUT 12     /* vsyncd did not answer the handshake in time */

/* struct vsync_frame.flags: where the frame's timestamp came from. */
#define VSYNC_FRAME_HARDWARE 1u  /* the kernel's vblank timestamp */
#define VSYNC_FRAME_PREDICTED 2u /* a prediction of the daemon's refresh model */
#define VSYNC_FRAME_SYNTHETIC 4u /* vsyncd's timer source: no display behind it */

/* struct vsync_display_event.kind */
#define VSYNC_DISPLAY_MODE_CHANGED 1 /* new refresh: re-read the rate */
#define VSYNC_DISPLAY_OFF 2          /* frames stop until it is on again */
#define VSYNC_DISPLAY_ON 3
#define VSYNC_DISPLAY_WAITING 4      /* no such display yet: frames start when it appears (0.3.0) */

struct vsync_client;
struct vsync_link;

/* One upcoming presentation candidate at the link's rate. */
struct vsync_frame_timeline {
    uint64_t sequence;            /* a vblank the frame could be shown at */
    uint64_t presentation_ns;     /* its predicted time */
};

/* One frame: the newest tick of a link in one dispatch. Times are CLOCK_MONOTONIC ns, the clock
 * of vsync_now_ns(). Fields after `reserved` came in 0.3.0: check struct_size before reading them
 * if the program may run with an older library. */
struct vsync_frame {
    uint32_t struct_size;         /* bytes the library filled; newer libraries append fields */
    uint32_t display_id;          /* vsyncd's id of the display */
    uint64_t sequence;            /* the vblank's 64-bit sequence, a multiple of divisor */
    uint64_t timestamp_ns;        /* when that vblank happened (CADisplayLink timestamp) */
    uint64_t target_timestamp_ns; /* the next vblank at the link's rate: the frame's deadline */
    uint64_t duration_ns;         /* the display's frame interval (CADisplayLink duration) */
    uint32_t skipped;             /* frames at the link's rate not delivered since the last one */
    uint32_t flags;               /* VSYNC_FRAME_* */
    uint64_t interval_ns;         /* frame interval at the link's rate: divisor × duration_ns */
    uint64_t received_ns;         /* when the library read the tick */
    uint32_t divisor;             /* the link gets every divisor-th vblank */
    uint32_t reserved;
    /* 0.3.0 */
    uint64_t target_sequence;     /* the vblank the frame is for (target_timestamp_ns is its time) */
    uint32_t timeline_count;      /* 1 to 4 */
    uint32_t reserved2;
    struct vsync_frame_timeline timelines[4]; /* the target, then later vblanks at the link's rate */
};

/* A change to a link's display. */
struct vsync_display_event {
    uint32_t struct_size;
    uint32_t kind;                /* VSYNC_DISPLAY_* */
    uint32_t display_id;
    uint32_t reserved;
    uint64_t refresh_mhz;         /* exact refresh in millihertz (59940 = 59.94 Hz); 0 if off */
    uint64_t period_ns;           /* the display's frame interval */
};

typedef void (*vsync_frame_fn)(struct vsync_link *link, const struct vsync_frame *frame, void *user);
typedef void (*vsync_display_fn)(struct vsync_link *link, const struct vsync_display_event *event, void *user);
/* code is a negative VSYNC_E*; message is one line saying what failed and what to do, valid
 * during the call. Connection errors are reported once per link until the next handshake. */
typedef void (*vsync_error_fn)(struct vsync_link *link, int code, const char *message, void *user);

/* Connects to vsyncd and does the handshake (waiting up to 2 s). socket_path NULL means
 * $VSYNCD_SOCKET, else /run/vsyncd/vsyncd.sock. Returns 0 and the client in *out, or a negative
 * VSYNC_E* (*out is then NULL; vsync_client_last_error(NULL) gives the whole line). */
int vsync_client_connect(const char *socket_path, struct vsync_client **out);

/* The fd to poll for reading. It stays the same for the client's life, across reconnects. */
int vsync_client_get_fd(struct vsync_client *client);

/* Waits up to timeout_ms (0: not at all, -1: until something happens; a signal ends the wait),
 * reads what is pending, reconnects if vsyncd went away, and runs the callbacks. Returns the
 * number of frames delivered, or a negative VSYNC_E*. */
int vsync_client_dispatch(struct vsync_client *client, int timeout_ms);

/* The last error's whole line (with the socket path), or "" if none; valid until the next call
 * on the client. With NULL: why the last vsync_client_connect() failed (not thread-safe). */
const char *vsync_client_last_error(struct vsync_client *client);

/* Closes the connection and frees the client and every link still on it. */
void vsync_client_destroy(struct vsync_client *client);

/* A link to one display: display NULL or "primary", a connector name ("HDMI-A-1"), "crtc:ID" or
 * "display:ID". Frames come at the display's full rate unless vsync_link_set_rate() says
 * otherwise; settings made before the next vsync_client_dispatch() travel with the link's request
 * (the fd is readable until then), so its first frame already obeys them. NULL if an argument is
 * invalid. user is passed to every callback of the link. */
struct vsync_link *vsync_link_create(struct vsync_client *client, const char *display, vsync_frame_fn fn, void *user);

/* The rates the link accepts, like CAFrameRateRange: it gets refresh / d for a whole d, the one
 * inside [min, max] nearest preferred (max 0: no bound; preferred 0: the highest). All 0: the
 * display's full rate. 0, or -VSYNC_EINVAL for a range that is not finite, >= 0 and ordered. */
int vsync_link_set_rate(struct vsync_link *link, double min_fps, double max_fps, double preferred_fps);

/* Wake the link ns before each target vblank, rather than just after each vblank (0, the
 * default): the frame's target_timestamp_ns is then the vblank to present at, ns from now. ns may
 * exceed a frame (frames overlap); at most 1 s. 0, or -VSYNC_EINVAL. Since 0.3.0; a vsyncd older
 * than 0.3.0 ignores it. */
int vsync_link_set_work_duration(struct vsync_link *link, uint64_t ns);

/* While the display is off, or refuses vblank events, keep delivering frames predicted at the
 * last mode's rate, flagged VSYNC_FRAME_PREDICTED (default: none until it is on). Since 0.3.0. */
int vsync_link_set_predict_while_off(struct vsync_link *link, bool on);

/* Paused, vsyncd sends nothing for the link (and asks the kernel for nothing if no link runs). */
int vsync_link_set_paused(struct vsync_link *link, bool paused);

void vsync_link_set_display_callback(struct vsync_link *link, vsync_display_fn fn);
void vsync_link_set_error_callback(struct vsync_link *link, vsync_error_fn fn);

/* The display's exact refresh (mHz) and frame interval (ns), as vsyncd last said; 0 until it has
 * answered. Returns 0, or -VSYNC_EINVAL. */
int vsync_link_get_refresh(struct vsync_link *link, uint64_t *refresh_mhz, uint64_t *period_ns);

/* The refresh rounded to whole frames per second (59.94 Hz gives 60), CADisplayLink's
 * maximumFramesPerSecond; 0 until vsyncd has answered. */
int vsync_link_get_max_fps(struct vsync_link *link);

void vsync_link_destroy(struct vsync_link *link);

/* The one line that explains a VSYNC_E* code (negative or positive). */
const char *vsync_strerror(int code);

/* CLOCK_MONOTONIC now, in ns: the clock of every timestamp. */
uint64_t vsync_now_ns(void);

#ifdef __cplusplus
}
#endif

#endif
