import Glibc
import Logging
import VsyncCore
import VsyncDRM

/// Real vblanks from DRM: every CRTC of every card in /dev/dri (or those named with `--device`).
///
/// A few vblank requests are kept in flight per active CRTC (`Card.fillVBlankQueue`), topped up
/// as each arrives, so a daemon woken late still gets every vblank, and the kernel keeps the
/// interrupt on only while a subscriber is running (and for the few frames already asked for). /dev/dri is watched with
/// inotify so cards that come and go are noticed without polling, and the kernel's DRM uevents
/// so connectors that come and go are.
final class DRMVBlankSource: VBlankSource {
    /// An open card as the vblank path sees it: found by its fd, with the server's token for
    /// each CRTC (by pipe) whose vblanks are wanted.
    final class OpenCard {
        let path: String
        let card: Card
        var tokens: [UInt32?]
        /// At most this many requests in flight per CRTC, by pipe (nil: the card's depth).
        var depthLimits: [Int?]
        init(path: String, card: Card) {
            self.path = path
            self.card = card
            tokens = Array(repeating: nil, count: card.crtcIDs.count)
            depthLimits = Array(repeating: nil, count: card.crtcIDs.count)
        }
    }

    let logger: Logger
    private let explicitDevices: [String]
    private(set) var cards: [String: OpenCard] = [:]
    /// The same cards by fd: a readable fd finds its card in one indexed load.
    private var cardByFD = DescriptorTable<OpenCard>()
    /// Watches /dev/dri for cards that come and go (nil with --device, or when refused).
    private var inotify: FileDescriptor?
    private var uevents: UeventSocket?
    /// CRTCs whose vblank `readEvents` just delivered, re-queued by `rearm`.
    private var toRequeue: [(card: OpenCard, pipe: Int)] = []
    /// One read's vblank events, reused so a vblank allocates nothing.
    private var events: [VBlankEvent] = []
    /// Connector seen on each CRTC, kept so a display that turns off keeps its name.
    var connectors: [DisplayKey: ConnectorIdentity] = [:]
    private var lastFound: [String: [SourceDisplay]] = [:]
    /// Each open card's stable path (DRMVBlankSource+Cards.swift).
    var busPaths: [String: String] = [:]
    /// Cards whose node is there but would not open yet (ENODEV/ENXIO).
    var comingUp = ComingUpCards()
    let pnpRegistry = PNPRegistry.installed()

    init(devices: [String], logger: Logger) throws(DaemonError) {
        self.logger = logger
        self.explicitDevices = devices
        let paths = devices.isEmpty ? Card.primaryNodePaths() : devices
        guard !paths.isEmpty else {
            throw .noCard(DRMError(kind: .noDevice, errno: ENOENT, device: "/dev/dri", operation: "scan"))
        }
        var firstError: DRMError?
        for path in paths {
            do throws(DRMError) {
                try open(path)
            } catch {
                // A card named on the command line must open; among discovered ones, skip the bad.
                if !devices.isEmpty { throw .card(error) }
                if !retryLater(path, error) { logger.warning("skipping \(path): \(error)") }
                firstError = firstError ?? error
            }
        }
        guard !cards.isEmpty || !comingUp.isEmpty else { throw .noUsableCard(firstError) }
        if devices.isEmpty, case let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC)), fd >= 0 {
            let watch = FileDescriptor(fd)
            if inotify_add_watch(watch.raw, "/dev/dri", UInt32(IN_CREATE | IN_DELETE)) < 0 {
                logger.warning("cannot watch /dev/dri for new cards: \(errnoText()); cards added later are found only when one fails")
            } else {
                inotify = consume watch
            }
        }
        var why = ""
        uevents = UeventSocket(failure: &why)
        if uevents == nil {
            logger.info(
                "no DRM hotplug events (\(why)): displays that appear are found by a re-read four times a second while a client waits")
        }
    }

    private func open(_ path: String) throws(DRMError) {
        let card = try Card(path: path)
        guard card.hasMonotonicTimestamps else {
            throw DRMError(
                kind: .other, errno: 0, device: path, operation: "DRM_CAP_TIMESTAMP_MONOTONIC is 0: its timestamps are not CLOCK_MONOTONIC")
        }
        let open = OpenCard(path: path, card: card)
        cards[path] = open
        cardByFD[card.fileDescriptor] = open
        opened(path)
        logger.info(
            "opened \(path) (\(card.driverName), \(card.vblankMethod.rawValue), CRTCs \(card.crtcIDs.map(String.init).joined(separator: ", ")))"
        )
    }

    var isSynthetic: Bool { false }

    var pollDescriptors: [Int32] {
        cards.values.map(\.card.fileDescriptor) + ((inotify?.raw).map { [$0] } ?? []) + (uevents.map { [$0.fd] } ?? [])
    }

    private func deviceName(_ path: String) -> String {
        String(path.split(separator: "/").last ?? Substring(path))
    }

    private func display(_ key: DisplayKey, crtc: CRTC) -> SourceDisplay {
        let connector = connectors[key]
        let timings = crtc.mode?.timings
        return SourceDisplay(
            key: key, connectorID: connector?.id ?? 0, connectorName: connector?.name ?? "CRTC-\(crtc.id)",
            deviceName: deviceName(key.device), isActive: crtc.isActive, refresh: crtc.mode?.refreshRate,
            width: timings?.hdisplay ?? 0, height: timings?.vdisplay ?? 0,
            busPath: busPaths[key.device] ?? "", edid: connector?.edid,
            order: connector?.order ?? Self.order(device: key.device, connectorIndex: 999),
            variableRefresh: variableRefreshState(key))
    }

    private func drop(_ path: String, reason: String) {
        lastFound[path] = nil
        guard let open = cards.removeValue(forKey: path) else { return }
        cardByFD[open.card.fileDescriptor] = nil
        for pipe in open.tokens.indices { open.tokens[pipe] = nil }
        forget(path)
        logger.warning("closed \(path): \(reason)")
    }

    func rescan() -> [SourceDisplay] {
        if explicitDevices.isEmpty {
            let present = Set(Card.primaryNodePaths())
            for path in cards.keys where !present.contains(path) { drop(path, reason: "device node removed") }
            comingUp.keep(only: present)
            for path in present.sorted() where cards[path] == nil {
                do throws(DRMError) { try open(path) } catch {
                    if !retryLater(path, error) { logger.warning("skipping \(path): \(error)") }
                }
            }
        }
        var found: [SourceDisplay] = []
        for path in cards.keys.sorted() {
            guard let card = cards[path]?.card else { continue }
            let resources: CardResources
            do throws(DRMError) {
                resources = try card.resources()
            } catch {
                if error.kind == .deviceGone {
                    drop(path, reason: error.description)
                    // A node still there is a card that went and came back between two
                    // rescans: opened again at the next one (cards coming up).
                    _ = retryLater(path, error)
                } else {
                    // A transient failure must not look like the card's displays vanished.
                    logger.error("\(error)")
                    found += lastFound[path] ?? []
                }
                continue
            }
            var cardDisplays: [SourceDisplay] = []
            for crtc in resources.crtcs {
                let key = DisplayKey(device: path, crtcID: crtc.id)
                if let c = resources.connectors(of: crtc).first {
                    connectors[key] = identity(of: c, index: resources.connectors.firstIndex(of: c) ?? 0, on: card, key: key)
                }
                cardDisplays.append(display(key, crtc: crtc))
            }
            lastFound[path] = cardDisplays
            found += cardDisplays
        }
        return found
    }

    func refresh(_ key: DisplayKey) -> SourceDisplay? {
        guard let card = cards[key.device]?.card else { return nil }
        do throws(DRMError) {
            return display(key, crtc: try card.crtc(id: key.crtcID))
        } catch {
            switch error.kind {
            case .deviceGone:
                drop(key.device, reason: error.description)
                return nil
            case .unknownCRTC: return nil
            default:
                logger.error("\(error)")
                return nil
            }
        }
    }

    private func failure(_ error: DRMError) -> VBlankFailure {
        switch error.kind {
        case .crtcOff: .off
        case .deviceGone: .gone
        default: .other(error.description)
        }
    }

    /// The card and pipe of a display's CRTC (slow path: setActive, isActive).
    private func locate(_ key: DisplayKey) -> (card: OpenCard, pipe: Int)? {
        guard let open = cards[key.device], let pipe = open.card.crtcIDs.firstIndex(of: key.crtcID) else { return nil }
        return (open, pipe)
    }

    /// Tops up the CRTC's requests in flight (the card counts them); true if none was left.
    @discardableResult
    private func queue(_ open: OpenCard, pipe: Int, token: UInt32) throws(VBlankFailure) -> Bool {
        do throws(DRMError) {
            return try open.card.fillVBlankQueue(pipe: pipe, token: token, depthLimit: open.depthLimits[pipe])
        } catch {
            if error.kind == .deviceGone { drop(open.path, reason: error.description) }
            throw failure(error)
        }
    }

    func setActive(_ key: DisplayKey, _ on: Bool, token: UInt32) throws(VBlankFailure) {
        guard let (open, pipe) = locate(key) else {
            if on { throw .gone }
            return
        }
        if on {
            open.tokens[pipe] = token
            do throws(VBlankFailure) { try queue(open, pipe: pipe, token: token) } catch {
                open.tokens[pipe] = nil
                throw error
            }
        } else {
            // Requests already in flight still arrive; they are then not re-queued.
            open.tokens[pipe] = nil
        }
    }

    func limitQueue(_ key: DisplayKey, to depth: Int?) {
        guard let (open, pipe) = locate(key) else { return }
        open.depthLimits[pipe] = depth
    }

    func isActive(_ key: DisplayKey) -> Bool {
        guard let (open, pipe) = locate(key) else { return false }
        return open.tokens[pipe] != nil
    }

    func readEvents(from fd: Int32, into out: inout [SourceEvent]) {
        if let uevents, fd == uevents.fd {
            if uevents.drainForDRM() { out.append(.devicesChanged) }
            return
        }
        if fd == inotify?.raw {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while let n = try? nonBlocking("read", { buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) } }), n > 0 {}
            out.append(.devicesChanged)
            return
        }
        guard let open = cardByFD[fd] else { return }
        events.removeAll(keepingCapacity: true)
        do throws(DRMError) {
            try open.card.readEvents(into: &events)
        } catch {
            if error.kind == .deviceGone {
                let gone = open.tokens.compactMap { $0 }
                drop(open.path, reason: error.description)
                for token in gone { out.append(.failed(token: token, .gone)) }
                out.append(.devicesChanged)
                return
            }
            logger.error("\(error)")
            return
        }
        for event in events {
            // The event names its CRTC by pipe; a request made for an earlier activation
            // (another token) is not this one's.
            guard let token = open.tokens[event.pipe], token == event.token else { continue }
            out.append(.vblank(token: token, sequence: event.sequence, timestampNs: event.timestampNs))
            // A late read may hold several vblanks of one CRTC: top its queue up once.
            if let last = toRequeue.last, last.card === open, last.pipe == event.pipe { continue }
            toRequeue.append((open, event.pipe))
        }
    }

    func rearm(into out: inout [SourceEvent]) {
        for (open, pipe) in toRequeue {
            guard let token = open.tokens[pipe] else { continue }
            do throws(VBlankFailure) {
                if try queue(open, pipe: pipe, token: token) { out.append(.requeued(token: token)) }
            } catch {
                open.tokens[pipe] = nil
                out.append(.failed(token: token, error))
            }
        }
        toRequeue.removeAll(keepingCapacity: true)
    }
}
