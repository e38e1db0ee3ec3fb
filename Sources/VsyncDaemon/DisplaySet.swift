import Glibc
import VsyncCore

/// The server's displays, in the order found (the order of their ids), and by slot
/// (`DisplaySlots`), so that a source event's token finds its display with one indexed load;
/// with what rescans keep between them.
final class DisplaySet: RandomAccessCollection {
    private var list: [Display] = []
    private var slots = DisplaySlots()
    private var nextID: UInt32 = 1
    /// Displays came, went, or changed in what the status line or the housekeeping plan reads
    /// (state, names, vblank events, subscribers while off, a rescan planned): both are redone
    /// once, at the end of the loop turn (`Server.replanIfChanged`).
    var changed = true
    var lastRescanNs: UInt64 = 0
    /// The rescan that follows a hotplug's (see `Server.hotplugged`).
    var rescanAgainAtNs: UInt64? { didSet { changed = true } }
    /// The primary display last seen, so that a change moves those who follow it.
    var lastPrimaryID: UInt32?
    /// Storage reused by `handleSource` for each read's events.
    var sourceEvents: [SourceEvent] = []
    /// CLOCK_BOOTTIME against CLOCK_MONOTONIC, read once per source read (`checkSuspend`).
    var suspendDetector = SuspendDetector()
    /// Reads CLOCK_MONOTONIC and CLOCK_BOOTTIME for `suspendDetector`; a test gives its own.
    var suspendClocks: @Sendable () -> (monotonicNs: UInt64, boottimeNs: UInt64) = DisplaySet.readSuspendClocks

    var startIndex: Int { 0 }
    var endIndex: Int { list.count }
    subscript(i: Int) -> Display { list[i] }
    /// The array's own iterator: a loop over the displays costs what a loop over an array does.
    func makeIterator() -> IndexingIterator<[Display]> { list.makeIterator() }

    /// The display a source event's token names, if it is still listed.
    @inline(__always)
    subscript(token token: UInt32) -> Display? { slots[token] }

    /// Still listed: a call that may have removed it (a re-read, a failure) has not.
    @inline(__always)
    func isListed(_ d: Display) -> Bool { slots.contains(d) }

    /// Lists a display the source found, with the next id.
    func add(_ source: SourceDisplay, sampling: VBlankSampling.Mode = .continuous) -> Display {
        let d = Display(id: nextID, source: source, sampling: sampling)
        nextID += 1
        list.append(d)
        slots.update(list)
        changed = true
        return d
    }

    func remove(_ d: Display) {
        list.removeAll { $0 === d }
        slots.update(list)
        changed = true
    }

    @Sendable static func readSuspendClocks() -> (monotonicNs: UInt64, boottimeNs: UInt64) {
        (clockNow(CLOCK_MONOTONIC), clockNow(CLOCK_BOOTTIME))
    }
}
