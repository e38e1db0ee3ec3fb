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
}

// Card lifecycle: cards that are coming up, cards that go and come back, and the names that
// identify a card (bus path) and a monitor (EDID). Kept apart from the vblank queueing.
extension DRMVBlankSource: CardLifecycle {
    /// How many times a card node that will not open yet is retried (at the housekeeping rate,
    /// 4 Hz: ten seconds) before it is left until the next uevent or /dev/dri change.
    static let comingUpTries = 40

    var wantsRescanSoon: Bool { !comingUp.isEmpty }

    /// A card node that exists but answers ENODEV or ENXIO is still coming up (vkms and hotplugged
    /// GPUs create the node before the device can be opened): retried, not called gone. Returns
    /// whether it will be.
    func retryLater(_ path: String, _ error: DRMError) -> Bool {
        guard error.kind == .deviceGone, access(path, F_OK) == 0 else {
            comingUp[path] = nil
            return false
        }
        let tries = (comingUp[path] ?? 0) + 1
        guard tries <= Self.comingUpTries else {
            comingUp[path] = nil
            logger.warning("skipping \(path): still not ready after \(Self.comingUpTries) tries (\(error)); it is tried again on the next hotplug event")
            return true
        }
        if tries == 1 { logger.info("\(path) is not ready yet (\(error)): retrying four times a second") }
        comingUp[path] = tries
        return true
    }

    func opened(_ path: String) {
        comingUp[path] = nil
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
        var known = connectors[key].flatMap { $0.id == c.id ? $0 : nil }
        let read = card.edid(connectorID: c.id, knownBlob: known?.edidBlob)
        if let read, read.blobID != known?.edidBlob {
            known = ConnectorIdentity(id: c.id, name: c.name, edid: read.bytes.flatMap { EDIDIdentity($0, registry: pnpRegistry) },
                                      edidBlob: read.blobID, order: 0)
        }
        return ConnectorIdentity(id: c.id, name: c.name, edid: read == nil ? nil : known?.edid, edidBlob: read?.blobID ?? 0,
                                 order: Self.order(device: key.device, connectorIndex: index))
    }
}
