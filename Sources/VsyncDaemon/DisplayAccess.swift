import CLinux
import Glibc
import Logging
import VsyncCore

/// Who may connect: the users who may already use the display. The daemon judges each peer by
/// the access the system gives it to the card nodes served (owner, group, mode and the POSIX ACL
/// logind's uaccess writes for the active seat's user), so the socket itself is mode 0666.
struct DisplayAccess {
    enum Nodes: Equatable {
        /// The cards the DRM source has open, read at each accept (they come and go).
        case served
        /// `--access-node`: judged by these paths instead.
        case fixed([String])
        /// A synthetic source (timer, replay) and no `--access-node`: its ticks come from a clock
        /// any process could read, so everyone may connect (the per-user and per-app caps hold).
        case everyone
    }

    let policy: DisplayAccessPolicy
    let nodes: Nodes

    init(configuration: DaemonConfiguration, synthetic: Bool, logger: Logger) {
        let group = getgrnam(configuration.group).map { $0.pointee.gr_gid }
        if group == nil {
            logger.warning(
                "group '\(configuration.group)' does not exist: only root and the users who may use the display connect; create it or pass --group"
            )
        }
        policy = DisplayAccessPolicy(groupID: group, groupName: configuration.group)
        if !configuration.accessNodes.isEmpty {
            nodes = .fixed(configuration.accessNodes)
        } else {
            nodes = synthetic ? .everyone : .served
        }
    }

    /// `served` is the card paths open now; only read for `.served`.
    func decide(_ peer: Peer, served: @autoclosure () -> [String]) -> DisplayAccessPolicy.Decision {
        let paths: [String]
        switch nodes {
        case .everyone: return .allowed
        case .fixed(let p): paths = p
        case .served: paths = served()
        }
        let judged = paths.map { (path: $0, attributes: Self.attributes(of: $0) ?? Self.nobody) }
        return policy.decide(peer.identity, nodes: judged)
    }

    /// A node that cannot be read grants nothing (only root and the group pass).
    private static let nobody = NodeAttributes(owner: 0, group: 0, mode: 0, acl: nil)

    /// stat and the access ACL of `path`; nil if it cannot be stat'ed. No ACL (ENODATA, or a file
    /// system without them) leaves the mode bits to decide, as the kernel would.
    static func attributes(of path: String) -> NodeAttributes? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        var bytes = [UInt8](repeating: 0, count: 1024)
        let n = bytes.withUnsafeMutableBytes { getxattr(path, PosixACL.xattrName, $0.baseAddress, $0.count) }
        let acl = n > 0 ? PosixACL(xattr: bytes.prefix(n)) : nil
        return NodeAttributes(owner: st.st_uid, group: st.st_gid, mode: UInt32(st.st_mode), acl: acl)
    }
}
