import CLinux
import Glibc
import Logging
import VsyncCore

/// vsyncd's entry point: wires the source, the socket and systemd together and serves.
public enum Daemon {
    /// Runs until SIGTERM or SIGINT; returns normally then (exit 0). Throws the one-line reason
    /// vsyncd cannot start (no permission on the card, socket in use, …).
    public static func run(
        _ configuration: DaemonConfiguration, logger: Logger,
        environment: [String: String] = currentEnvironment()
    ) throws(DaemonError) {
        // Signals arrive through a signalfd in the loop, never as handlers.
        var mask = sigset_t()
        sigemptyset(&mask)
        sigaddset(&mask, SIGTERM)
        sigaddset(&mask, SIGINT)
        pthread_sigmask(SIG_BLOCK, &mask, nil)
        signal(SIGPIPE, SIG_IGN)
        raiseDescriptorLimit(toFit: configuration.maxClients, logger: logger)
        let signals: FileDescriptor
        do throws(SystemCallError) {
            signals = FileDescriptor(try systemCall("signalfd") { signalfd(-1, &mask, Int32(SFD_NONBLOCK | SFD_CLOEXEC)) })
        } catch {
            throw .system(error)
        }

        let source: VBlankSource
        switch configuration.source {
        case .timer(let hz):
            source = try TimerVBlankSource(hertz: hz)
            logger.info("source: software timer at \(hz) Hz (ticks flagged synthetic)")
        case .drm:
            source = try DRMVBlankSource(devices: configuration.devices, logger: logger)
        case .replay(let trace):
            source = try ReplayVBlankSource(argument: trace, logger: logger)
        }

        let listener: ListeningSocket
        if let activated = try ListeningSocket.activated(environment: environment) {
            listener = activated
        } else {
            listener = try ListeningSocket.bind(path: configuration.resolvedSocketPath(environment: environment))
        }
        let notifier = SystemdNotifier(environment: environment)
        let server = try Server(
            configuration: configuration, source: source, listener: listener,
            notifier: notifier, signals: signals, logger: logger)
        try server.run()
    }

    /// Each client is one fd: lift the soft limit (often 1024) toward the hard one so that
    /// --max-clients, not EMFILE, is what refuses clients.
    static func raiseDescriptorLimit(toFit clients: Int, logger: Logger) {
        var limit = rlimit()
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        guard getrlimit(resource, &limit) == 0 else { return }
        let wanted = rlim_t(clients + 64)
        guard limit.rlim_cur < wanted else { return }
        limit.rlim_cur = min(wanted, limit.rlim_max)
        if setrlimit(resource, &limit) != 0 || limit.rlim_cur < wanted {
            logger.warning(
                "open-file limit \(limit.rlim_cur) is below --max-clients \(clients) + 64: raise LimitNOFILE or lower --max-clients")
        }
    }

    public static func currentEnvironment() -> [String: String] {
        var env: [String: String] = [:]
        var p = environ
        while let entry = p.pointee {
            let s = String(cString: entry)
            if let eq = s.firstIndex(of: "=") { env[String(s[..<eq])] = String(s[s.index(after: eq)...]) }
            p += 1
        }
        return env
    }
}
