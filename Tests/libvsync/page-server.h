/*
 * A stand-in vsyncd for libvsync's timing-page tests and vsync-bench --page-read, until (or
 * where) the real daemon's page is not available: it listens on a Unix SOCK_SEQPACKET socket,
 * answers HELLO with a version 5 WELCOME and sends TIMING_PAGE with a sealed memfd page as
 * SCM_RIGHTS (docs/PROTOCOL.md sections 5 and 10, as vsyncd does), then reads and counts what the
 * client sends. The caller writes the page's records with vsync_page_write. One thread, one
 * client at a time; protocol bytes by hand (little-endian, as the page's host). Test code only.
 */
#ifndef VSYNC_PAGE_SERVER_H
#define VSYNC_PAGE_SERVER_H

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../Sources/CVsyncPage/vsync_page.h"

struct page_server {
    int listener;
    int memfd;
    void *page;
    pthread_t thread;
    volatile int subscribes, page_only_subscribes, connections;
};

static inline void ps_put16(unsigned char *p, uint16_t v) { memcpy(p, &v, 2); }
static inline void ps_put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }

static inline int ps_send(int fd, const unsigned char *bytes, size_t n, int attach) {
    struct iovec iov = {(void *)bytes, n};
    union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } control;
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    memset(&control, 0, sizeof control);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (attach >= 0) {
        msg.msg_control = control.buf;
        msg.msg_controllen = sizeof control.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &attach, sizeof(int));
    }
    return sendmsg(fd, &msg, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1;
}

static inline void *ps_main(void *arg) {
    struct page_server *s = (struct page_server *)arg;
    for (;;) {
        int c = accept(s->listener, NULL, NULL);
        if (c < 0) {
            if (errno == EINTR) continue;
            return NULL;
        }
        __atomic_add_fetch(&s->connections, 1, __ATOMIC_RELAXED);
        unsigned char in[4096];
        ssize_t n;
        while ((n = recv(c, in, sizeof in, 0)) > 0) {
            uint16_t type;
            memcpy(&type, in, 2);
            if (type == 0x0001) { /* HELLO: WELCOME version 5, then the page */
                unsigned char welcome[20] = {0}, page[16] = {0};
                ps_put16(welcome, 0x0101); ps_put16(welcome + 2, 20);
                ps_put16(welcome + 8, 5); ps_put32(welcome + 16, (uint32_t)getpid());
                ps_put16(page, 0x0108); ps_put16(page + 2, 16);
                ps_put32(page + 8, VSYNC_PAGE_SIZE); ps_put16(page + 12, VSYNC_PAGE_LAYOUT);
                if (ps_send(c, welcome, sizeof welcome, -1) || ps_send(c, page, sizeof page, s->memfd)) break;
            } else if (type == 0x0003 && n >= 16) { /* SUBSCRIBE: count it, and its pageOnly flag */
                uint32_t flags;
                memcpy(&flags, in + 12, 4);
                __atomic_add_fetch(&s->subscribes, 1, __ATOMIC_RELAXED);
                if (flags & 4u) __atomic_add_fetch(&s->page_only_subscribes, 1, __ATOMIC_RELAXED);
            }
        }
        close(c);
    }
}

/* Makes the page (sealed as vsyncd seals it) and listens on `path`: 0, or -errno. */
static inline int page_server_start(struct page_server *s, const char *path) {
    memset(s, 0, sizeof *s);
    s->memfd = (int)syscall(SYS_memfd_create, "vsync-page-server", 0x0001u | 0x0002u); /* CLOEXEC | ALLOW_SEALING */
    if (s->memfd < 0 || ftruncate(s->memfd, VSYNC_PAGE_SIZE) != 0) return -errno;
    s->page = mmap(NULL, VSYNC_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, s->memfd, 0);
    if (s->page == MAP_FAILED) return -errno;
    struct vsync_page_header *h = (struct vsync_page_header *)s->page;
    h->magic = VSYNC_PAGE_MAGIC; h->layout = VSYNC_PAGE_LAYOUT; h->header_size = VSYNC_PAGE_HEADER_SIZE;
    h->page_size = VSYNC_PAGE_SIZE; h->record_offset = VSYNC_PAGE_HEADER_SIZE; h->record_size = VSYNC_PAGE_RECORD_SIZE;
    h->record_count = VSYNC_PAGE_RECORDS; h->server_pid = (uint32_t)getpid();
    /* SHRINK | GROW | FUTURE_WRITE | SEAL, after the writable mapping (which the seal keeps). */
    if (fcntl(s->memfd, 1033 /* F_ADD_SEALS */, 0x2 | 0x4 | 0x10 | 0x1) != 0) return -errno;
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof addr.sun_path) return -ENAMETOOLONG;
    strcpy(addr.sun_path, path);
    unlink(path);
    s->listener = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s->listener < 0) return -errno;
    if (bind(s->listener, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(s->listener, 8) != 0) return -errno;
    return pthread_create(&s->thread, NULL, ps_main, s) == 0 ? 0 : -EAGAIN;
}

/* A display's record as vsyncd writes it on a vblank: `seq` at `ns`, the line through it. */
static inline void page_server_vblank(struct page_server *s, uint32_t slot, uint32_t display_id, uint64_t seq,
                                      uint64_t ns, uint64_t period_ns, uint32_t period_frac, uint64_t refresh_mhz,
                                      uint64_t now_ns) {
    struct vsync_page_values v;
    memset(&v, 0, sizeof v);
    v.display_id = display_id;
    v.generation = 1;
    v.flags = 1u | VSYNC_PAGE_ON | VSYNC_PAGE_CURRENT; /* hardwareClock, lit, events on */
    v.last_sequence = seq;
    v.last_timestamp_ns = ns;
    v.anchor_sequence = seq;
    v.anchor_ns = ns;
    v.period_ns = period_ns;
    v.period_frac = period_frac;
    v.refresh_mhz = refresh_mhz;
    v.updated_ns = now_ns;
    vsync_page_write(s->page, slot, &v);
}

#endif
