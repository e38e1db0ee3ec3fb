import Foundation
import CLinux
import Glibc
import Testing
import VsyncCore

/// PROTOCOL.md § 4's one rule for a SUBSCRIBE's selector, through the real vsyncd on the timer
/// source with a raw socket client: malformed (the wire broken: ERROR, disconnect), outside the
/// grammar (ERROR unknownDisplay, connection kept), or a selector (SUBSCRIBED, waiting, or
/// unknownDisplay). Every selector a refusal suggests is sent back and must resolve.
extension VsyncdTests {
    @Suite("vsyncd selector rule") struct SelectorRule {
        /// A SUBSCRIBE with any kind and fields, as an outsider's client might write it.
        static func subscribe(kind: UInt8, id: UInt32, selectorID: UInt32 = 0, name: [UInt8] = [], text: [UInt8] = [],
                              size: Int? = nil) -> [UInt8] {
            var bytes = ClientMessage.subscribe(Subscribe(subscriptionID: id, selector: .primary, range: .default)).encoded()
            bytes[16] = kind
            withUnsafeBytes(of: selectorID.littleEndian) { bytes.replaceSubrange(20..<24, with: $0) }
            bytes.replaceSubrange(24..<(24 + name.count), with: name)
            if kind == 4 { bytes += text + Array(repeating: 0, count: DisplaySelector.maxTextSize - text.count) }
            let total = size ?? bytes.count
            bytes = Array(bytes.prefix(total)) + Array(repeating: 0, count: max(0, total - bytes.count))
            bytes[2] = UInt8(total & 0xFF); bytes[3] = UInt8(total >> 8)
            return bytes
        }

        static func kind4(_ id: UInt32, _ text: String) -> [UInt8] { subscribe(kind: 4, id: id, text: Array(text.utf8)) }

        /// Every selector an unknownDisplay text suggests: the candidates and "as in" of an
        /// ambiguous selector, the "displays: …" list of one that matches nothing or is outside
        /// the grammar.
        static func suggestions(in text: String) -> [String] {
            func groups(_ pattern: String) -> [String] {
                let re = try! NSRegularExpression(pattern: pattern)
                guard let m = re.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) else { return [] }
                return (1..<m.numberOfRanges).compactMap { Range(m.range(at: $0), in: text).map { String(text[$0]) } }
            }
            let ambiguous = groups(#"matches \d+ displays \((.*)\): name one, as in (\S+)$"#)
            let listed = groups(#"displays: (.*?)(?: and \d+ more)? \(vsync-probe list\)$"#)
            let all = (ambiguous.first.map { $0.components(separatedBy: ", ") } ?? []) + ambiguous.dropFirst()
                + (listed.first.map { $0.components(separatedBy: ", ") } ?? [])
            return all.filter { $0 != "none" }
        }

        /// Sends each suggestion back, in the kind its form has, and returns the display each
        /// resolved to; records an issue for any that does not resolve to exactly one display.
        @discardableResult
        static func sendBack(_ suggested: [String], _ client: RawClient, version: UInt16, nextID: inout UInt32) -> [String: DisplayInfo] {
            var resolved: [String: DisplayInfo] = [:]
            for text in suggested {
                guard let selector = try? DisplaySelector.parse(text) else { Issue.record("'\(text)' was suggested but does not parse"); continue }
                if version < 3 && selector.kind == 4 { Issue.record("'\(text)' was suggested to a version \(version) client, which cannot send it"); continue }
                let id = nextID
                nextID += 1
                client.send(.subscribe(Subscribe(subscriptionID: id, selector: selector, range: .default, flags: .startPaused)))
                switch client.receive() {
                case .message(.subscribed(let s)) where s.subscriptionID == id && s.displayID != 0:
                    resolved[text] = s.display
                    client.send(.unsubscribe(subscriptionID: id))
                case let other:
                    Issue.record("suggested '\(text)' does not resolve when sent back: \(other)")
                }
            }
            return resolved
        }

        /// The next message must be ERROR unknownDisplay for `id`; its suggestions must resolve.
        static func expectRefused(_ client: RawClient, id: UInt32, _ what: String, version: UInt16, nextID: inout UInt32) {
            guard case .message(.error(let e)) = client.receive() else { Issue.record("\(what): no ERROR"); return }
            #expect(e.code == .unknownDisplay && e.subscriptionID == id, "\(what): \(e)")
            #expect(!e.message.contains("\n") && e.message.utf8.count <= WireProtocol.maxTextSize, "\(what): \(e.message)")
            let suggested = suggestions(in: e.message)
            #expect(!suggested.isEmpty, "\(what): the refusal names no display: \(e.message)")
            sendBack(suggested, client, version: version, nextID: &nextID)
        }

        @Test func selectorsOutsideTheGrammarAreRefusedAndTheConnectionStays() throws {
            let daemon = try DaemonProcess(hertz: 60)
            for version in [UInt16(2), 4] {
                let client = try RawClient(path: daemon.socketPath)
                try client.handshake(version: version)
                var cases: [(String, [UInt8])] = [
                    ("kind 1 with CRTC id 0", Self.subscribe(kind: 1, id: 1)),
                    ("kind 3 with display id 0", Self.subscribe(kind: 3, id: 2)),
                    ("kind 2 with an empty name", Self.subscribe(kind: 2, id: 3)),
                    ("kind 2 'bogus:1'", Self.subscribe(kind: 2, id: 4, name: Array("bogus:1".utf8))),
                    ("kind 2 'timer@timer'", Self.subscribe(kind: 2, id: 5, name: Array("timer@timer".utf8))),
                ]
                if version >= 3 {
                    cases += [("'edid://'", Self.kind4(6, "edid://")), ("'crtc:0@timer'", Self.kind4(7, "crtc:0@timer")),
                              ("'bogus:1@timer'", Self.kind4(8, "bogus:1@timer")), ("'DP-1@'", Self.kind4(9, "DP-1@"))]
                }
                var nextID: UInt32 = 100
                for (what, bytes) in cases {
                    client.send(bytes)
                    Self.expectRefused(client, id: UInt32(bytes[8]), "version \(version), \(what)", version: version, nextID: &nextID)
                }
                // Still connected: nothing was created, and requests are answered.
                client.send(.listDisplays)
                guard case .message(.displayList(let list)) = client.receive() else { Issue.record("version \(version): connection lost"); continue }
                #expect(list.count == 1)
            }
        }

        /// Kind 4 is how the text travels: `timer`, `display:1` or `primary` sent as text are
        /// those selectors, the same display as kinds 0–3 name.
        @Test func kind4CarriesAnySelectorsText() throws {
            let daemon = try DaemonProcess(hertz: 60)
            let client = try RawClient(path: daemon.socketPath)
            try client.handshake(version: 3)
            let timer = try client.subscribe(1, fps: 0).displayID
            for (i, text) in ["timer", "connector:timer", "display:\(timer)", "primary", "@timer", "timer@/dev/dri/timer"].enumerated() {
                let id = UInt32(10 + i)
                client.send(Self.kind4(id, text))
                let answer = client.messages { if case .subscribed(let s) = $0 { s.subscriptionID == id } else if case .error = $0 { true } else { false } }
                guard case .subscribed(let s)? = answer.last else { Issue.record("'\(text)' as kind 4: \(answer.last.map { "\($0)" } ?? "nothing")"); continue }
                #expect(s.displayID == timer, "'\(text)' as kind 4")
            }
        }

        /// The other two outcomes: a well-formed selector that names nothing waits (or, for
        /// an id, is refused); a message that breaks the wire is malformed and ends the connection.
        @Test func wellFormedSelectorsWaitAndBrokenMessagesAreMalformed() throws {
            let daemon = try DaemonProcess(hertz: 60)
            let client = try RawClient(path: daemon.socketPath)
            try client.handshake(version: 4)
            for (id, bytes) in [(UInt32(1), Self.subscribe(kind: 2, id: 1, name: Array("DP-9".utf8))),
                                (2, Self.kind4(2, "DP-9@card7")), (3, Self.kind4(3, "edid:DEL")), (4, Self.kind4(4, "@card7"))] {
                client.send(bytes)
                guard case .message(.subscribed(let s)) = client.receive() else { Issue.record("subscription \(id) got no SUBSCRIBED"); continue }
                #expect(s.subscriptionID == id && s.displayID == 0, "subscription \(id) should wait: \(s)")
            }
            var nextID: UInt32 = 100
            client.send(Self.subscribe(kind: 1, id: 5, selectorID: 99))
            Self.expectRefused(client, id: 5, "crtc:99", version: 4, nextID: &nextID)
            client.send(Self.subscribe(kind: 3, id: 6, selectorID: 99))
            Self.expectRefused(client, id: 6, "display:99", version: 4, nextID: &nextID)
            // A kind 0–3 SUBSCRIBE of 81–207 bytes is longer than known: the tail is ignored.
            client.send(Self.subscribe(kind: 0, id: 7, size: 150))
            guard case .message(.subscribed(let s)) = client.receive() else { Issue.record("150-byte kind 0 SUBSCRIBE refused"); return }
            #expect(s.subscriptionID == 7 && s.displayID != 0)

            let malformed: [(String, UInt16, [UInt8])] = [
                ("selector kind 5", 4, Self.subscribe(kind: 5, id: 1)),
                ("kind 4 at version 2", 2, Self.kind4(1, "timer")),
                ("kind 4 of 150 bytes", 4, Self.subscribe(kind: 4, id: 1, text: Array("timer".utf8), size: 150)),
                ("kind 4 with invalid UTF-8", 4, Self.subscribe(kind: 4, id: 1, text: [0x74, 0xFF, 0x72])),
                ("kind 2 with invalid UTF-8", 4, Self.subscribe(kind: 2, id: 1, name: [0xC3, 0x28])),
                ("a bad selector with id 0", 4, Self.kind4(0, "edid://")),
            ]
            for (what, version, bytes) in malformed {
                let bad = try RawClient(path: daemon.socketPath)
                try bad.handshake(version: version)
                bad.send(bytes)
                guard case .message(.error(let e)) = bad.receive() else { Issue.record("\(what): no ERROR"); continue }
                #expect(e.code == .malformed, "\(what): \(e)")
                #expect(bad.receive() == .closed, "\(what): still connected")
            }
        }

        /// A descriptor a client attaches to a request is closed unread (PROTOCOL.md § 1): the
        /// daemon reads with recv, so the kernel drops it, and the request is answered as usual.
        @Test func descriptorsFromClientsAreClosedUnread() throws {
            let daemon = try DaemonProcess(hertz: 60)
            let client = try RawClient(path: daemon.socketPath)
            try client.handshake(version: 5)
            _ = client.messages(timeout: 2) { if case .timingPage = $0 { true } else { false } }
            var ends: [Int32] = [0, 0]
            try #require(pipe(&ends) == 0)
            defer { close(ends[0]) }
            let list = ClientMessage.listDisplays.encoded()
            let sent = list.withUnsafeBytes { vsyncd_send_with_fd(client.fd, $0.baseAddress, $0.count, ends[1]) }
            #expect(sent == list.count)
            guard case .message(.displayList) = client.receive() else { Issue.record("LIST_DISPLAYS with a descriptor got no DISPLAY_LIST"); return }
            // The daemon handled the request, so it has read the datagram: its copy of the write
            // end is gone, and closing ours leaves none: the read end reports a hang-up at once.
            close(ends[1])
            var pfd = pollfd(fd: ends[0], events: Int16(POLLIN), revents: 0)
            #expect(poll(&pfd, 1, 0) == 1 && pfd.revents & Int16(POLLHUP) != 0, "the daemon holds the descriptor")
        }
    }
}
