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
 * destroy its own link or others, create links, and destroy the client (the dispatch ends after
 * that callback), but must not call vsync_client_dispatch() or vsync_client_get_displays()
 * (both return -EBUSY).
 *
 * Errors follow libdrm's and sd-bus's convention: a call that fails returns a NEGATIVE errno
 * value (-EINVAL, -ECONNREFUSED, ...), so strerror(-rc) names it right; errno is not set. The
 * VSYNC_E* names below are the errno values libvsync returns, and vsync_strerror(rc) gives
 * libvsync's own line for each, saying what to do. vsync_client_last_error() has the whole line
 * of the last failure (with the socket path, the selector, ...).
 *
 * Lifetimes: destroy links and clients in any order. A link outlives its client's destroy as
 * a dead handle (its calls return -ENOTCONN) until vsync_link_destroy() frees it.
 *
 * ABI: libvsync.so.1. Structs the library fills start with struct_size (the size the library
 * filled); fields are only ever appended. Every export is listed in the library's version script.
 *
 * Build: cc app.c $(pkg-config --cflags --libs vsync)
 */
#ifndef VSYNC_VSYNC_H
#define VSYNC_VSYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The release this header came with; vsync_version() gives the library's at run time. */
#define VSYNC_VERSION_MAJOR 0
#define VSYNC_VERSION_MINOR 3
#define VSYNC_VERSION_MICRO 0
#define VSYNC_VERSION ((VSYNC_VERSION_MAJOR << 16) | (VSYNC_VERSION_MINOR << 8) | VSYNC_VERSION_MICRO)

/* The errno values calls return negated, as numbers so this header needs no <errno.h>: Linux's
 * values (a test checks each against <errno.h>). vsync_strerror() explains each in one line. */
#define VSYNC_ENODAEMON    111  /* no vsyncd listens on the socket (ECONNREFUSED) */
#define VSYNC_EACCES       13   /* the user may not connect: not in the socket's group (EACCES) */
#define VSYNC_ECONNECT     5    /* connecting or talking to vsyncd failed otherwise (EIO) */
#define VSYNC_ECONNLOST    104  /* vsyncd closed the connection; the client reconnects (ECONNRESET) */
#define VSYNC_EREFUSED     103  /* vsyncd refused the handshake (version, too many clients) (ECONNABORTED) */
#define VSYNC_ENODISPLAY   19   /* no display matches the link's selector (ENODEV) */
#define VSYNC_EDISPLAYGONE 6    /* the link's display was unplugged or its card went away (ENXIO) */
#define VSYNC_EREQUEST     121  /* vsyncd rejected a request (EREMOTEIO) */
#define VSYNC_EPROTO       71   /* an unreadable message from vsyncd (EPROTO) */
#define VSYNC_EINVAL       22   /* a bad argument (EINVAL) */
#define VSYNC_ENOMEM       12   /* out of memory (ENOMEM) */
#define VSYNC_ETIMEDOUT    110  /* vsyncd did not answer in time (ETIMEDOUT) */
#define VSYNC_ENOTCONN     107  /* the link's client was destroyed (ENOTCONN) */
#define VSYNC_EBUSY        16   /* called from inside a callback, where it may not be (EBUSY) */
#define VSYNC_ENOPAGE      61   /* no timing page: not connected yet, or vsyncd without protocol 5 (ENODATA) */
#define VSYNC_ENOTONPAGE   2    /* the display has no record on the timing page (ENOENT) */
#define VSYNC_EAGAIN       11   /* the display's timing record stayed locked for 1000 tries (EAGAIN) */

/* struct vsync_frame.flags: where the frame's timestamp came from. */
#define VSYNC_FRAME_HARDWARE 1u  /* the kernel's vblank timestamp */
#define VSYNC_FRAME_PREDICTED 2u /* a prediction of the daemon's refresh model */
#define VSYNC_FRAME_SYNTHETIC 4u /* vsyncd's timer source: no display behind it */
#define VSYNC_FRAME_VARIABLE 8u  /* variable refresh (VRR) is on: no grid, so target_timestamp_ns and the
                                  * timelines are the EARLIEST each vblank can come (the last vblank + k ×
                                  * the shortest interval) and duration_ns is the shortest interval (protocol 5) */
#define VSYNC_FRAME_MODEL_TIMED 16u /* the display is on but vsyncd samples its vblanks sparsely and the vblank
                                     * interrupt sleeps: timestamp_ns is the refresh model's prediction of that
                                     * vblank, sequence the kernel's count for it (protocol 6; vsyncd(8)
                                     * --vblank-sampling sparse) */

/* struct vsync_display_event.kind. 1-3 are the wire's kinds; WAITING is the library's own, so it
 * sits apart from them (the wire's 4 and 5, added and removed, never reach a link as events). */
#define VSYNC_DISPLAY_MODE_CHANGED 1 /* new refresh: re-read the rate */
#define VSYNC_DISPLAY_OFF 2          /* frames stop until it is on again */
#define VSYNC_DISPLAY_ON 3
#define VSYNC_DISPLAY_VARIABLE_REFRESH_CHANGED 6 /* VRR turned on or off: flags has VSYNC_DISPLAY_FLAG_VARIABLE or not (protocol 5) */
#define VSYNC_DISPLAY_WAITING 256    /* no such display yet: frames start when it appears */

/* struct vsync_display.state and .flags */
#define VSYNC_DISPLAY_STATE_OFF 0u
#define VSYNC_DISPLAY_STATE_ON 1u
#define VSYNC_DISPLAY_FLAG_HARDWARE_CLOCK 1u /* timestamps from the kernel's vblank clock */
#define VSYNC_DISPLAY_FLAG_SYNTHETIC 2u      /* vsyncd's timer source: no display behind it */
#define VSYNC_DISPLAY_FLAG_PRIMARY 4u        /* what the selector NULL / "primary" picks */
#define VSYNC_DISPLAY_FLAG_INTERRUPT_TIMESTAMPS 8u /* the stamps' spread says interrupt time, not scanout (protocol 4) */
#define VSYNC_DISPLAY_FLAG_VARIABLE 16u          /* variable refresh (VRR) is on: vblanks come min_interval_ns to max_interval_ns apart (protocol 5) */
#define VSYNC_DISPLAY_FLAG_VARIABLE_CAPABLE 32u  /* the monitor can do variable refresh (the connector's vrr_capable) (protocol 5) */

/* struct vsync_display_timing.flags, above the VSYNC_DISPLAY_FLAG_* bits. */
#define VSYNC_TIMING_ON 0x10000u      /* the display is lit */
#define VSYNC_TIMING_CURRENT 0x20000u /* events on and a vblank since: last_* is at most a frame old */

/* vsyncd lists at most this many displays, at any protocol version (one list holds at most 42
 * displays at protocol 1 and 2, 18 at 3, 17 at 4, 15 at 5). */
#define VSYNC_MAX_DISPLAYS 42

/* Why a frame was late (vsync_link_frame_done), FrameTimeline's reasons, by the rules of the
 * Swift DisplayLink's FrameMonitor. The values are stable: a new reason takes the next value. */
enum vsync_frame_reason {
    VSYNC_REASON_ON_TIME = 0,              /* presented within VSYNC_JANK_PRESENT_THRESHOLD_NS of its target */
    VSYNC_REASON_APP_DEADLINE_MISSED = 1,  /* the app's work took longer than the time it had */
    VSYNC_REASON_DAEMON_LATE = 2,          /* vsyncd sent the tick late */
    VSYNC_REASON_DELIVERY_LATE = 3,        /* sent on time, read late: the app's thread did not run */
    VSYNC_REASON_PRESENT_SCHEDULING = 4,   /* finished in time, shown a whole number of vsyncs off */
    VSYNC_REASON_PREDICTION_ERROR = 5,     /* the vblank did not come when the refresh model said */
    VSYNC_REASON_VARIABLE_REFRESH = 6,     /* variable refresh: the display waited past the earliest vblank */
    VSYNC_REASON_DISPLAY_OFF = 7,          /* the display was off */
    VSYNC_REASON_PREDICTED_WHILE_OFF = 8,  /* a predicted frame (VSYNC_FRAME_PREDICTED) while the display was off */
    VSYNC_REASON_MODE_CHANGE = 9,          /* the display's mode (its generation) changed since the last frame */
    VSYNC_REASON_UNKNOWN = 10              /* the facts do not say (finished late yet shown early) */
};
#define VSYNC_REASON_COUNT 11              /* reasons this header knows */

/* The late-frame rules' thresholds (Android FrameTimeline's defaults). */
#define VSYNC_JANK_PRESENT_THRESHOLD_NS 2000000 /* a present this close to the target is on time */
#define VSYNC_JANK_DEADLINE_THRESHOLD_NS 0      /* work ending this long after the target still finished in time */
#define VSYNC_JANK_START_THRESHOLD_NS 2000000   /* a tick read this long after it was due still came on time */

/* A link's frames judged by vsync_link_frame_done() since the link was created. */
struct vsync_frame_counts {
    uint32_t struct_size;         /* set to sizeof(struct vsync_frame_counts) before the call */
    uint32_t reason_count;        /* entries of by_reason the library knows (VSYNC_REASON_COUNT) */
    uint64_t frames;              /* frames judged */
    uint64_t late;                /* of those, the ones not on time */
    uint64_t by_reason[16];       /* frames per enum vsync_frame_reason (ON_TIME included); room for more */
};

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
    /* after 0.3.0 (protocol 4; 0 from an older vsyncd) */
    uint32_t generation;          /* the display's configuration generation: differs from the last
                                   * frame's after any change of mode, on/off or timing model reset */
    uint32_t reserved3;
};

/* A change to a link's display. */
struct vsync_display_event {
    uint32_t struct_size;
    uint32_t kind;                /* VSYNC_DISPLAY_* */
    uint32_t display_id;
    uint32_t reserved;
    uint64_t refresh_mhz;         /* exact refresh in millihertz (59940 = 59.94 Hz); 0 if off */
    uint64_t period_ns;           /* the display's frame interval */
    /* after 0.3.0 (protocol 4; 0 from an older vsyncd) */
    uint32_t generation;          /* the display's configuration generation after the change */
    uint32_t reserved2;
    /* after 0.3.0 (protocol 5; 0 from an older vsyncd) */
    uint32_t flags;               /* VSYNC_DISPLAY_FLAG_* after the change */
    uint32_t reserved3;
    uint64_t min_interval_ns;     /* variable refresh: the shortest interval (1 / the EDID range's max rate) */
    uint64_t max_interval_ns;     /* and the longest (1 / its min rate; 0 unknown); both 0 when not capable */
    uint64_t monotonic_ns;        /* CLOCK_MONOTONIC and CLOCK_REALTIME read together when vsyncd built the */
    uint64_t realtime_ns;         /* event: maps the event's times onto the wall clock (0 for WAITING) */
};

/* One display as vsyncd lists it (vsync_client_get_displays). Strings are NUL-terminated UTF-8,
 * "" when unknown. The identity fields say which monitor it is across reboots and replugs. */
struct vsync_display {
    uint32_t struct_size;         /* bytes the library filled; newer libraries append fields */
    uint32_t display_id;          /* vsyncd's id: the selector "display:ID" */
    uint32_t crtc_id;             /* the DRM CRTC ("crtc:ID"); 0 for the timer source */
    uint32_t connector_id;        /* the DRM connector; 0 for the timer source */
    uint32_t state;               /* VSYNC_DISPLAY_STATE_* */
    uint32_t flags;               /* VSYNC_DISPLAY_FLAG_* */
    uint64_t refresh_mhz;         /* exact refresh in millihertz (59940 = 59.94 Hz); 0 if off */
    uint64_t period_ns;           /* the display's frame interval */
    uint32_t width;               /* active pixels; 0 for the timer source */
    uint32_t height;
    char name[40];                /* the connector: "HDMI-A-1", "Virtual-1"; "timer" */
    char device_path[64];         /* the card: "/dev/dri/card0" */
    char bus_path[128];           /* the card's stable path, as in /dev/dri/by-path: "pci-0000:00:02.0" */
    char edid_make[16];           /* the monitor's EDID manufacturer ("DEL") */
    char edid_model[32];          /* its EDID model name */
    char edid_serial[32];         /* its EDID serial number */
    /* after 0.3.0 (protocol 4; 0 from an older vsyncd) */
    uint32_t generation;          /* configuration generation: bumps once per change of mode, on/off, model reset */
    uint32_t residual_rms_ns;     /* the refresh model's residual RMS over its window */
    uint32_t residual_p99_ns;     /* and the 99th percentile of |residual| */
    uint32_t residual_samples;    /* vblanks those are over; 0: not measured (nobody followed it lately) */
    /* after 0.3.0 (protocol 5; 0 from an older vsyncd) */
    uint64_t min_interval_ns;     /* variable refresh range: the shortest interval (VK_EXT_present_timing's
                                   * refreshDuration), 1 / the EDID range's max rate; 0 when not capable */
    uint64_t max_interval_ns;     /* the longest, 1 / its min rate; 0 when not capable or unknown */
};

/* One display's timing from vsyncd's timing page (protocol 5; vsync_display_timing). Times are
 * CLOCK_MONOTONIC ns. The refresh model's line: vblank s is at
 * anchor_ns + (s - anchor_sequence) x period. */
struct vsync_display_timing {
    uint32_t struct_size;         /* bytes the library filled; newer libraries append fields */
    uint32_t display_id;
    uint32_t generation;          /* the display's configuration generation (as in frames) */
    uint32_t flags;               /* VSYNC_DISPLAY_FLAG_* in bits 0-15, VSYNC_TIMING_ON, VSYNC_TIMING_CURRENT */
    uint64_t last_sequence;       /* the last vblank vsyncd received */
    uint64_t last_timestamp_ns;   /* its kernel timestamp */
    uint64_t anchor_sequence;     /* the model's line: vblank anchor_sequence ... */
    uint64_t anchor_ns;           /* ... is at anchor_ns */
    uint64_t period_ns;           /* the model's period, whole ns; 0: not measured (next_* are 0) */
    uint32_t period_frac;         /* ... plus period_frac / 2^32 ns */
    uint32_t reserved;
    double period;                /* the same period in ns, as a double */
    uint64_t refresh_mhz;         /* the mode's exact refresh, mHz; 0 off or unknown */
    uint64_t min_interval_ns;     /* variable refresh: the shortest frame interval; 0 on a fixed grid */
    uint64_t max_interval_ns;     /* variable refresh: the longest; 0 on a fixed grid */
    uint64_t updated_ns;          /* when vsyncd last wrote the record */
    uint64_t next_sequence;       /* the first vblank the model puts strictly after after_ns */
    uint64_t next_ns;             /* its predicted time */
};

typedef void (*vsync_frame_fn)(struct vsync_link *link, const struct vsync_frame *frame, void *user);
typedef void (*vsync_display_fn)(struct vsync_link *link, const struct vsync_display_event *event, void *user);
/* code is a negative errno (VSYNC_E*); message is one line saying what failed and what to do,
 * valid during the call. Connection errors are reported once per link until the next handshake. */
typedef void (*vsync_error_fn)(struct vsync_link *link, int code, const char *message, void *user);

/* The library's version, encoded as VSYNC_VERSION is: (major << 16) | (minor << 8) | micro. */
uint32_t vsync_version(void);

/* Connects to vsyncd and does the handshake (waiting up to 2 s). socket_path NULL means
 * $VSYNCD_SOCKET, else /run/vsyncd/vsyncd.sock. Returns 0 and the client in *out, or a negative
 * errno (*out is then NULL; vsync_client_last_error(NULL) on this thread gives the whole line). */
int vsync_client_connect(const char *socket_path, struct vsync_client **out);

/* The fd to poll for reading. It stays the same for the client's life, across reconnects. */
int vsync_client_get_fd(struct vsync_client *client);

/* Waits up to timeout_ms (0: not at all, -1: until something happens), reads what is pending,
 * reconnects if vsyncd went away, and runs the callbacks. A signal ends the wait (0 frames), also
 * one whose handler has SA_RESTART. Returns the number of frames delivered, or a negative errno
 * (-EBUSY from inside a callback). */
int vsync_client_dispatch(struct vsync_client *client, int timeout_ms);

/* Asks vsyncd for its displays and waits for the answer (up to 2 s, connecting first if the
 * client is between connections). Fills up to capacity records of element_size bytes each
 * (pass sizeof(struct vsync_display): the library fills what both versions know and sets
 * struct_size) and returns how many displays vsyncd has, which may exceed capacity (at most
 * VSYNC_MAX_DISPLAYS); displays may be NULL when capacity is 0. Frames read while waiting are
 * delivered by the next vsync_client_dispatch() (the fd is readable). Negative errno on failure:
 * -EINVAL (element_size too small), -EBUSY (inside a callback), -ETIMEDOUT, a connection error. */
int vsync_client_get_displays(struct vsync_client *client, struct vsync_display *displays, size_t capacity,
                              size_t element_size);

/* With a client: its last error's whole line (with the socket path), or "" if none, valid until
 * the next call on the client. With NULL: the whole line of this thread's last failed
 * vsync_client_connect(), valid until this thread's next connect. */
const char *vsync_client_last_error(const struct vsync_client *client);

/* Closes the connection and frees the client. Links still alive become dead handles: free each
 * with vsync_link_destroy() (any order is safe). */
void vsync_client_destroy(struct vsync_client *client);

/* A link to one display: display NULL or "primary", a connector name ("HDMI-A-1"), "crtc:ID",
 * "display:ID", "edid:MAKE/MODEL/SERIAL", or any of primary, crtc:ID, a connector or edid: followed
 * by "@CARD" (card1, /dev/dri/card1 or the card's bus path; the syntax of docs/PROTOCOL.md § 4;
 * the forms with @ or edid: need vsyncd with protocol 3). Frames come at the display's full rate unless vsync_link_set_rate() says
 * otherwise; settings made before the next vsync_client_dispatch() travel with the link's request
 * (the fd is readable until then), so its first frame already obeys them. user is passed to every
 * callback of the link. Returns 0 and the link in *out, or a negative errno (*out NULL; the
 * client's last error says why): -EINVAL for an invalid selector ("crtc:0", a name over 32
 * bytes, "DP-1@"). A display that does not exist is reported later, through the error callback. */
int vsync_link_create(struct vsync_client *client, const char *display, vsync_frame_fn fn, void *user,
                      struct vsync_link **out);

/* The rates the link accepts, like CAFrameRateRange: it gets refresh / d for a whole d, the one
 * inside [min, max] nearest preferred (max 0: no bound; preferred 0: the highest). All 0: the
 * display's full rate. 0, or -EINVAL for a range that is not finite, >= 0 and ordered. */
int vsync_link_set_rate(struct vsync_link *link, double min_fps, double max_fps, double preferred_fps);

/* Wake the link ns before each target vblank, rather than just after each vblank (0, the
 * default): the frame's target_timestamp_ns is then the vblank to present at, ns from now. ns may
 * exceed a frame (frames overlap); at most 1 s. 0, or -EINVAL. A vsyncd older than 0.3.0
 * ignores it. */
int vsync_link_set_work_duration(struct vsync_link *link, uint64_t ns);

/* While the display is off, or refuses vblank events, keep delivering frames predicted at the
 * last mode's rate, flagged VSYNC_FRAME_PREDICTED (default: none until it is on). */
int vsync_link_set_predict_while_off(struct vsync_link *link, bool on);

/* Hardware ticks: every frame of the link from a real vblank, never flagged
 * VSYNC_FRAME_MODEL_TIMED, even when vsyncd samples vblanks sparsely (vsyncd(8) --vblank-sampling
 * sparse). It costs what sparse sampling saves: while the link runs, vsyncd keeps its display's
 * vblank interrupt on (a laptop panel cannot self-refresh, the processor sleeps less deeply) and
 * the display's other links get hardware frames too. For a frame-timing tool or a test that must
 * see every real vblank; apps should not set it. A vsyncd older than protocol 6, or one sampling
 * continuously (the default), gives every frame from the hardware anyway. Default off; on a
 * subscribed link the change takes effect at once (the link is renewed). 0, or -EINVAL /
 * -ENOTCONN. */
int vsync_link_set_hardware_ticks(struct vsync_link *link, bool on);

/* Paused, vsyncd sends nothing for the link (and asks the kernel for nothing if no link runs). */
int vsync_link_set_paused(struct vsync_link *link, bool paused);

/* The link's display and error callbacks (NULL: none). 0, or -EINVAL / -ENOTCONN. */
int vsync_link_set_display_callback(struct vsync_link *link, vsync_display_fn fn);
int vsync_link_set_error_callback(struct vsync_link *link, vsync_error_fn fn);

/* The display's exact refresh (mHz) and frame interval (ns), as vsyncd last said; 0 until it has
 * answered. Returns 0, or -EINVAL / -ENOTCONN. */
int vsync_link_get_refresh(struct vsync_link *link, uint64_t *refresh_mhz, uint64_t *period_ns);

/* The refresh rounded to whole frames per second (59.94 Hz gives 60), CADisplayLink's
 * maximumFramesPerSecond; 0 until vsyncd has answered, or a negative errno. */
int vsync_link_get_max_fps(struct vsync_link *link);

/* Page only: vsyncd sends the link no ticks; it keeps its display's record on the timing page
 * current (vsyncd keeps the display's vblank events on), for an app that paces itself from
 * vsync_display_timing() with its own timer. With a work duration (vsync_link_set_work_duration)
 * the library paces it: the client's own timerfd, in the fd the app polls, wakes it W before
 * each target vblank, aimed from the page, and the callback gets that frame with no message
 * from vsyncd. Without one, no frames. Protocol 5; an older vsyncd ignores the flag and sends
 * frames. 0, or -EINVAL / -ENOTCONN. */
int vsync_link_set_page_only(struct vsync_link *link, bool page_only);

/* Unsubscribes and frees the link, before or after its client's destroy; safe inside its own
 * callback. Frames already read for it are dropped. */
void vsync_link_destroy(struct vsync_link *link);

/* Ends a frame: the app's work for `frame` (a frame this link's callback got, struct_size as the
 * library set it) ended at work_end_ns (0: now). Judges it as FrameMonitor does: due when its
 * vblank came (with a work duration: target_timestamp_ns - W), received at received_ns, shown at
 * the first vblank at or after the work ended, not before its target. Work ending after
 * target_timestamp_ns is VSYNC_REASON_APP_DEADLINE_MISSED, unless the tick was read more than
 * VSYNC_JANK_START_THRESHOLD_NS after it was due (or after the previous frame's work ended) and
 * the work itself fit: then DELIVERY_LATE (or DAEMON_LATE). Call it once per frame, in order, on
 * the dispatching thread, from the callback or after it. Returns the enum vsync_frame_reason
 * (>= 0), or -EINVAL (link or frame NULL, frame->struct_size too small, the frame already
 * judged). */
int vsync_link_frame_done(struct vsync_link *link, const struct vsync_frame *frame, uint64_t work_end_ns);

/* The link's counts since it was created: fills *out up to out->struct_size, which the caller
 * sets (sizeof(struct vsync_frame_counts)), and sets struct_size to what it filled. Subtract two
 * readings for a window's counts. 0, or -EINVAL (link or out NULL, struct_size too small). */
int vsync_link_get_frame_counts(struct vsync_link *link, struct vsync_frame_counts *out);

/* A reason's name as vsync-probe follow --json prints it ("appDeadlineMissed"), or NULL for a
 * value that is no reason. Static. */
const char *vsync_frame_reason_name(int reason);

/* Display display_id's last vblank and refresh model from vsyncd's timing page, with no syscall
 * (a shared read-only page under a seqlock, docs/PROTOCOL.md section 10), and the first vblank
 * the model puts after after_ns (0: now) in next_sequence / next_ns. Fills *out (struct_size set)
 * and returns 0, or a negative errno: -EINVAL (client or out NULL), -ENODATA (VSYNC_ENOPAGE: no
 * page yet, or vsyncd without protocol 5), -ENOENT (VSYNC_ENOTONPAGE: display not on the page),
 * -EAGAIN (the record stayed locked). The record moves only while some client follows the
 * display (a link, or a page-only link: vsync_link_set_page_only); after vsyncd goes away the
 * last page stays readable, frozen, until the next connection brings a new one. May be called
 * from any thread, also while another dispatches, but not during vsync_client_destroy(). */
int vsync_display_timing(struct vsync_client *client, uint32_t display_id, uint64_t after_ns,
                         struct vsync_display_timing *out);

/* The one line that explains a code (negative or positive): libvsync's line for a VSYNC_E*
 * value, the C library's strerror() text for another errno. Static; never NULL. */
const char *vsync_strerror(int code);

/* CLOCK_MONOTONIC now, in ns: the clock of every timestamp. */
uint64_t vsync_now_ns(void);

#ifdef __cplusplus
}
#endif

#endif
