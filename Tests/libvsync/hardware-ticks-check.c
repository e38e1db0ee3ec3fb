/* vsync_link_set_hardware_ticks against a real vsyncd sampling vblanks sparsely: two links on one
 * display, H with hardware ticks and P without. Three phases, each a line the test reads:
 *
 *   on h=N h_model=M p=N p_model=M       150 frames of P with H's hardware ticks set before
 *                                        its first dispatch (past the model's learning and a
 *                                        whole burst interval)
 *   off h_model=M p_model=M p=N          H's hardware ticks turned off on the running link:
 *                                        P's frames until both links had a model-timed frame,
 *                                        at most 360 (6 s)
 *   again settled=0|1 settle=N h=N h_model=M p=N p_model=M
 *                                        turned on again: H's frames up to its first one not
 *                                        model-timed (settle, at most 360), then 150 frames of P
 *
 * then a "FAIL ..." line for each error check that failed and "done failures=N".
 *
 *   hardware-ticks-check SOCKET
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <vsync/vsync.h>

struct counts {
    int frames, model_timed;
};

static struct counts h, p;
static int failures;

static void check(int ok, const char *what) {
    if (!ok) {
        printf("FAIL %s\n", what);
        failures++;
    }
}

static void on_frame(struct vsync_link *link, const struct vsync_frame *frame, void *user) {
    struct counts *c = user;
    (void)link;
    c->frames++;
    if (frame->flags & VSYNC_FRAME_MODEL_TIMED) c->model_timed++;
}

/* Dispatches until done() or P has had limit more frames; 0, or 1 after a dispatch error. */
static int run(struct vsync_client *client, int limit, int (*done)(void)) {
    int end = p.frames + limit;
    while (!done() && p.frames < end) {
        int rc = vsync_client_dispatch(client, 1000);
        if (rc < 0) {
            fprintf(stderr, "dispatch: %s\n", vsync_strerror(rc));
            return 1;
        }
    }
    return 0;
}

static int never(void) { return 0; }
static int both_model_timed(void) { return h.model_timed > 0 && p.model_timed > 0; }
static int h_hardware_before;
static int h_not_model_timed(void) { return h.frames > h.model_timed + h_hardware_before; }

int main(int argc, char **argv) {
    struct vsync_client *client;
    struct vsync_link *hw, *plain;
    int settle_from, settled;
    if (argc != 2) {
        fprintf(stderr, "usage: hardware-ticks-check SOCKET\n");
        return 2;
    }
    if (vsync_client_connect(argv[1], &client) < 0) {
        fprintf(stderr, "connect: %s\n", vsync_client_last_error(NULL));
        return 1;
    }
    if (vsync_link_create(client, NULL, on_frame, &h, &hw) < 0 || vsync_link_create(client, NULL, on_frame, &p, &plain) < 0) {
        fprintf(stderr, "link: %s\n", vsync_client_last_error(client));
        return 1;
    }
    check(vsync_link_set_hardware_ticks(hw, true) == 0, "set_hardware_ticks(true) before the first dispatch failed");
    check(vsync_link_set_hardware_ticks(NULL, true) == -EINVAL, "set_hardware_ticks(NULL) is not -EINVAL");

    if (run(client, 150, never)) return 1;
    printf("on h=%d h_model=%d p=%d p_model=%d\n", h.frames, h.model_timed, p.frames, p.model_timed);

    memset(&h, 0, sizeof h);
    memset(&p, 0, sizeof p);
    check(vsync_link_set_hardware_ticks(hw, false) == 0, "set_hardware_ticks(false) on a running link failed");
    if (run(client, 360, both_model_timed)) return 1;
    printf("off h_model=%d p_model=%d p=%d\n", h.model_timed, p.model_timed, p.frames);

    /* Frames read before the renewed subscription took effect may still be model-timed: settle
     * on H's first one that is not, then count. */
    check(vsync_link_set_hardware_ticks(hw, true) == 0, "set_hardware_ticks(true) on a running link failed");
    h_hardware_before = h.frames - h.model_timed;
    settle_from = h.frames;
    if (run(client, 360, h_not_model_timed)) return 1;
    settled = h_not_model_timed();
    settle_from = h.frames - settle_from;
    memset(&h, 0, sizeof h);
    memset(&p, 0, sizeof p);
    if (run(client, 150, never)) return 1;
    printf("again settled=%d settle=%d h=%d h_model=%d p=%d p_model=%d\n", settled, settle_from, h.frames, h.model_timed, p.frames,
           p.model_timed);

    vsync_client_destroy(client);
    check(vsync_link_set_hardware_ticks(hw, false) == -ENOTCONN, "set_hardware_ticks after the client's destroy is not -ENOTCONN");
    vsync_link_destroy(hw);
    vsync_link_destroy(plain);
    printf("done failures=%d\n", failures);
    return failures == 0 ? 0 : 1;
}
