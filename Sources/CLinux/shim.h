// Linux calls that Swift's Glibc module does not import: epoll, timerfd, signalfd, inotify,
// netlink (kernel uevents), and the timing page's memfd, seals and SCM_RIGHTS send.
// Only VsyncDaemon imports this.
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <sys/signalfd.h>
#include <sys/inotify.h>
#include <linux/netlink.h>

// The timing page (TimingPage.swift): a sealed memfd, and a datagram that carries its fd.
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#define VSYNCD_MFD_CLOEXEC 0x0001u
#define VSYNCD_MFD_ALLOW_SEALING 0x0002u
#define VSYNCD_MFD_NOEXEC_SEAL 0x0008u /* Linux 6.3; older kernels say EINVAL */
#define VSYNCD_F_ADD_SEALS 1033
#define VSYNCD_F_GET_SEALS 1034
#define VSYNCD_F_SEAL_SEAL 0x0001
#define VSYNCD_F_SEAL_SHRINK 0x0002
#define VSYNCD_F_SEAL_GROW 0x0004
#define VSYNCD_F_SEAL_FUTURE_WRITE 0x0010 /* Linux 5.1 */

/// A sealable, close-on-exec memfd: the fd, or -errno. Without MFD_NOEXEC_SEAL, Linux 6.3+
/// logs a warning for every process that makes one; kernels before 6.3 refuse the flag.
static inline int vsyncd_memfd_create(const char *name) {
    int fd = (int)syscall(SYS_memfd_create, name, VSYNCD_MFD_CLOEXEC | VSYNCD_MFD_ALLOW_SEALING | VSYNCD_MFD_NOEXEC_SEAL);
    if (fd < 0 && errno == EINVAL)
        fd = (int)syscall(SYS_memfd_create, name, VSYNCD_MFD_CLOEXEC | VSYNCD_MFD_ALLOW_SEALING);
    return fd < 0 ? -errno : fd;
}

/// 0 or -errno.
static inline int vsyncd_add_seals(int fd, int seals) {
    return fcntl(fd, VSYNCD_F_ADD_SEALS, seals) == 0 ? 0 : -errno;
}

/// One non-blocking datagram with `fd` attached (SCM_RIGHTS): its size, or -errno (EINTR retried).
static inline ssize_t vsyncd_send_with_fd(int sock, const void *bytes, size_t count, int fd) {
    struct iovec iov = { .iov_base = (void *)bytes, .iov_len = count };
    union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } control;
    memset(&control, 0, sizeof control);
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.buf;
    msg.msg_controllen = sizeof control.buf;
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
    ssize_t n;
    do n = sendmsg(sock, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : n;
}

/// recv of one datagram and the fd riding on it, if any (*fd = -1 otherwise; close-on-exec).
/// For the daemon's tests, which read the timing page as a client does. Size, or -errno.
static inline ssize_t vsyncd_recv_with_fd(int sock, void *bytes, size_t count, int *fd) {
    struct iovec iov = { .iov_base = bytes, .iov_len = count };
    union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } control;
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.buf;
    msg.msg_controllen = sizeof control.buf;
    *fd = -1;
    ssize_t n;
    do n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0) return -errno;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len >= CMSG_LEN(sizeof(int)))
            memcpy(fd, CMSG_DATA(c), sizeof(int));
    return n;
}
