// Linux calls that Swift's Glibc module does not import: epoll, timerfd, signalfd, inotify,
// netlink (kernel uevents), the timing page's memfd, seals and SCM_RIGHTS send, and getxattr
// (a card node's POSIX ACL, which decides who may connect).
// Only VsyncDaemon imports this.
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <sys/signalfd.h>
#include <sys/inotify.h>
#include <linux/netlink.h>
#include <sys/xattr.h>

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

// These return as the calls they wrap do (-1 with errno set), so the daemon judges their
// failures where it judges every call's (Syscall.swift).

/// A sealable, close-on-exec memfd. Without MFD_NOEXEC_SEAL, Linux 6.3+ logs a warning for
/// every process that makes one; kernels before 6.3 refuse the flag.
static inline int vsyncd_memfd_create(const char *name) {
    int fd = (int)syscall(SYS_memfd_create, name, VSYNCD_MFD_CLOEXEC | VSYNCD_MFD_ALLOW_SEALING | VSYNCD_MFD_NOEXEC_SEAL);
    if (fd < 0 && errno == EINVAL)
        fd = (int)syscall(SYS_memfd_create, name, VSYNCD_MFD_CLOEXEC | VSYNCD_MFD_ALLOW_SEALING);
    return fd;
}

static inline int vsyncd_add_seals(int fd, int seals) {
    return fcntl(fd, VSYNCD_F_ADD_SEALS, seals);
}

/// The daemon's one SCM_RIGHTS send: one non-blocking datagram with `fd` attached.
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
    return sendmsg(sock, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/// recv of one datagram and the fd riding on it, if any (*fd = -1 otherwise; close-on-exec).
/// Not the daemon's: its tests read the timing page with it, as a client does. Size, or -errno.
static inline ssize_t vsyncd_recv_with_fd(int sock, void *bytes, size_t count, int *fd) {
    struct iovec iov = { .iov_base = bytes, .iov_len = count };
    /* Room for a receive timestamp too (SO_TIMESTAMPNS on the socket): with only the fd's
       room, the timestamp fills it and the kernel drops the descriptor (MSG_CTRUNC). */
    union { char buf[CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(struct timespec))]; struct cmsghdr align; } control;
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
