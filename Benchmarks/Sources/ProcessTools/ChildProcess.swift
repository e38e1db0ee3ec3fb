import Foundation
import Glibc
import Synchronization

/// A child process started with posix_spawn, so the bench and the soak control its fds, signals
/// and parent-death signal (Foundation's Process can do none of these).
public struct ChildProcess: Sendable {
    public let pid: pid_t
    public let name: String

    /// Every child still running, killed when the parent exits early (SIGINT, SIGTERM, errors).
    static let live = Mutex<Set<pid_t>>([])

    /// `setpriv --pdeathsig KILL` (util-linux) makes the child die with its parent even if the
    /// parent is SIGKILLed; without setpriv the child runs directly.
    static let setpriv: String? = FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") ? "/usr/bin/setpriv" : nil

    /// Starts `path args`. `stdoutPath`/`stderrPath` are opened in the child (O_APPEND for
    /// stderr, so many children can share one log); `inherit` maps parent fds to child fds.
    public static func spawn(
        _ path: String, _ args: [String], environment: [String: String] = [:],
        stdoutPath: String? = nil, stderrPath: String? = nil, inherit: [(Int32, Int32)] = [],
        dieWithParent: Bool = true
    ) throws(ToolError) -> ChildProcess {
        var argv = [path] + args
        var exe = path
        if dieWithParent, let setpriv {
            argv = [setpriv, "--pdeathsig", "KILL", "--"] + argv
            exe = setpriv
        }
        var env = ProcessInfo.processInfo.environment
        for (k, v) in environment { env[k] = v }
        let envStrings = env.map { "\($0.key)=\($0.value)" }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        if let stdoutPath {
            posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        }
        if let stderrPath {
            posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        }
        for (from, to) in inherit { posix_spawn_file_actions_adddup2(&actions, from, to) }

        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        // The parent ignores, blocks or catches some signals; the child must start with defaults.
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for s in [SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGCHLD] { sigaddset(&defaults, s) }
        posix_spawnattr_setsigdefault(&attr, &defaults)
        var mask = sigset_t()
        sigemptyset(&mask)
        posix_spawnattr_setsigmask(&attr, &mask)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        let cArgv = argv.map { strdup($0) } + [nil]
        let cEnv = envStrings.map { strdup($0) } + [nil]
        defer {
            for p in cArgv { free(p) }
            for p in cEnv { free(p) }
        }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, exe, &actions, &attr, cArgv, cEnv)
        guard rc == 0 else {
            throw ToolError("could not start \(path): \(String(cString: strerror(rc))); build it with `swift build` or pass its path")
        }
        _ = live.withLock { $0.insert(pid) }
        return ChildProcess(pid: pid, name: (path as NSString).lastPathComponent)
    }

    public func signal(_ signo: Int32) { _ = kill(pid, signo) }

    /// Reaps the child if it has exited; returns its exit status (or 128+signal).
    public func poll() -> Int32? {
        var status: Int32 = 0
        let rc = waitpid(pid, &status, WNOHANG)
        guard rc == pid else { return rc < 0 ? -1 : nil }
        _ = Self.live.withLock { $0.remove(pid) }
        let sig = status & 0x7f
        return sig == 0 ? (status >> 8) & 0xff : 128 + sig
    }

    /// Waits at most `seconds` for the child to exit; SIGKILLs it after that.
    @discardableResult
    public func wait(seconds: Double) -> Int32 {
        let deadline = Monotonic.seconds + seconds
        while Monotonic.seconds < deadline {
            if let status = poll() { return status }
            usleep(5_000)
        }
        signal(SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        _ = Self.live.withLock { $0.remove(pid) }
        return 128 + SIGKILL
    }

    /// Asks politely (SIGTERM), then forcibly.
    public func stop(graceSeconds: Double = 3) -> Int32 {
        signal(SIGTERM)
        return wait(seconds: graceSeconds)
    }

    /// Kills every child still running: for early exits.
    public static func killAll() {
        let pids = live.withLock { $0 }
        for pid in pids { kill(pid, SIGKILL) }
        for pid in pids {
            var s: Int32 = 0
            waitpid(pid, &s, 0)
        }
        live.withLock { $0.removeAll() }
    }
}
