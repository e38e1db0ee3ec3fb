import VsyncCore

/// Everything vsyncd is told on its command line and in its environment.
public struct DaemonConfiguration: Sendable {
    public enum SourceKind: Sendable, Equatable {
        case drm
        /// A software clock at this rate (`--source timer:HZ`).
        case timer(hertz: Double)
        /// A recorded trace, FILE or FILE@SPEED (`--source replay:FILE[@SPEED]`).
        case replay(String)

        /// Parses "drm", "timer:HZ" or "replay:FILE[@SPEED]"; nil if none.
        public init?(argument: String) {
            if argument == "drm" {
                self = .drm
                return
            }
            if argument.hasPrefix("replay:"), argument.count > 7 {
                self = .replay(String(argument.dropFirst(7)))
                return
            }
            guard argument.hasPrefix("timer:"), let hz = Double(argument.dropFirst(6)), hz.isFinite, hz > 0 else {
                return nil
            }
            self = .timer(hertz: hz)
        }
    }

    public static let defaultSocketPath = "/run/vsyncd/vsyncd.sock"

    /// Nil: `$VSYNCD_SOCKET`, else `defaultSocketPath`.
    public var socketPath: String?
    /// DRM cards to watch; empty: every /dev/dri/card*.
    public var devices: [String]
    public var source: SourceKind
    /// Group whose members may always connect, with root; others connect when they may use a
    /// card node served (see `accessNodes`). The socket is mode 0666: the daemon decides.
    public var group: String
    /// `--access-node`: judge who may connect by these nodes' owner, mode and ACL instead of the
    /// cards served. Empty: the cards served; with the timer or a replay, everyone.
    public var accessNodes: [String] = []
    public var maxClients: Int
    /// Seconds a client's socket may stay full before it is disconnected.
    public var stallTimeout: Double
    public var maxSubscriptionsPerClient: Int
    /// Connections one uid may hold at once, so one member of the socket's group cannot take
    /// every slot. 128 leaves seven eighths of the default 1024 to the others, and is far more
    /// than one user's programs need (DisplayLink and libvsync use one connection a process).
    public var maxClientsPerUser: Int
    /// Subscriptions one uid may hold over all its connections. Each running subscription costs
    /// the daemon one send per due vblank, so this bounds what one user can make it do per tick.
    public var maxSubscriptionsPerUser: Int

    /// Connections one sandboxed app (by its Flatpak app id) may hold: half of its user's, so one
    /// app cannot take its user's whole share.
    public var maxClientsPerApp: Int { max(1, maxClientsPerUser / 2) }
    /// Subscriptions one sandboxed app may hold: half of its user's.
    public var maxSubscriptionsPerApp: Int { max(1, maxSubscriptionsPerUser / 2) }
    /// Vblank events all the time, or in bursts with ticks from the model between them
    /// (`VBlankSampling`).
    public var vblankSampling: VBlankSampling.Mode

    public static let defaultMaxClientsPerUser = 128
    public static let defaultMaxSubscriptionsPerUser = 256

    public init(
        socketPath: String? = nil, devices: [String] = [], source: SourceKind = .drm, group: String = "video",
        maxClients: Int = 1024, stallTimeout: Double = 2, maxSubscriptionsPerClient: Int = 64,
        maxClientsPerUser: Int = DaemonConfiguration.defaultMaxClientsPerUser,
        maxSubscriptionsPerUser: Int = DaemonConfiguration.defaultMaxSubscriptionsPerUser,
        vblankSampling: VBlankSampling.Mode = .continuous
    ) {
        self.vblankSampling = vblankSampling
        self.socketPath = socketPath
        self.devices = devices
        self.source = source
        self.group = group
        self.maxClients = maxClients
        self.stallTimeout = stallTimeout
        self.maxSubscriptionsPerClient = maxSubscriptionsPerClient
        self.maxClientsPerUser = maxClientsPerUser
        self.maxSubscriptionsPerUser = maxSubscriptionsPerUser
    }

    /// `--socket`, else `$VSYNCD_SOCKET`, else the default.
    public func resolvedSocketPath(environment: [String: String]) -> String {
        if let p = socketPath, !p.isEmpty { return p }
        if let p = environment["VSYNCD_SOCKET"], !p.isEmpty { return p }
        return Self.defaultSocketPath
    }
}
