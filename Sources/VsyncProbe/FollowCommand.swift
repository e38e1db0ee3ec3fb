import ArgumentParser
import Glibc
import Synchronization
import VsyncClientCore
import VsyncCore

/// `vsync-probe follow`: a client on the same core as DisplayLink and libvsync (one socket,
/// dispatch on this thread) that prints every tick vsyncd sends it.
struct FollowCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "follow",
        abstract: "Follow a display's ticks through vsyncd as a client and print each one.",
        discussion: """
            Runs until --frames ticks or Ctrl-C, then prints a summary: achieved rate, ticks, \
            skipped frames and tick latency (when the library read the tick minus its vblank \
            timestamp). Exits 1 when no vsyncd answers.
            """
    )

    @Option(help: "vsyncd socket (default: $VSYNCD_SOCKET, else /run/vsyncd/vsyncd.sock).")
    var socket: String?

    @Option(
        help:
            "Display: 'primary', a connector name (DP-1, HDMI-A-1, timer), crtc:ID, display:ID, edid:MAKE/MODEL/SERIAL, or any of these but display:ID followed by @CARD (card1, or its bus path pci-0000:03:00.0)."
    )
    var display: String = "primary"

    @Option(help: "Preferred frames per second; 0 means the display's maximum.")
    var fps: Int?

    @Option(help: "Frame rate range MIN:MAX:PREF, like CAFrameRateRange (MAX 0: no upper bound).")
    var range: String?

    @Option(help: "Stop after this many ticks (default: run until Ctrl-C).")
    var frames: Int?

    @Flag(help: "One JSON object per tick (and per display change, with \"event\"), then one with \"summary\": true.")
    var json = false

    @Option(help: "Be woken this many ms before each target vblank (frame pacing), not just after each vblank.")
    var workDuration: Double?

    @Flag(help: "While the display is off, keep receiving predicted ticks at the last mode's rate.")
    var predictWhileOff = false

    @Option(
        help:
            "Also write the frames as a Perfetto trace (protobuf: FrameTimeline's expected and actual timelines, each late frame's reason, the vblanks) here, for ui.perfetto.dev."
    )
    var traceOut: String?

    @Option(help: "Exit 1 if no tick came within this many seconds (default: wait, also for a display that is not there yet).")
    var timeout: Double?

    func validate() throws {
        if fps != nil && range != nil { throw ValidationError("give --fps or --range, not both") }
        if let fps, fps < 0 { throw ValidationError("--fps must be 0 (maximum) or more") }
        if let frames, frames < 1 { throw ValidationError("--frames must be at least 1") }
        if let range { _ = try Self.parseRange(range) }
        if let workDuration, !(workDuration >= 0 && workDuration <= 1000) {
            throw ValidationError("--work-duration must be 0 to 1000 ms")
        }
        if let timeout, !(timeout > 0) { throw ValidationError("--timeout must be above 0 seconds") }
        _ = try Self.parseSelector(display)
    }

    static func parseRange(_ text: String) throws -> FrameRateRange {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false).map { Float($0) }
        guard parts.count == 3, let min = parts[0], let max = parts[1], let pref = parts[2] else {
            throw ValidationError("--range must be MIN:MAX:PREF, e.g. 20:60:30")
        }
        do {
            return try FrameRateRange(minimum: min, maximum: max, preferred: pref)
        } catch {
            throw ValidationError("--range \(text): \(error.description)")
        }
    }

    /// The selector syntax of docs/PROTOCOL.md § 4, parsed by VsyncCore as every client does.
    static func parseSelector(_ text: String) throws -> DisplaySelector {
        do throws(SelectorSyntaxError) {
            return try DisplaySelector.parse(text)
        } catch {
            throw ValidationError("--display \(error.message)")
        }
    }

    func run() throws {
        let selector = try Self.parseSelector(display)
        var rate = FrameRateRange.default
        if let range {
            rate = try Self.parseRange(range)
        } else if let fps {
            rate = FrameRateRange(preferredFramesPerSecond: fps)
        }
        let path = VsyncClient.resolvedSocketPath(socket)
        let client: VsyncClient
        do {
            client = try VsyncClient(VsyncClient.Configuration(socketPath: path, clientName: "vsync-probe"))
        } catch {
            throw Failure.exit(error.description)
        }
        let workNs = UInt64(((workDuration ?? 0) * 1e6).rounded())
        var follower = Follower(json: json, limit: frames, workDurationNs: workNs)
        if let traceOut { follower.trace = try FollowTrace(path: traceOut, display: display) }
        defer { follower.trace?.close() }
        Interrupt.install()
        _ = client.subscribe(selector, range: rate, flags: predictWhileOff ? .predictWhileOff : [], workDurationNs: workNs)
        let deadline = timeout.map { VBlankRecorder.now(CLOCK_MONOTONIC) &+ UInt64($0 * 1e9) }
        // Ctrl-C ends the run with a summary, like --frames; the signal ends the wait in dispatch.
        while !follower.isDone && !Interrupt.received {
            var waitMs: Int32 = -1
            if let deadline, follower.ticks == 0 {
                let now = VBlankRecorder.now(CLOCK_MONOTONIC)
                guard now < deadline else {
                    throw Failure.exit(
                        "no tick from \(display) within \(timeout ?? 0) s: check `vsync-probe list` and the display's cable and mode")
                }
                waitMs = Int32(min((deadline - now + 999_999) / 1_000_000, 60_000))
            }
            client.dispatch(timeoutMs: waitMs)
            while let event = client.nextEvent() { follower.handle(event) }
        }
        if let fatal = follower.fatal { throw Failure.exit(fatal.description) }
        follower.printSummary(requested: range ?? fps.map(String.init) ?? "max", display: display)
    }
}

/// SIGINT, caught without SA_RESTART so that it ends a blocking read or wait at once.
///
/// The kernel gives a process-directed signal to any thread that does not block it, and the
/// follow loop runs on a thread of the concurrency pool (the root command is async), not the
/// main one: a signal taken by another thread would leave the loop's read waiting, forever
/// while the display is dark. Pool threads also block every signal (libdispatch does), so
/// the loop's thread unblocks SIGINT for itself, and the handler passes a signal taken
/// elsewhere on to it (`pthread_kill` is async-signal-safe). A second Ctrl-C exits at once:
/// it also covers one that came between the loop's check of the flag and the start of its
/// read.
enum Interrupt {
    private static let flag = Atomic<Bool>(false)
    private static let waiter = Atomic<UInt>(0)
    static var received: Bool { flag.load(ordering: .relaxed) }

    /// Installs the handler; the calling thread is the one whose waits a SIGINT must end.
    static func install() {
        waiter.store(UInt(pthread_self()), ordering: .relaxed)
        var interrupt = sigset_t()
        sigemptyset(&interrupt)
        sigaddset(&interrupt, SIGINT)
        pthread_sigmask(SIG_UNBLOCK, &interrupt, nil)
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in Interrupt.caught() }
        sigemptyset(&action.sa_mask)
        action.sa_flags = 0
        sigaction(SIGINT, &action, nil)
    }

    private static func caught() {
        let target = waiter.load(ordering: .relaxed)
        if UInt(pthread_self()) == target {
            flag.store(true, ordering: .relaxed)
            return
        }
        if flag.exchange(true, ordering: .relaxed) { _exit(130) }
        pthread_kill(pthread_t(target), SIGINT)
    }
}
