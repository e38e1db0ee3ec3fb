import VsyncDRM

/// Which card and CRTC a measurement runs on.
struct Target {
    let card: Card
    let crtc: CRTC
    let resources: CardResources

    var connector: Connector? { resources.connectors(of: crtc).first }

    /// `device` nil: every card in order; `crtcID` nil: the first active CRTC.
    static func select(device: String?, crtcID: UInt32?, method: VBlankMethod?) throws(DRMError) -> Target {
        let paths: [String]
        if let device {
            paths = [device]
        } else {
            paths = Card.primaryNodePaths()
            guard !paths.isEmpty else {
                throw DRMError(kind: .noDevice, errno: 0, device: "/dev/dri", operation: "scan")
            }
        }
        var firstError: DRMError? = nil
        var firstOff: (Card, CRTC)? = nil
        for path in paths {
            let card: Card
            let resources: CardResources
            do {
                card = try Card(path: path, method: method)
                resources = try card.resources()
            } catch {
                if firstError == nil { firstError = error }
                continue
            }
            if let crtcID {
                // The id names a CRTC on one card: look on this one, or say which ids exist.
                guard let crtc = resources.crtc(id: crtcID) else {
                    if device != nil || paths.count == 1 {
                        throw DRMError(
                            kind: .unknownCRTC(crtcID: crtcID, valid: card.crtcIDs), errno: 0,
                            device: path, operation: "lookup")
                    }
                    if firstError == nil {
                        firstError = DRMError(
                            kind: .unknownCRTC(crtcID: crtcID, valid: card.crtcIDs), errno: 0,
                            device: path, operation: "lookup")
                    }
                    continue
                }
                guard crtc.isActive else {
                    throw DRMError(kind: .crtcOff(crtcID: crtc.id), errno: 0, device: path, operation: "drmModeGetCrtc")
                }
                return Target(card: card, crtc: crtc, resources: resources)
            }
            if let crtc = resources.crtcs.first(where: \.isActive) {
                return Target(card: card, crtc: crtc, resources: resources)
            }
            if firstOff == nil, let crtc = resources.crtcs.first { firstOff = (card, crtc) }
        }
        if let (card, crtc) = firstOff {
            throw DRMError(kind: .crtcOff(crtcID: crtc.id), errno: 0, device: card.path, operation: "drmModeGetCrtc")
        }
        if let firstError { throw firstError }
        throw DRMError(kind: .noDevice, errno: 0, device: "/dev/dri", operation: "scan")
    }
}

extension Target {
    /// Every active CRTC of every card, in card order then CRTC order (`measure --all`). Cards
    /// that cannot be read are skipped; with no active CRTC anywhere, the first error or a
    /// "CRTC off" one.
    static func all(method: VBlankMethod?) throws(DRMError) -> [Target] {
        let paths = Card.primaryNodePaths()
        guard !paths.isEmpty else { throw DRMError(kind: .noDevice, errno: 0, device: "/dev/dri", operation: "scan") }
        var targets: [Target] = []
        var firstError: DRMError? = nil
        var firstOff: (Card, CRTC)? = nil
        for path in paths {
            do {
                let card = try Card(path: path, method: method)
                let resources = try card.resources()
                for crtc in resources.crtcs {
                    if crtc.isActive {
                        targets.append(Target(card: card, crtc: crtc, resources: resources))
                    } else if firstOff == nil {
                        firstOff = (card, crtc)
                    }
                }
            } catch {
                if firstError == nil { firstError = error }
            }
        }
        if !targets.isEmpty { return targets }
        if let (card, crtc) = firstOff {
            throw DRMError(kind: .crtcOff(crtcID: crtc.id), errno: 0, device: card.path, operation: "drmModeGetCrtc")
        }
        throw firstError ?? DRMError(kind: .noDevice, errno: 0, device: "/dev/dri", operation: "scan")
    }
}
