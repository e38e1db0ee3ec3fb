import ArgumentParser
import Glibc
import Logging
import VsyncCore
import VsyncDaemon

/// vsyncd: broadcasts display vblank ticks to client display links over a Unix socket.
struct Vsyncd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vsyncd",
        abstract: "Broadcast display vblank ticks to client display links over a Unix socket.",
        discussion: """
            Watches every active CRTC on every /dev/dri/card* (or the cards given with --device) and \
            serves ticks to clients at per-client rates. The socket is --socket, else $VSYNCD_SOCKET, \
            else \(DaemonConfiguration.defaultSocketPath); systemd socket activation (LISTEN_FDS) is \
            used when present. Stops cleanly on SIGTERM or SIGINT. Protocol: docs/PROTOCOL.md.
            """,
        version: VsyncVersion.string)

    @Option(help: "Socket path (default: $VSYNCD_SOCKET, else \(DaemonConfiguration.defaultSocketPath)).")
    var socket: String?

    @Option(help: ArgumentHelp("DRM card to watch; repeat for several (default: every /dev/dri/card*).", valueName: "path"))
    var device: [String] = []

    @Option(
        help: ArgumentHelp(
            "Where vblanks come from: 'drm', 'timer:HZ' for a software clock, or 'replay:FILE[@SPEED]' for a trace from vsync-probe record (both flagged synthetic).",
            valueName: "drm|timer:HZ|replay:FILE"))
    var source: String = "drm"

    @Option(help: "Group whose members may always connect, as root may; others may when they can use the display.")
    var group: String = "video"

    @Option(
        help: ArgumentHelp(
            "Judge who may connect by this node's owner, mode and ACL instead of the cards served; repeat for several.",
            valueName: "path"))
    var accessNode: [String] = []

    @Option(help: "Most clients served at once; more are refused.")
    var maxClients: Int = 1024

    @Option(help: "Most connections one uid may hold at once (so one user cannot take every slot); more are refused.")
    var maxClientsPerUser: Int = DaemonConfiguration.defaultMaxClientsPerUser

    @Option(help: "Most subscriptions one uid may hold over all its connections (each costs a send per vblank).")
    var maxSubscriptionsPerUser: Int = DaemonConfiguration.defaultMaxSubscriptionsPerUser

    @Option(help: ArgumentHelp("Seconds a client's socket may stay full before it is disconnected.", valueName: "seconds"))
    var stallTimeout: Double = 2

    @Option(
        help: ArgumentHelp(
            "'continuous' keeps each followed display's vblank interrupt on; 'sparse' samples it in short bursts once the refresh model is confident and times the ticks between them from the model, so the interrupt can sleep (panel self-refresh, deep idle states). See vsyncd(8).",
            valueName: "continuous|sparse"))
    var vblankSampling: String = VBlankSampling.Mode.continuous.rawValue

    @Option(help: ArgumentHelp("trace, debug, info, notice, warning, error or critical.", valueName: "level"))
    var logLevel: String = "info"

    func validate() throws {
        guard DaemonConfiguration.SourceKind(argument: source) != nil else {
            throw ValidationError("--source must be 'drm', 'timer:HZ' (e.g. timer:60) or 'replay:FILE[@SPEED]', not '\(source)'")
        }
        guard VBlankSampling.Mode(rawValue: vblankSampling) != nil else {
            throw ValidationError("--vblank-sampling must be 'continuous' or 'sparse', not '\(vblankSampling)'")
        }
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical")
        }
        guard maxClients >= 1 else { throw ValidationError("--max-clients must be at least 1") }
        guard maxClientsPerUser >= 1 else { throw ValidationError("--max-clients-per-user must be at least 1") }
        guard maxSubscriptionsPerUser >= 1 else { throw ValidationError("--max-subscriptions-per-user must be at least 1") }
        guard stallTimeout > 0, stallTimeout.isFinite else { throw ValidationError("--stall-timeout must be a positive number of seconds") }
    }

    func run() throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "vsyncd")
        var configuration = DaemonConfiguration(
            socketPath: socket, devices: device, source: DaemonConfiguration.SourceKind(argument: source) ?? .drm,
            group: group, maxClients: maxClients, stallTimeout: stallTimeout,
            maxClientsPerUser: maxClientsPerUser, maxSubscriptionsPerUser: maxSubscriptionsPerUser,
            vblankSampling: VBlankSampling.Mode(rawValue: vblankSampling) ?? .continuous)
        configuration.accessNodes = accessNode
        do {
            try Daemon.run(configuration, logger: logger)
        } catch {
            // One line: what failed and what to do (stderr reaches the journal under systemd).
            let line = "vsyncd: \(error.description)\n"
            _ = line.withCString { write(2, $0, strlen($0)) }
            throw ExitCode(1)
        }
    }
}

Vsyncd.main()
