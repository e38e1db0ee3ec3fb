// Linux calls that Swift's Glibc module does not import: epoll, timerfd, signalfd, inotify,
// netlink (kernel uevents).
// Only VsyncDaemon imports this.
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <sys/signalfd.h>
#include <sys/inotify.h>
#include <linux/netlink.h>
