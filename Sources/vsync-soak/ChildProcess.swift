import Foundation
import Glibc

/// A child process started with posix_spawn, so the soak controls its fds, signal mask and
/// parent-death signal (Foundation's Process can do none of these).
struct ChildProcess {
    let pid: pid_t

    /// `setpriv --pdeathsig KILL` (util-linux) makes the child die with the soak even if the
    /// soak itself is SIGKILLed; without setpriv the child runs directly.
    static let setpriv: String? = FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") ? "/usr/bin/setpriv" : nil

    /// Starts `path args` with stdin from /dev/null, stdout to `stdoutPath` (truncated) and
    /// stderr appended to `stderrPath`, so many children can share one log.
    static func spawn(_ path: String, _ args: [String], stdoutPath: String, stderrPath: String) throws -> ChildProcess {
        var argv = [path] + args
        var exe = path
        if let setpriv {
            argv = [setpriv, "--pdeathsig", "KILL", "--"] + argv
            exe = setpriv
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)

        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        // The soak blocks SIGINT/SIGTERM to take them synchronously; children start clean.
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for s in [SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD] { sigaddset(&defaults, s) }
        posix_spawnattr_setsigdefault(&attr, &defaults)
        var mask = sigset_t()
        sigemptyset(&mask)
        posix_spawnattr_setsigmask(&attr, &mask)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        let cArgv = argv.map { strdup($0) } + [nil]
        let cEnv = ProcessInfo.processInfo.environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            cArgv.forEach { free($0) }
            cEnv.forEach { free($0) }
        }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, exe, &actions, &attr, cArgv, cEnv)
        guard rc == 0 else {
            throw SoakError("could not start \(path): \(String(cString: strerror(rc))); build it with 'swift build' or pass its path")
        }
        return ChildProcess(pid: pid)
    }

    func signal(_ signo: Int32) { _ = kill(pid, signo) }

    /// Reaps the child if it has exited: its exit status, or 128+signal.
    func poll() -> Int32? {
        var status: Int32 = 0
        let rc = waitpid(pid, &status, WNOHANG)
        guard rc == pid else { return rc < 0 ? -1 : nil }
        let sig = status & 0x7f
        return sig == 0 ? (status >> 8) & 0xff : 128 + sig
    }

    /// Waits at most `seconds` for the child to exit; SIGKILLs it after that (nil: it had to be killed).
    func wait(seconds: Double) -> Int32? {
        let deadline = Monotonic.seconds + seconds
        while Monotonic.seconds < deadline {
            if let status = poll() { return status }
            usleep(5_000)
        }
        signal(SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        return nil
    }
}
