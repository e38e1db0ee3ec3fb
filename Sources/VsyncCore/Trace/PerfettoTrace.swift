// Field numbers and enum values from Perfetto's published .proto definitions at revision
// ec5d16b14b743ba6063d720956d6d6af6610fd72 (github.com/google/perfetto, 2026-08-22):
// protos/perfetto/trace/trace.proto, trace_packet.proto, clock_snapshot.proto,
// protos/perfetto/common/builtin_clock.proto, protos/perfetto/trace/track_event/*.proto and
// protos/third_party/android/frameworks/native/tracing/frameworks_native_trace_packet.proto
// (FrameTimelineEvent, TracePacket extension 76). Tests/Perfetto/protos vendors the parts used.

/// A Perfetto trace (protobuf), written as it goes: ui.perfetto.dev and trace_processor open it.
///
/// A trace file is a `Trace` message, `repeated TracePacket packet = 1`: a concatenation of
/// packets, each as field 1. So the writer appends packets to its buffer and ``take()`` hands
/// over what has accumulated, to be appended to the file; the file is valid after every take.
///
/// Every packet is on one writer sequence (`trusted_packet_sequence_id`) and stamped on
/// CLOCK_MONOTONIC (`timestamp_clock_id` 3 in each packet rather than the sequence's
/// `TracePacketDefaults`, which older trace processors apply only with incremental state). The
/// first packet is a clock snapshot naming CLOCK_MONOTONIC the trace's clock
/// (`primary_trace_clock`), so no timestamp needs converting and the UI shows the times
/// vsync-probe prints; CLOCK_BOOTTIME and CLOCK_REALTIME readings, when given, let the trace
/// line up with a system trace (BOOTTIME) and with wall time. Nothing is interned: names are
/// short and a trace needs no incremental state, so a reader may start anywhere after a take.
public struct PerfettoTrace: Sendable {
    /// A track a descriptor packet declared: its `uuid`.
    public struct Track: Sendable, Hashable {
        public let uuid: UInt64
    }

    /// One clock's reading at the same moment as the others in a snapshot.
    public struct ClockReadings: Sendable, Equatable {
        public var monotonicNs: UInt64
        public var boottimeNs: UInt64?
        public var realtimeNs: UInt64?
        public init(monotonicNs: UInt64, boottimeNs: UInt64? = nil, realtimeNs: UInt64? = nil) {
            self.monotonicNs = monotonicNs
            self.boottimeNs = boottimeNs
            self.realtimeNs = realtimeNs
        }
    }

    /// A value shown with an event in the UI's details (a `DebugAnnotation`).
    public enum Argument: Sendable, Equatable {
        case uint(String, UInt64)
        case int(String, Int64)
        case bool(String, Bool)
        case string(String, String)
        case double(String, Double)
    }

    /// BuiltinClock values (builtin_clock.proto).
    enum Clock {
        static let realtime: UInt32 = 1
        static let monotonic: UInt32 = 3
        static let boottime: UInt32 = 6
    }

    /// TracePacket fields (trace_packet.proto).
    enum Packet {
        static let clockSnapshot: UInt32 = 6
        static let timestamp: UInt32 = 8
        static let trustedPacketSequenceID: UInt32 = 10
        static let trackEvent: UInt32 = 11
        static let sequenceFlags: UInt32 = 13
        static let timestampClockID: UInt32 = 58
        static let trackDescriptor: UInt32 = 60
        static let frameTimelineEvent: UInt32 = 76
        static let firstPacketOnSequence: UInt32 = 87
        /// `SEQ_INCREMENTAL_STATE_CLEARED`: the sequence starts here.
        static let incrementalStateCleared: UInt32 = 1
    }

    /// TrackEvent.Type (track_event.proto).
    enum EventType {
        static let sliceBegin: Int32 = 1
        static let sliceEnd: Int32 = 2
        static let instant: Int32 = 3
    }

    private var out: ProtobufWriter
    /// The writer sequence every packet is on; a trace merged with others needs it unique.
    public let sequenceID: UInt32
    private let uuidSalt: UInt64
    private var tracks: UInt64 = 0
    var cookies: Int64 = 0

    /// Starts a trace with its clock snapshot.
    ///
    /// - Parameters:
    ///   - clocks: the clocks read at one moment (CLOCK_MONOTONIC at least), before any event.
    ///   - sequenceID: the packets' writer sequence (nonzero).
    ///   - uuidSalt: mixed into every track's uuid; the process id keeps two processes' traces
    ///     from sharing uuids when they are opened together.
    public init(clocks: ClockReadings, sequenceID: UInt32 = 1, uuidSalt: UInt64 = 0) {
        out = ProtobufWriter(capacity: 4096)
        self.sequenceID = max(sequenceID, 1)
        self.uuidSalt = uuidSalt
        packet(at: nil, first: true) { p in
            p.message(Packet.clockSnapshot) { s in
                Self.clock(&s, Clock.monotonic, clocks.monotonicNs)
                if let boot = clocks.boottimeNs { Self.clock(&s, Clock.boottime, boot) }
                if let real = clocks.realtimeNs { Self.clock(&s, Clock.realtime, real) }
                s.uint32(2, Clock.monotonic)  // primary_trace_clock
            }
        }
    }

    /// The bytes of the packets written since the last take: append them to the trace file.
    public mutating func take() -> [UInt8] { out.take() }

    /// The bytes not yet taken.
    public var pendingBytes: [UInt8] { out.bytes }

    // MARK: Tracks

    /// A process's track: the UI's group for it, where its frame timelines and child tracks go.
    public mutating func process(pid: Int32, name: String) -> Track {
        let track = newTrack()
        descriptor(track) { d in
            d.message(3) { p in  // process: ProcessDescriptor
                p.int32(1, pid)  // pid
                p.string(6, name)  // process_name
            }
        }
        return track
    }

    /// A thread's track, in its process's group (by `pid`).
    public mutating func thread(pid: Int32, tid: Int64, name: String) -> Track {
        let track = newTrack()
        descriptor(track) { d in
            d.message(4) { t in  // thread: ThreadDescriptor
                t.int32(1, pid)  // pid
                t.int64(2, tid)  // tid
                t.string(5, name)  // thread_name
            }
        }
        return track
    }

    /// A named track for instants and slices, under `parent` (a process's group) or on its own.
    public mutating func track(named name: String, parent: Track? = nil) -> Track {
        let track = newTrack()
        descriptor(track) { d in
            if let parent { d.uint64(5, parent.uuid) }  // parent_uuid
            d.string(2, name)  // name
        }
        return track
    }

    // MARK: Events

    /// A display's vblank: an instant named `vblank` (or `vblank (predicted)` when the model
    /// made the timestamp, the display being off) with its sequence.
    public mutating func vblank(on track: Track, timestampNs: UInt64, sequence: UInt64, predicted: Bool = false) {
        trackEvent(at: timestampNs, on: track, type: EventType.instant, name: predicted ? "vblank (predicted)" : "vblank") { e in
            Self.argument(&e, .uint("sequence", sequence))
        }
    }

    /// An instant event.
    public mutating func instant(on track: Track, atNs: UInt64, name: String, arguments: [Argument] = []) {
        trackEvent(at: atNs, on: track, type: EventType.instant, name: name) { e in
            for a in arguments { Self.argument(&e, a) }
        }
    }

    /// A slice from `startNs` to `endNs` (a begin and an end event), e.g. a hang on a thread's track.
    public mutating func slice(on track: Track, name: String, startNs: UInt64, endNs: UInt64, arguments: [Argument] = []) {
        begin(on: track, name: name, atNs: startNs, arguments: arguments)
        end(on: track, atNs: max(endNs, startNs))
    }

    /// A slice's begin alone, for a slice whose end is not known yet: until ``end(on:atNs:arguments:)``
    /// the UI draws it to the end of the trace ("Did not end"). Slices on one track must nest.
    public mutating func begin(on track: Track, name: String, atNs: UInt64, arguments: [Argument] = []) {
        trackEvent(at: atNs, on: track, type: EventType.sliceBegin, name: name) { e in
            for a in arguments { Self.argument(&e, a) }
        }
    }

    /// Ends the innermost open slice of `track`; the trace processor adds `arguments` to that
    /// slice's own.
    public mutating func end(on track: Track, atNs: UInt64, arguments: [Argument] = []) {
        trackEvent(at: atNs, on: track, type: EventType.sliceEnd, name: nil) { e in
            for a in arguments { Self.argument(&e, a) }
        }
    }

    // MARK: Packets

    /// One TracePacket as field 1 of `Trace`, on this writer's sequence, its timestamp (if any)
    /// on CLOCK_MONOTONIC.
    mutating func packet(at timestampNs: UInt64?, first: Bool = false, _ body: (inout ProtobufWriter) -> Void) {
        let sequence = sequenceID
        out.message(1) { p in
            if let timestampNs {
                p.uint64(Packet.timestamp, timestampNs)
                p.uint32(Packet.timestampClockID, Clock.monotonic)
            }
            p.uint32(Packet.trustedPacketSequenceID, sequence)
            if first {
                p.uint32(Packet.sequenceFlags, Packet.incrementalStateCleared)
                p.bool(Packet.firstPacketOnSequence, true)
            }
            body(&p)
        }
    }

    private mutating func trackEvent(at ns: UInt64, on track: Track, type: Int32, name: String?, _ body: (inout ProtobufWriter) -> Void) {
        packet(at: ns) { p in
            p.message(Packet.trackEvent) { e in
                e.int32(9, type)  // type
                e.uint64(11, track.uuid)  // track_uuid
                if let name { e.string(23, name) }  // name
                body(&e)
            }
        }
    }

    private mutating func descriptor(_ track: Track, _ body: (inout ProtobufWriter) -> Void) {
        packet(at: nil) { p in
            p.message(Packet.trackDescriptor) { d in
                d.uint64(1, track.uuid)  // uuid
                body(&d)
            }
        }
    }

    private mutating func newTrack() -> Track {
        tracks += 1
        return Track(uuid: Self.mix(uuidSalt &+ tracks))
    }

    /// SplitMix64's finalizer: distinct inputs give distinct uuids spread over 64 bits, so the
    /// tracks of two traces opened together (different salts) do not collide in practice.
    static func mix(_ x: UInt64) -> UInt64 {
        var z = x &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    private static func clock(_ s: inout ProtobufWriter, _ id: UInt32, _ ns: UInt64) {
        s.message(1) { c in  // clocks: Clock
            c.uint32(1, id)  // clock_id
            c.uint64(2, ns)  // timestamp
        }
    }

    private static func argument(_ e: inout ProtobufWriter, _ argument: Argument) {
        e.message(4) { a in  // debug_annotations: DebugAnnotation
            switch argument {
            case .uint(let name, let v):
                a.string(10, name)
                a.uint64(3, v)
            case .int(let name, let v):
                a.string(10, name)
                a.int64(4, v)
            case .bool(let name, let v):
                a.string(10, name)
                a.bool(2, v)
            case .string(let name, let v):
                a.string(10, name)
                a.string(6, v)
            case .double(let name, let v):
                a.string(10, name)
                a.double(5, v)
            }
        }
    }
}
