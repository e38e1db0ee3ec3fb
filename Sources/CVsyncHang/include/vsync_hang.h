// Stack capture of a hung thread for DisplayLink's HangDetector: a signal makes the thread
// take its own backtrace into a preallocated buffer, and the symbols are looked up afterwards,
// outside the handler. In C because a signal handler must not enter the Swift runtime
// (allocation, retain/release, exclusivity checks), and because ELF symbol tables are C's.
#ifndef VSYNC_HANG_H
#define VSYNC_HANG_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// The most frames one capture holds.
#define VSYNC_HANG_MAX_FRAMES 128

/// The signal used when the app names none: SIGRTMIN + 5 (glibc keeps the ones below
/// SIGRTMIN for itself; the first few above it are the ones other libraries pick).
int vsync_hang_default_signal(void);

/// Installs the capture handler on `signo` once per process, after one backtrace() call on
/// the calling thread (the first loads libgcc_s's unwinder, which allocates: never in a
/// handler). 0, or -EBUSY when another handler owns the signal, -EEXIST when capture already
/// uses another signal, -EINVAL for a signal outside SIGRTMIN...SIGRTMAX.
int vsync_hang_install(int signo);

/// The signal capture was installed on, 0 before.
int vsync_hang_installed_signal(void);

/// Lets the calling thread take `signo` (dispatch's worker threads block every asynchronous
/// signal). Cheap after the first call on a thread: a thread-local flag. Returns the thread's
/// kernel id (gettid), which names it in reports.
int32_t vsync_hang_prepare_thread(int signo);

/// Has `thread` capture its stack, waiting at most `timeout_ns` for it. Writes up to
/// `capacity` return addresses to `frames`, the interrupted function first (the handler's own
/// frames and the signal trampoline left out). Returns how many, or -ESRCH (no such thread),
/// -ETIMEDOUT (it did not take the signal: blocked, or stopped), -ENOSYS (not installed).
/// One capture at a time per process; concurrent callers wait their turn.
int vsync_hang_capture(pthread_t thread, int signo, void **frames, int capacity, int64_t timeout_ns);

/// The symbol containing `address`, found in the module file's full symbol table (.symtab,
/// present unless the binary was stripped) or else in its dynamic symbols (dladdr).
/// `symbol` gets its (mangled) name, `module` the file's path; either may be empty. Returns 1
/// when a symbol was found, 0 when only the module was, -1 when neither.
int vsync_hang_symbolize(const void *address, char *symbol, size_t symbol_capacity, uintptr_t *symbol_offset,
                         char *module, size_t module_capacity, uintptr_t *module_offset);

/// Reads and indexes the symbol tables of every object loaded now, so that naming a hung
/// stack later costs lookups only: a watcher calls it once before it watches (an object
/// loaded later is read at its first lookup).
void vsync_hang_preload_symbols(void);

/// The address of a function defined in the main program's full symbol table, or NULL: how
/// the Swift runtime's demangler is found when the runtime is linked in statically and so
/// exports nothing.
void *vsync_hang_main_program_symbol(const char *name);

#ifdef __cplusplus
}
#endif

#endif
