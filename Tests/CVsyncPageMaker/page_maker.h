// Test-only: a timing page made as vsyncd makes it (docs/PROTOCOL.md § 10: a memfd, 4096 bytes,
// sealed against shrinking, growing and future writes), sent with its fd as SCM_RIGHTS, and a
// writer thread for the seqlock torture test. Swift's Glibc module has no memfd_create, seals
// or cmsg macros; no _GNU_SOURCE either (it would change structs Glibc also declares).
#ifndef VSYNC_PAGE_MAKER_H
#define VSYNC_PAGE_MAKER_H

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "../../Sources/CVsyncPage/vsync_page.h"

#define PM_MFD_CLOEXEC 0x0001u
#define PM_MFD_ALLOW_SEALING 0x0002u
#define PM_F_ADD_SEALS 1033
#define PM_F_GET_SEALS 1034
#define PM_F_SEAL_SEAL 0x0001
#define PM_F_SEAL_SHRINK 0x0002
#define PM_F_SEAL_GROW 0x0004
#define PM_F_SEAL_FUTURE_WRITE 0x0010
#define PM_ALL_SEALS 0x17 /* SHRINK | GROW | FUTURE_WRITE | SEAL (a literal: Swift imports no macro expressions) */

static inline int pm_errno(void) { return errno; }

/// A memfd named `name`, `size` bytes, mapped writable and shared into `*page` before it is
/// sealed (F_SEAL_FUTURE_WRITE keeps that mapping and refuses later ones). The fd or -errno.
static inline int pm_make_page(const char *name, uint32_t size, int seals, void **page) {
    int fd = (int)syscall(SYS_memfd_create, name, PM_MFD_CLOEXEC | PM_MFD_ALLOW_SEALING);
    if (fd < 0) return -errno;
    if (ftruncate(fd, size) != 0) { int e = errno; close(fd); return -e; }
    void *m = mmap(NULL, size < VSYNC_PAGE_SIZE ? VSYNC_PAGE_SIZE : size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) { int e = errno; close(fd); return -e; }
    memset(m, 0, size);
    if (seals && fcntl(fd, PM_F_ADD_SEALS, seals) != 0) { int e = errno; munmap(m, size); close(fd); return -e; }
    *page = m;
    return fd;
}

/// The header as the daemon writes it.
static inline void pm_write_header(void *page, uint32_t magic, uint16_t layout, uint32_t page_size) {
    struct vsync_page_header *h = (struct vsync_page_header *)page;
    h->magic = magic;
    h->layout = layout;
    h->header_size = VSYNC_PAGE_HEADER_SIZE;
    h->page_size = page_size;
    h->record_offset = VSYNC_PAGE_HEADER_SIZE;
    h->record_size = VSYNC_PAGE_RECORD_SIZE;
    h->record_count = VSYNC_PAGE_RECORDS;
    h->server_pid = (uint32_t)getpid();
}

static inline int pm_add_seals(int fd, int seals) { return fcntl(fd, PM_F_ADD_SEALS, seals) == 0 ? 0 : -errno; }
static inline int pm_get_seals(int fd) { return fcntl(fd, PM_F_GET_SEALS); }

/// mmap(PROT_READ|PROT_WRITE, MAP_SHARED) of `fd`: 0 if it worked (then unmapped), else -errno.
static inline int pm_try_map_writable(int fd) {
    void *m = mmap(NULL, VSYNC_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) return -errno;
    munmap(m, VSYNC_PAGE_SIZE);
    return 0;
}
static inline int pm_try_write(int fd) {
    char byte = 1;
    return pwrite(fd, &byte, 1, 0) == 1 ? 0 : -errno;
}
static inline int pm_try_truncate(int fd, long size) { return ftruncate(fd, size) == 0 ? 0 : -errno; }

/// One datagram with `fd` attached (SCM_RIGHTS; -1: none): its size or -errno.
static inline long pm_send_with_fd(int sock, const void *bytes, size_t count, int fd) {
    struct iovec iov = { (void *)bytes, count };
    union { char buf[CMSG_SPACE(2 * sizeof(int))]; struct cmsghdr align; } control;
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    memset(&control, 0, sizeof control);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (fd >= 0) {
        msg.msg_control = control.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    long n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    return n < 0 ? -errno : n;
}

// The torture test's record: every field a function of one counter c, so a copy that mixes two
// writes breaks at least one of the equations.
static inline void pm_values_for(uint64_t c, uint32_t display_id, struct vsync_page_values *v) {
    v->display_id = display_id;
    v->generation = (uint32_t)c;
    v->flags = (uint32_t)(c * 31u);
    v->last_sequence = c;
    v->last_timestamp_ns = c * 3u + 1u;
    v->anchor_sequence = c * 5u + 2u;
    v->anchor_ns = c * 7u + 3u;
    v->period_ns = c * 11u + 4u;
    v->period_frac = (uint32_t)(c * 13u + 5u);
    v->refresh_mhz = c * 17u + 6u;
    v->min_interval_ns = c * 19u + 7u;
    v->max_interval_ns = c * 23u + 8u;
    v->updated_ns = c * 29u + 9u;
}

/// 1 if `v` is one write's values (pm_values_for of its own last_sequence), else 0.
static inline int pm_values_consistent(const struct vsync_page_values *v, uint32_t display_id) {
    struct vsync_page_values want;
    pm_values_for(v->last_sequence, display_id, &want);
    return v->display_id == want.display_id && v->generation == want.generation && v->flags == want.flags &&
           v->last_timestamp_ns == want.last_timestamp_ns && v->anchor_sequence == want.anchor_sequence &&
           v->anchor_ns == want.anchor_ns && v->period_ns == want.period_ns && v->period_frac == want.period_frac &&
           v->refresh_mhz == want.refresh_mhz && v->min_interval_ns == want.min_interval_ns &&
           v->max_interval_ns == want.max_interval_ns && v->updated_ns == want.updated_ns;
}

/// The record's fields copied with no seqlock: what a reader that skips the lock would see.
static inline void pm_read_unlocked(const void *page, uint32_t index, struct vsync_page_values *v) {
    vsync_page_copy(vsync_page_record_at((void *)page, index), v);
}

/// A writer thread rewriting record `index` with pm_values_for(c) for c = 1, 2, …: every
/// `period_ns` (absolute CLOCK_MONOTONIC steps), or back to back with period 0.
struct pm_writer {
    pthread_t thread;
    void *page;
    uint32_t index, display_id;
    uint64_t period_ns;
    volatile int stop;
    volatile uint64_t writes;
};

static inline void *pm_writer_main(void *arg) {
    struct pm_writer *w = (struct pm_writer *)arg;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    struct vsync_page_values v;
    uint64_t c = 0;
    while (!__atomic_load_n(&w->stop, __ATOMIC_RELAXED)) {
        pm_values_for(++c, w->display_id, &v);
        vsync_page_write(w->page, w->index, &v);
        __atomic_store_n(&w->writes, c, __ATOMIC_RELAXED);
        if (w->period_ns) {
            next.tv_nsec += (long)w->period_ns;
            while (next.tv_nsec >= 1000000000L) { next.tv_nsec -= 1000000000L; next.tv_sec++; }
            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
        }
    }
    return NULL;
}

static inline struct pm_writer *pm_writer_start(void *page, uint32_t index, uint32_t display_id, uint64_t period_ns) {
    struct pm_writer *w = (struct pm_writer *)calloc(1, sizeof *w);
    w->page = page; w->index = index; w->display_id = display_id; w->period_ns = period_ns;
    struct vsync_page_values v;
    pm_values_for(0, display_id, &v);
    vsync_page_write(page, index, &v);
    if (pthread_create(&w->thread, NULL, pm_writer_main, w) != 0) { free(w); return NULL; }
    return w;
}

static inline uint64_t pm_writer_writes(struct pm_writer *w) { return __atomic_load_n(&w->writes, __ATOMIC_RELAXED); }

/// Stops and frees the writer; returns how many writes it made.
static inline uint64_t pm_writer_stop(struct pm_writer *w) {
    __atomic_store_n(&w->stop, 1, __ATOMIC_RELAXED);
    pthread_join(w->thread, NULL);
    uint64_t n = w->writes;
    free(w);
    return n;
}

#endif
