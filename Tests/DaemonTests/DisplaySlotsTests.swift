import Testing
import VsyncCore
@testable import VsyncDaemon

/// A vblank's token finds its display by slot; a reused slot must not take a stale token.
struct DisplaySlotsTests {
    static func display(_ id: UInt32) -> Display {
        Display(id: id, source: SourceDisplay(
            key: DisplayKey(device: "/dev/dri/card0", crtcID: 40 + id), connectorID: 1, connectorName: "Virtual-\(id)",
            deviceName: "card0", isActive: true, refresh: RefreshRate(hertz: 60), width: 1024, height: 768))
    }

    @Test func tokensFindTheirDisplayAndAReusedSlotRefusesTheOldToken() {
        var slots = DisplaySlots()
        let a = Self.display(1), b = Self.display(2)
        slots.update([a, b])
        #expect(slots[a.token] === a && slots[b.token] === b)
        #expect(a.token != b.token)
        let oldToken = a.token
        slots.update([b])
        #expect(slots[oldToken] == nil, "a display gone takes no more events")
        #expect(!slots.contains(a))
        let c = Self.display(3)
        slots.update([b, c])
        #expect(c.token & 0xFFFF == oldToken & 0xFFFF, "the freed slot is reused")
        #expect(slots[oldToken] == nil, "but the old display's token is not the new one's")
        #expect(slots[c.token] === c && slots[b.token] === b)
        #expect(slots[DisplaySlots.noToken] == nil && slots[0xFFFF_0009] == nil)
    }
}
