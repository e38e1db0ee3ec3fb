/// A POSIX access ACL as the kernel stores it in the `system.posix_acl_access` xattr: a 4-byte
/// header (version 2, little-endian) then 8-byte entries {tag u16, perm u16, id u32}. This is
/// what logind's `uaccess` writes on /dev/dri/card* for the active seat's user, read here without
/// libacl.
public struct PosixACL: Sendable, Equatable {
    public enum Tag: UInt16, Sendable {
        case userObject = 0x01
        case user = 0x02
        case groupObject = 0x04
        case group = 0x08
        case mask = 0x10
        case other = 0x20
    }

    public struct Entry: Sendable, Equatable {
        public var tag: Tag
        /// rwx bits: 4 read, 2 write, 1 execute.
        public var permissions: UInt16
        /// The uid or gid of a named entry; unused (0xFFFFFFFF in the kernel's bytes) for the others.
        public var id: UInt32
        public init(tag: Tag, permissions: UInt16, id: UInt32 = UInt32.max) {
            self.tag = tag
            self.permissions = permissions
            self.id = id
        }
    }

    public var entries: [Entry]
    public init(entries: [Entry]) { self.entries = entries }

    public static let xattrName = "system.posix_acl_access"
    static let version: UInt32 = 2

    /// Parses the xattr's bytes; nil when they are not a version 2 ACL or carry an unknown tag
    /// (then only the file mode is used, as the kernel itself would reject such an ACL).
    public init?(xattr bytes: some Collection<UInt8>) {
        let b = Array(bytes)
        guard b.count >= 4, (b.count - 4) % 8 == 0, Self.le32(b, 0) == Self.version else { return nil }
        var entries: [Entry] = []
        var at = 4
        while at < b.count {
            guard let tag = Tag(rawValue: Self.le16(b, at)) else { return nil }
            entries.append(Entry(tag: tag, permissions: Self.le16(b, at + 2), id: Self.le32(b, at + 4)))
            at += 8
        }
        self.entries = entries
    }

    /// The xattr's bytes (tests build ACLs the way the kernel stores them).
    public var xattrBytes: [UInt8] {
        var out: [UInt8] = []
        func put16(_ v: UInt16) { out += [UInt8(v & 0xFF), UInt8(v >> 8)] }
        func put32(_ v: UInt32) { for s in stride(from: 0, to: 32, by: 8) { out.append(UInt8((v >> UInt32(s)) & 0xFF)) } }
        put32(Self.version)
        for e in entries {
            put16(e.tag.rawValue)
            put16(e.permissions)
            put32(e.id)
        }
        return out
    }

    private static func le16(_ b: [UInt8], _ at: Int) -> UInt16 { UInt16(b[at]) | UInt16(b[at + 1]) << 8 }
    private static func le32(_ b: [UInt8], _ at: Int) -> UInt32 {
        UInt32(b[at]) | UInt32(b[at + 1]) << 8 | UInt32(b[at + 2]) << 16 | UInt32(b[at + 3]) << 24
    }
}

/// Who a connecting process is: SO_PEERCRED's uid and gid and SO_PEERGROUPS' supplementary groups.
public struct PeerIdentity: Sendable, Equatable {
    public var uid: UInt32
    public var gid: UInt32
    public var groups: [UInt32]
    public init(uid: UInt32, gid: UInt32, groups: [UInt32]) {
        self.uid = uid
        self.gid = gid
        self.groups = groups
    }

    public func isMember(of gid: UInt32) -> Bool { self.gid == gid || groups.contains(gid) }
}

/// A device node's owner, group, mode bits and access ACL, as stat and getxattr read them.
public struct NodeAttributes: Sendable, Equatable {
    public var owner: UInt32
    public var group: UInt32
    /// The permission bits (0o777 part of st_mode).
    public var mode: UInt32
    public var acl: PosixACL?
    public init(owner: UInt32, group: UInt32, mode: UInt32, acl: PosixACL?) {
        self.owner = owner
        self.group = group
        self.mode = mode & 0o777
        self.acl = acl
    }

    /// Whether the kernel grants `peer` every bit of `want` (rwx: 4, 2, 1) on this node, by the
    /// POSIX ACL access check (acl(5), the kernel's posix_acl_permission): the owner entry; else a
    /// named user entry, masked; else any owning-group or named-group entry that matches and holds
    /// all of `want`, masked; a matching group that lacks them refuses; else other. With no ACL,
    /// the same order over the mode bits. Root's override is the caller's business.
    public func grants(_ want: UInt16, to peer: PeerIdentity) -> Bool {
        guard let acl, !acl.entries.isEmpty else {
            if peer.uid == owner { return UInt16((mode >> 6) & 7) & want == want }
            if peer.isMember(of: group) { return UInt16((mode >> 3) & 7) & want == want }
            return UInt16(mode & 7) & want == want
        }
        let mask = acl.entries.first { $0.tag == .mask }?.permissions ?? 7
        var groupMatched = false
        for e in acl.entries {
            switch e.tag {
            case .userObject where peer.uid == owner: return e.permissions & want == want
            case .user where e.id == peer.uid: return e.permissions & mask & want == want
            case .groupObject where peer.isMember(of: group), .group where peer.isMember(of: e.id):
                groupMatched = true
                if e.permissions & want == want { return mask & want == want }
            default: break
            }
        }
        if groupMatched { return false }
        return (acl.entries.first { $0.tag == .other }?.permissions ?? 0) & want == want
    }

    /// Read and write: what opening the node O_RDWR, as vsyncd does, needs.
    public func grantsReadWrite(to peer: PeerIdentity) -> Bool { grants(6, to: peer) }
}

/// Whether a connecting process may use the display: the same decision the system already made
/// for the DRM card nodes (logind's uaccess ACL for the active seat's user, or a seatd/udev
/// group and mode), plus root and the daemon's own group.
public struct DisplayAccessPolicy: Sendable, Equatable {
    /// The daemon's `--group`; nil when that group does not exist.
    public var groupID: UInt32?
    public var groupName: String
    public init(groupID: UInt32?, groupName: String) {
        self.groupID = groupID
        self.groupName = groupName
    }

    public enum Decision: Sendable, Equatable {
        case allowed
        /// The one line the client and the log get: who, why, what to do.
        case refused(String)
    }

    /// `nodes` are the card nodes judged, by path; a node that could not be read is absent.
    /// Access to any one of them is enough (logind grants a seat's cards together).
    public func decide(_ peer: PeerIdentity, nodes: [(path: String, attributes: NodeAttributes)]) -> Decision {
        if peer.uid == 0 { return .allowed }
        if let groupID, peer.isMember(of: groupID) { return .allowed }
        if nodes.contains(where: { $0.attributes.grantsReadWrite(to: peer) }) { return .allowed }
        // One path, so the line stays within REFUSED's 256 bytes with its advice at the end.
        let names =
            switch nodes.count {
            case 0: "any display (none is open)"
            case 1: nodes[0].path
            default: "\(nodes[0].path) or the other \(nodes.count - 1) card(s)"
            }
        return .refused(
            "vsyncd: uid \(peer.uid) may not use the display: it has no read-write access to \(names) (not the active seat's user, not in group \(groupName)); log in on the seat or add the user to group \(groupName)"
        )
    }
}
