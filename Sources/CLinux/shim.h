// Linux calls that Swift's Glibc module does not import: epoll, timerfd, signalfd, inotify.
// Only VsyncDaemon imports this.
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <sys/signalfd.h>
#include <sys/inotify.h>
