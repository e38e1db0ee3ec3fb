import Testing
import VsyncCore

/// Who may use a DRM card node: the POSIX ACL parsed from the kernel's xattr bytes and judged as
/// the kernel judges an open for read and write (no syscalls: ACLs as bytes).
struct NodeAccessTests {
    /// `setfacl -m u:1001:rw` on a root:video 0660 file, as `getxattr system.posix_acl_access`
    /// returned it on this machine: what logind's uaccess writes for a seat's user.
    static let uaccessBytes: [UInt8] = hex(
        "0200000001000600ffffffff02000600e903000004000600ffffffff10000600ffffffff20000000ffffffff")
    static let video: UInt32 = 44

    static func hex(_ s: String) -> [UInt8] {
        var out: [UInt8] = []
        var i = s.startIndex
        while i < s.endIndex {
            let j = s.index(i, offsetBy: 2)
            out.append(UInt8(s[i..<j], radix: 16)!)
            i = j
        }
        return out
    }

    static func node(_ acl: PosixACL?, mode: UInt32 = 0o660) -> NodeAttributes {
        NodeAttributes(owner: 0, group: video, mode: mode, acl: acl)
    }
    static func user(_ uid: UInt32, groups: [UInt32] = []) -> PeerIdentity { PeerIdentity(uid: uid, gid: uid, groups: groups) }

    @Test func parsesTheKernelsBytesAndWritesThemBack() throws {
        let acl = try #require(PosixACL(xattr: Self.uaccessBytes))
        #expect(acl.entries.map(\.tag) == [.userObject, .user, .groupObject, .mask, .other])
        #expect(acl.entries[1] == PosixACL.Entry(tag: .user, permissions: 6, id: 1001))
        #expect(acl.xattrBytes == Self.uaccessBytes)
    }

    @Test func rejectsBytesThatAreNotAVersion2ACL() {
        #expect(PosixACL(xattr: [UInt8]()) == nil)
        #expect(PosixACL(xattr: [1, 0, 0, 0]) == nil, "version 1")
        #expect(PosixACL(xattr: Array(Self.uaccessBytes.dropLast())) == nil, "a cut entry")
        var unknownTag = Self.uaccessBytes
        unknownTag[4] = 0x40
        #expect(PosixACL(xattr: unknownTag) == nil, "an unknown tag")
    }

    @Test func theSeatUserGetsReadWriteOthersDoNot() throws {
        let node = Self.node(PosixACL(xattr: Self.uaccessBytes))
        #expect(node.grantsReadWrite(to: Self.user(1001)), "the named user")
        #expect(!node.grantsReadWrite(to: Self.user(1002)), "another user")
        #expect(node.grantsReadWrite(to: Self.user(1002, groups: [Self.video])), "a member of the owning group")
        #expect(node.grantsReadWrite(to: PeerIdentity(uid: 0, gid: 0, groups: [])), "the owner")
    }

    @Test func theMaskLimitsNamedUsersAndGroupsButNotTheOwnerOrOther() {
        let acl = PosixACL(entries: [
            .init(tag: .userObject, permissions: 6), .init(tag: .user, permissions: 6, id: 1001),
            .init(tag: .groupObject, permissions: 6), .init(tag: .group, permissions: 6, id: 500),
            .init(tag: .mask, permissions: 4), .init(tag: .other, permissions: 6),
        ])
        let node = Self.node(acl)
        #expect(!node.grantsReadWrite(to: Self.user(1001)), "named user masked to read")
        #expect(node.grants(4, to: Self.user(1001)))
        #expect(!node.grantsReadWrite(to: Self.user(1003, groups: [500])), "named group masked to read")
        #expect(node.grantsReadWrite(to: Self.user(0)), "owner unmasked")
        #expect(node.grantsReadWrite(to: Self.user(1004)), "other unmasked")
    }

    @Test func aMatchingGroupWithoutTheBitsRefusesRatherThanFallingToOther() {
        // acl(5): matching a group entry that lacks the bits is a refusal, even when other has them;
        // and each group entry must hold all the bits itself (read from one and write from another is not enough).
        let acl = PosixACL(entries: [
            .init(tag: .userObject, permissions: 6), .init(tag: .groupObject, permissions: 4),
            .init(tag: .group, permissions: 2, id: 500), .init(tag: .mask, permissions: 6),
            .init(tag: .other, permissions: 6),
        ])
        let node = Self.node(acl)
        #expect(!node.grantsReadWrite(to: Self.user(1001, groups: [Self.video, 500])))
        #expect(node.grantsReadWrite(to: Self.user(1001)), "in no group: other")
    }

    @Test func withoutAnACLTheModeBitsDecide() {
        let node = Self.node(nil, mode: 0o660)
        #expect(node.grantsReadWrite(to: Self.user(1001, groups: [Self.video])))
        #expect(!node.grantsReadWrite(to: Self.user(1001)))
        #expect(Self.node(nil, mode: 0o666).grantsReadWrite(to: Self.user(1001)))
        #expect(!Self.node(nil, mode: 0o606).grantsReadWrite(to: Self.user(1001, groups: [Self.video])), "the group class refuses before other")
    }

    @Test func policyLetsRootAndTheGroupInAndRefusesOthersWithOneLine() {
        let policy = DisplayAccessPolicy(groupID: Self.video, groupName: "video")
        let nodes = [(path: "/dev/dri/card0", attributes: Self.node(nil))]
        #expect(policy.decide(PeerIdentity(uid: 0, gid: 0, groups: []), nodes: []) == .allowed)
        #expect(policy.decide(Self.user(1001, groups: [Self.video]), nodes: []) == .allowed, "--group with no card")
        #expect(policy.decide(PeerIdentity(uid: 1001, gid: Self.video, groups: []), nodes: []) == .allowed, "primary gid")
        #expect(
            policy.decide(Self.user(1001), nodes: nodes)
                == .refused(
                    "vsyncd: uid 1001 may not use the display: it has no read-write access to /dev/dri/card0 (not the active seat's user, not in group video); log in on the seat or add the user to group video"
                ))
        let seat = [nodes[0], (path: "/dev/dri/card1", attributes: Self.node(PosixACL(xattr: Self.uaccessBytes)))]
        if case .refused(let line) = policy.decide(Self.user(1002), nodes: seat) {
            #expect(line.contains("/dev/dri/card0 or the other 1 card(s)") && line.utf8.count <= 256, "\(line)")
        } else {
            Issue.record("uid 1002 was let in")
        }
        #expect(policy.decide(Self.user(1001), nodes: seat) == .allowed, "access to one card of the seat is enough")
    }

    @Test func flatpakInfoNamesTheApplication() {
        let info = "[Application]\nname=org.example.Game\nruntime=runtime/org.freedesktop.Platform\n\n[Instance]\nname=other\n"
        #expect(FlatpakInfo.applicationName(in: info) == "org.example.Game")
        #expect(FlatpakInfo.applicationName(in: "[Instance]\nname=x\n") == nil)
        #expect(FlatpakInfo.applicationName(in: "[Application]\nname = org.a.B \n") == "org.a.B")
        #expect(FlatpakInfo.applicationName(in: "[Application]\nname=bad\u{1b}[31m\n") == nil, "control characters")
        #expect(FlatpakInfo.applicationName(in: "[Application]\nnames=x\n") == nil)
    }

    /// What `/proc/PID/cgroup` says of a Flatpak app's process (the scope `flatpak run` asks
    /// systemd for, under the user's manager), on a cgroup v2 system and on a hybrid one.
    @Test func theAppsSystemdScopeNamesTheApplication() {
        let scope = "user.slice/user-1000.slice/user@1000.service/app.slice"
        #expect(FlatpakInfo.applicationName(inCgroup: "0::/\(scope)/app-flatpak-org.gnome.Calculator-4242.scope\n") == "org.gnome.Calculator")
        let hybrid = "12:pids:/user.slice\n1:name=systemd:/\(scope)/app-flatpak-com.valvesoftware.Steam-77.scope\n0::/\n"
        #expect(FlatpakInfo.applicationName(inCgroup: hybrid) == "com.valvesoftware.Steam")
        #expect(FlatpakInfo.applicationName(inCgroup: "0::/\(scope)/app-flatpak-org.example.my\\x2dgame-9.scope\n") == "org.example.my-game",
                "the unit name's escaped dash")
        #expect(FlatpakInfo.applicationName(inCgroup: "0::/\(scope)/app-gnome-firefox-1234.scope\n") == nil, "a desktop's launch scope is no sandbox")
        #expect(FlatpakInfo.applicationName(inCgroup: "0::/\(scope)/app-flatpak-org.a.B-12.scope/sub\n") == nil, "a cgroup below the scope is not named by it")
        #expect(FlatpakInfo.applicationName(inCgroup: "0::/\(scope)/app-flatpak-org.a.B.scope\n") == nil, "no pid after the id")
        #expect(FlatpakInfo.applicationName(inCgroup: "0::/\(scope)/app-flatpak-org.a\\x1b[31m-12.scope\n") == nil, "control characters")
        #expect(FlatpakInfo.applicationName(inCgroup: "0::/\(scope)/app-flatpak-org.a\\xZZ-12.scope\n") == nil, "a broken escape")
        #expect(FlatpakInfo.applicationName(inCgroup: "0::/system.slice/vsyncd.service\n") == nil)
    }

    /// A bubblewrap sandbox's mountinfo as the kernel printed it here (tmpfs root, the info file
    /// bound from ext4), then the same with the file on FUSE, and a root on FUSE.
    static let sandboxMounts = """
        66 43 0:39 /newroot / rw,nosuid,nodev,relatime - tmpfs tmpfs rw
        67 66 254:0 /usr /usr ro,nosuid,nodev,relatime - ext4 /dev/vda rw,discard
        68 66 0:40 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
        78 71 0:42 / /dev/pts rw,nosuid,noexec,relatime shared:5 - devpts devpts rw,mode=620,ptmxmode=666
        79 66 254:0 /tmp/seat-fi /.flatpak-info ro,nosuid,nodev,relatime - ext4 /dev/vda rw,discard
        """

    @Test func theInfoFileIsReadOnlyWhereTheKernelServesIt() {
        #expect(FlatpakInfo.isSafeToRead(mountinfo: Self.sandboxMounts))
        let fuseFile = Self.sandboxMounts + "\n80 66 0:50 / /.flatpak-info ro,relatime - fuse.slowfs slowfs rw\n"
        #expect(!FlatpakInfo.isSafeToRead(mountinfo: fuseFile), "the topmost mount on the file is FUSE")
        let fuseRoot = "70 1 0:50 / / rw,relatime shared:1 - fuse.slowfs slowfs rw\n"
        #expect(!FlatpakInfo.isSafeToRead(mountinfo: fuseRoot), "a FUSE root: the lookup itself could stall")
        #expect(!FlatpakInfo.isSafeToRead(mountinfo: ""), "no root listed")
        #expect(FlatpakInfo.isSafeToRead(mountinfo: "27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"), "a host process")
    }
}
