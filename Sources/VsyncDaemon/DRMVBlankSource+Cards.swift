import Glibc
import VsyncCore
import VsyncDRM

/// A connector as a display knows it: its name, EDID identity and place in the kernel's order.
struct ConnectorIdentity {
    var id: UInt32
    var name: String
    var edid: EDIDIdentity?
    /// The EDID blob last read, so an unchanged one is not read again.
    var edidBlob: UInt32
    var order: Int
    /// The status the EDID was read at: it is read again only when that changes (a monitor
    /// plugged or swapped), not at every rescan of the backstop.
    var status: ConnectorStatus?
    /// `vrr_capable` (nil: the driver has none), the EDID's range, and the id of the CRTC's
    /// `VRR_ENABLED` to poll (DRMVBlankSource+VariableRefresh.swift).
    var variableRefreshCapable: Bool? = nil
    var refreshRange: EDIDRefreshRange? = nil
    var enabledProperty: UInt32? = nil
}

/// Card nodes that exist but cannot be opened yet (ENODEV or ENXIO: vkms and hotplugged GPUs
/// create the node before the device is ready), with the tries so far. A card still coming up
/// is retried at the housekeeping rate, not called gone; after `maxTries` (ten seconds at 4 Hz)
/// it is left until the next uevent or /dev/dri change.
struct ComingUpCards {
    static let maxTries = 40
    enum Verdict: Equatable {
        /// Try again soon; `first` when it was just found not ready (log it once).
        case retry(first: Bool)
        /// Tried `maxTries` times: stop until something changes.
        case gaveUp
        /// Not a card coming up: the error stands.
        case notComingUp
    }

    private(set) var tries: [String: Int] = [:]
    var isEmpty: Bool { tries.isEmpty }

    mutating func failed(_ path: String, _ error: DRMError, nodeExists: Bool) -> Verdict {
        guard error.kind == .deviceGone, nodeExists else {
            tries[path] = nil
            return .notComingUp
        }
        let n = (tries[path] ?? 0) + 1
        guard n <= Self.maxTries else {
            tries[path] = nil
            return .gaveUp
        }
        tries[path] = n
        return .retry(first: n == 1)
    }

    mutating func opened(_ path: String) { tries[path] = nil }

    /// Forgets nodes that are gone.
    mutating func keep(only present: Set<String>) {
        for path in tries.keys where !present.contains(path) { tries[path] = nil }
    }
}

// Card lifecycle: cards that are coming up, cards that go and come back, and the names that
// identify a card (bus path) and a monitor (EDID). Kept apart from the vblank queueing.
extension DRMVBlankSource {
    var wantsRescanSoon: Bool { !comingUp.isEmpty }

    /// Whether the failed open of `path` is a card coming up, to be retried (and logs it once).
    func retryLater(_ path: String, _ error: DRMError) -> Bool {
        switch comingUp.failed(path, error, nodeExists: access(path, F_OK) == 0) {
        case .notComingUp: return false
        case .retry(let first):
            if first { logger.info("\(path) is not ready yet (\(error)): retrying four times a second") }
            return true
        case .gaveUp:
            logger.warning(
                "skipping \(path): still not ready after \(ComingUpCards.maxTries) tries (\(error)); it is tried again on the next hotplug event"
            )
            return true
        }
    }

    /// The next rescan reads every connector's EDID again (a monitor may have been swapped).
    func hotplugged() {
        for key in connectors.keys { connectors[key]?.status = nil }
    }

    func opened(_ path: String) {
        comingUp.opened(path)
        busPaths[path] = Card.busPath(ofNode: path)
    }

    /// The card's fd is closed (Card's deinit, as it leaves `cards`); what was known of its
    /// connectors goes with it, so a card that comes back is read afresh.
    func forget(_ path: String) {
        busPaths[path] = nil
        for key in connectors.keys where key.device == path { connectors[key] = nil }
    }

    /// Cards by number, connectors by their index on the card: the kernel's order.
    static func order(device: String, connectorIndex: Int) -> Int {
        let number = Int(device.split(separator: "/").last?.dropFirst(4) ?? "") ?? 999
        return number * 1000 + connectorIndex
    }

    func identity(of c: Connector, index: Int, on card: Card, key: DisplayKey) -> ConnectorIdentity {
        let order = Self.order(device: key.device, connectorIndex: index)
        if var known = connectors[key], known.id == c.id, known.status == c.status {
            known.order = order
            return known
        }
        let read = card.edid(connectorID: c.id)
        return ConnectorIdentity(
            id: c.id, name: c.name, edid: read?.bytes.flatMap { EDIDIdentity($0, registry: pnpRegistry) },
            edidBlob: read?.blobID ?? 0, order: order, status: c.status,
            variableRefreshCapable: card.variableRefreshCapable(connectorID: c.id),
            refreshRange: read?.bytes.flatMap { EDIDRefreshRange($0) },
            enabledProperty: card.variableRefreshEnabledProperty(crtcID: key.crtcID))
    }
}
