// The libc calls the thread-free client core makes, for both of its builds: the normal one
// (DisplayLink) and libvsync's Embedded Swift one, where Swift's Glibc module does not exist.
// Only VsyncClientCore and libvsync import this. Small helpers are static inline so that the
// struct handling (sockaddr_un, mmsghdr) stays in C and libvsync needs nothing beyond libc.
#ifndef VSYNC_SYS_SHIM_H
#define VSYNC_SYS_SHIM_H

// No _GNU_SOURCE here: it would change glibc's structs (fd_set) from what Swift's Glibc module
// sees, and a module that imports both would not build. The few GNU-only pieces (recvmmsg,
// MSG_WAITFORONE) are reached through their stable Linux ABI instead.
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static inline int vsync_sys_errno(void) { return errno; }

static inline uint64_t vsync_sys_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/// A non-blocking, close-on-exec SOCK_SEQPACKET connection to `path`: the fd, or -errno.
/// A Unix socket connect completes at once or fails at once (a full backlog is EAGAIN).
static inline int vsync_sys_connect_unix(const char *path) {
    struct sockaddr_un addr;
    size_t len = strlen(path);
    if (len >= sizeof addr.sun_path) return -ENAMETOOLONG;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -errno;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path, path, len);
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0 || errno == EINPROGRESS) {
        // Connected without waiting on a full backlog; from here on the socket blocks, and every
        // read and send but the steady state's one wait passes MSG_DONTWAIT.
        int flags = fcntl(fd, F_GETFL);
        if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
        return fd;
    }
    int err = errno;
    close(fd);
    return -err;
}

/// Makes a blocking read on socket `fd` end at every signal. The kernel restarts a socket read
/// interrupted by a handler installed with SA_RESTART, but never one on a socket with a receive
/// timeout (SO_RCVTIMEO; signal(7), "Interruption of system calls"): that read fails with EINTR.
/// The timeout itself (an hour) only ends a read with EAGAIN, which the caller takes as nothing
/// read. 0, or -errno.
static inline int vsync_sys_set_interruptible(int fd) {
    struct timeval tv;
    memset(&tv, 0, sizeof tv);
    tv.tv_sec = 3600;
    return setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0 ? 0 : -errno;
}

/// 1 if reads on `fd` may block (no O_NONBLOCK), else 0.
static inline int vsync_sys_is_blocking(int fd) {
    int flags = fcntl(fd, F_GETFL);
    return flags >= 0 && !(flags & O_NONBLOCK);
}

/// One non-blocking send of a whole datagram: its size, or -errno (EINTR retried).
static inline ssize_t vsync_sys_send(int fd, const void *bytes, size_t count) {
    ssize_t n;
    do n = send(fd, bytes, count, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : n;
}

/// Reads up to `count` datagrams of at most `size` bytes each into `buffers` (count × size
/// bytes) with one recvmmsg. Without `wait` it does not wait: -EAGAIN when nothing is there.
/// With `wait` (a blocking socket) it waits for the first datagram, then takes what else is
/// there; a signal ends the wait with -EINTR. Returns how many were read (their lengths in
/// `lengths`; a length of 0 is the peer's orderly close), or -errno.
/// `fds[i]` is the descriptor datagram i carried (SCM_RIGHTS, close-on-exec), or -1: protocol 5's
/// TIMING_PAGE carries one (docs/PROTOCOL.md § 5). Each datagram has room for one; the kernel
/// closes any more it could not fit (MSG_CTRUNC), and any past the first here are closed too,
/// so the caller owns exactly what `fds` holds and must close what it does not keep.
#define VSYNC_SYS_BATCH 16
#define VSYNC_SYS_MSG_WAITFORONE 0x10000
#define VSYNC_SYS_MSG_CMSG_CLOEXEC 0x40000000 /* GNU-only name; the ABI value */
struct vsync_sys_mmsghdr { struct msghdr msg_hdr; unsigned int msg_len; }; /* the kernel's struct mmsghdr */
union vsync_sys_control { char bytes[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; };
static inline int vsync_sys_recv_batch(int fd, unsigned char *buffers, size_t size, int count, int *lengths, int *fds, int wait) {
    struct vsync_sys_mmsghdr msgs[VSYNC_SYS_BATCH];
    struct iovec iov[VSYNC_SYS_BATCH];
    union vsync_sys_control control[VSYNC_SYS_BATCH];
    if (count > VSYNC_SYS_BATCH) count = VSYNC_SYS_BATCH;
    memset(msgs, 0, sizeof(struct vsync_sys_mmsghdr) * (size_t)count);
    for (int i = 0; i < count; i++) {
        iov[i].iov_base = buffers + (size_t)i * size;
        iov[i].iov_len = size;
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        msgs[i].msg_hdr.msg_control = control[i].bytes;
        msgs[i].msg_hdr.msg_controllen = sizeof control[i].bytes;
    }
    int n;
    if (wait) {
        n = (int)syscall(SYS_recvmmsg, fd, msgs, (unsigned)count, VSYNC_SYS_MSG_WAITFORONE | VSYNC_SYS_MSG_CMSG_CLOEXEC, NULL);
    } else {
        do n = (int)syscall(SYS_recvmmsg, fd, msgs, (unsigned)count, MSG_DONTWAIT | VSYNC_SYS_MSG_CMSG_CLOEXEC, NULL);
        while (n < 0 && errno == EINTR);
    }
    if (n < 0) return -errno;
    for (int i = 0; i < n; i++) {
        // A datagram longer than the buffer is cut (MSG_TRUNC): report its true length so the
        // decoder calls it malformed instead of reading a prefix as a whole message.
        lengths[i] = (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) ? (int)size + 1 : (int)msgs[i].msg_len;
        fds[i] = -1;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msgs[i].msg_hdr); c; c = CMSG_NXTHDR(&msgs[i].msg_hdr, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
            size_t count_fds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t k = 0; k < count_fds; k++) {
                int got;
                memcpy(&got, CMSG_DATA(c) + k * sizeof(int), sizeof got);
                if (fds[i] < 0) fds[i] = got; else close(got);
            }
        }
    }
    return n;
}

/// The file behind `fd` (fstat): its device, inode and size; 0 or -errno. A reconnect to the
/// same daemon brings the same page again, which the client then keeps instead of a second mapping.
static inline int vsync_sys_file_identity(int fd, uint64_t *dev, uint64_t *ino, int64_t *size) {
    struct stat st;
    if (fstat(fd, &st) != 0) return -errno;
    *dev = (uint64_t)st.st_dev;
    *ino = (uint64_t)st.st_ino;
    *size = (int64_t)st.st_size;
    return 0;
}

/// `size` bytes of `fd` mapped read-only and shared (so the daemon's writes show): the mapping,
/// or NULL (errno says why).
static inline const void *vsync_sys_map_shared_readonly(int fd, uint32_t size) {
    void *m = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    return m == MAP_FAILED ? NULL : m;
}

static inline void vsync_sys_unmap(const void *page, uint32_t size) { munmap((void *)page, size); }

/// The current page pointer, published by the thread that maps it and read by any thread
/// (DisplayLink reads from the caller's thread while its reader thread dispatches).
static inline const void *vsync_sys_load_pointer(const void *const *slot) {
    return __atomic_load_n(slot, __ATOMIC_ACQUIRE);
}
static inline void vsync_sys_store_pointer(const void **slot, const void *value) {
    __atomic_store_n(slot, value, __ATOMIC_RELEASE);
}
/// Slot hints per display: a stale one costs a scan, never a wrong answer (the read checks the id).
static inline int32_t vsync_sys_load_i32(const int32_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
static inline void vsync_sys_store_i32(int32_t *p, int32_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }

static inline int vsync_sys_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

/// Adds (op EPOLL_CTL_ADD), changes (MOD) or removes (DEL) `fd` with `events`; 0 or -errno.
static inline int vsync_sys_epoll_ctl(int epfd, int op, int fd, uint32_t events) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = events;
    ev.data.fd = fd;
    return epoll_ctl(epfd, op, fd, &ev) == 0 ? 0 : -errno;
}

/// Waits up to `timeout_ms` (-1 forever) for anything in the set: the number ready, 0 on
/// timeout or a signal, or -errno.
static inline int vsync_sys_epoll_wait(int epfd, int timeout_ms) {
    struct epoll_event ev[4];
    int n = epoll_wait(epfd, ev, 4, timeout_ms);
    if (n < 0) return errno == EINTR ? 0 : -errno;
    return n;
}

static inline int vsync_sys_timerfd_create(void) {
    return timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
}

/// Arms `fd` to fire once at absolute CLOCK_MONOTONIC `deadline_ns`; 0 disarms. Setting the
/// timer also clears an expiry not yet read, so a stale one never wakes the caller.
static inline int vsync_sys_timerfd_set(int fd, uint64_t deadline_ns) {
    struct itimerspec spec;
    memset(&spec, 0, sizeof spec);
    spec.it_value.tv_sec = (time_t)(deadline_ns / 1000000000u);
    spec.it_value.tv_nsec = (long)(deadline_ns % 1000000000u);
    return timerfd_settime(fd, TFD_TIMER_ABSTIME, &spec, NULL) == 0 ? 0 : -errno;
}

static inline int vsync_sys_close(int fd) { return close(fd); }

/// `$name`, or NULL.
static inline const char *vsync_sys_getenv(const char *name) { return getenv(name); }

static inline const char *vsync_sys_strerror(int code) { return strerror(code); }

/// This thread's last failed connect, for libvsync's vsync_client_last_error(NULL): one line per
/// thread, so two threads connecting at once never read each other's. Thread-local storage of
/// the library's own (no allocation, nothing to free at thread exit).
#define VSYNC_SYS_LINE 512
static inline char *vsync_sys_thread_error(void) {
    static _Thread_local char line[VSYNC_SYS_LINE];
    return line;
}

/// Replaces this thread's line with `text` (cut to fit, at a UTF-8 boundary).
static inline void vsync_sys_set_thread_error(const char *text) {
    char *line = vsync_sys_thread_error();
    size_t n = strlen(text);
    if (n >= VSYNC_SYS_LINE) {
        n = VSYNC_SYS_LINE - 1;
        while (n > 0 && ((unsigned char)text[n] & 0xC0) == 0x80) n--;
    }
    memcpy(line, text, n);
    line[n] = 0;
}

/// The program's name (the kernel's comm, as ps shows it) into `buffer`, NUL-terminated; "" if
/// /proc is not there. For the daemon's log.
static inline void vsync_sys_program_name(char *buffer, int size) {
    buffer[0] = 0;
    int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    ssize_t n = read(fd, buffer, (size_t)(size - 1));
    close(fd);
    if (n <= 0) return;
    while (n > 0 && (buffer[n - 1] == '\n' || buffer[n - 1] == 0)) n--;
    buffer[n] = 0;
}

#endif
