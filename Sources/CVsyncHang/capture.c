// The signal side of hang stack capture. Everything the handler touches is static and
// preallocated; it calls only backtrace() (warmed up at install, so it neither loads the
// unwinder nor allocates) and sem_post() (async-signal-safe).
#define _GNU_SOURCE
#include "vsync_hang.h"

#include <errno.h>
#include <execinfo.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#include <sys/syscall.h>

static struct {
    void *frames[VSYNC_HANG_MAX_FRAMES + 8];
    int count;
    int start;
    atomic_int armed;  // 1 while a capture waits for the handler; the handler takes it
    sem_t done;
    pthread_mutex_t lock;  // one capture at a time
    atomic_int installed_signal;
} slot = {.lock = PTHREAD_MUTEX_INITIALIZER};

static pthread_mutex_t install_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int thread_prepared;
static __thread int32_t thread_tid;

int vsync_hang_default_signal(void) { return SIGRTMIN + 5; }

/// The interrupted instruction, from the signal's saved context: the frame to start the
/// report at, so the handler and the kernel's trampoline are left out.
static void *interrupted_pc(void *context) {
    ucontext_t *uc = context;
#if defined(__x86_64__)
    return (void *)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    return (void *)uc->uc_mcontext.pc;
#else
    (void)uc;
    return NULL;
#endif
}

static void handler(int signo, siginfo_t *info, void *context) {
    (void)signo;
    (void)info;
    int saved = errno;
    int expected = 1;
    // A late signal (its capture timed out and gave up) finds nothing armed and does nothing.
    if (atomic_compare_exchange_strong(&slot.armed, &expected, 0)) {
        int n = backtrace(slot.frames, VSYNC_HANG_MAX_FRAMES + 8);
        void *pc = interrupted_pc(context);
        int start = 0;
        // backtrace() lists the handler, the trampoline, then the interrupted frame, whose
        // address is the saved PC itself (the unwinder treats signal frames exactly).
        for (int i = 0; i < n && i < 8; i++) {
            if (slot.frames[i] == pc) { start = i; break; }
        }
        slot.start = start;
        slot.count = n;
        sem_post(&slot.done);
    }
    errno = saved;
}

int vsync_hang_install(int signo) {
    if (signo < SIGRTMIN || signo > SIGRTMAX) return -EINVAL;
    pthread_mutex_lock(&install_lock);
    int current = atomic_load(&slot.installed_signal);
    int result = 0;
    if (current == signo) goto out;
    struct sigaction old;
    if (sigaction(signo, NULL, &old) != 0) { result = -errno; goto out; }
    if ((old.sa_flags & SA_SIGINFO) ? old.sa_sigaction != NULL
                                    : (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN)) {
        result = -EBUSY;  // someone else's handler: never replace it
        goto out;
    }
    // One signal per process: the capture slot is the process's.
    if (current != 0) { result = -EEXIST; goto out; }
    void *warm[4];
    (void)backtrace(warm, 4);
    sem_init(&slot.done, 0, 0);
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = handler;
    sigemptyset(&action.sa_mask);
    // SA_RESTART: a read or write the signal interrupts goes on instead of failing with EINTR.
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    if (sigaction(signo, &action, NULL) != 0) { result = -errno; goto out; }
    atomic_store(&slot.installed_signal, signo);
out:
    pthread_mutex_unlock(&install_lock);
    return result;
}

int vsync_hang_installed_signal(void) { return atomic_load(&slot.installed_signal); }

int32_t vsync_hang_prepare_thread(int signo) {
    if (!thread_prepared) {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, signo);
        pthread_sigmask(SIG_UNBLOCK, &set, NULL);
        thread_tid = (int32_t)syscall(SYS_gettid);
        thread_prepared = 1;
    }
    return thread_tid;
}

int vsync_hang_capture(pthread_t thread, int signo, void **frames, int capacity, int64_t timeout_ns) {
    if (atomic_load(&slot.installed_signal) != signo) return -ENOSYS;
    pthread_mutex_lock(&slot.lock);
    while (sem_trywait(&slot.done) == 0) {}  // nothing stale may answer this capture
    atomic_store(&slot.armed, 1);
    int err = pthread_kill(thread, signo);
    if (err != 0) {
        atomic_store(&slot.armed, 0);
        pthread_mutex_unlock(&slot.lock);
        return -err;
    }
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += (time_t)(timeout_ns / 1000000000);
    deadline.tv_nsec += (long)(timeout_ns % 1000000000);
    if (deadline.tv_nsec >= 1000000000) { deadline.tv_sec += 1; deadline.tv_nsec -= 1000000000; }
    int result;
    for (;;) {
        if (sem_clockwait(&slot.done, CLOCK_MONOTONIC, &deadline) == 0) break;
        if (errno == EINTR) continue;
        // Timed out. If the handler already took the capture it is about to post: wait for
        // it, so that it never writes the buffer under the next capture.
        int expected = 1;
        if (atomic_compare_exchange_strong(&slot.armed, &expected, 0)) {
            pthread_mutex_unlock(&slot.lock);
            return -ETIMEDOUT;
        }
        while (sem_wait(&slot.done) != 0 && errno == EINTR) {}
        break;
    }
    int n = slot.count - slot.start;
    if (n > capacity) n = capacity;
    if (n < 0) n = 0;
    memcpy(frames, slot.frames + slot.start, (size_t)n * sizeof(void *));
    result = n;
    pthread_mutex_unlock(&slot.lock);
    return result;
}
