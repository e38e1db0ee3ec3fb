import DisplayLink
import Foundation
import Glibc
import Synchronization
import Testing

/// What one callback saw.
struct LinkSample: Sendable {
    var frame: DisplayLink.Frame
    /// CLOCK_MONOTONIC ns when the handler ran.
    var calledNs: UInt64
    var mode: String?
    var duration: Double
    var maximumFramesPerSecond: Int
}

/// Collects callbacks and errors from any thread.
final class LinkRecorder: Sendable {
    let samples = Mutex<[LinkSample]>([])
    let errors = Mutex<[DisplayLinkError]>([])

    var count: Int { samples.withLock { $0.count } }
    var all: [LinkSample] { samples.withLock { $0 } }

    func record(_ link: DisplayLink) {
        guard let frame = link.currentFrame else { return }
        let sample = LinkSample(
            frame: frame, calledNs: DisplayLink.currentTimeNanoseconds(),
            mode: RunLoop.current.currentMode?.rawValue, duration: link.duration,
            maximumFramesPerSecond: link.maximumFramesPerSecond)
        samples.withLock { $0.append(sample) }
    }

    func handler() -> @Sendable (DisplayLink) -> Void { { [self] link in record(link) } }

    func errorHandler() -> @Sendable (DisplayLinkError) -> Void { { [self] error in errors.withLock { $0.append(error) } } }
}

/// Polls `condition` every 5 ms until it holds or `timeout` seconds pass.
func eventually(timeout: Double, _ condition: () -> Bool) async -> Bool {
    let end = DisplayLink.currentTime() + timeout
    while DisplayLink.currentTime() < end {
        if condition() { return true }
        try? await Task.sleep(nanoseconds: 5_000_000)
    }
    return condition()
}

func sleep(seconds: Double) async { try? await Task.sleep(nanoseconds: UInt64(seconds * 1e9)) }

/// A thread with its own run loop, for run loop mode tests. Work runs on that thread.
final class RunLoopThread: Sendable {
    private let runLoopBox = Mutex<RunLoopBox?>(nil)
    private let started = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)

    /// `@unchecked Sendable`: the run loop is only used from its own thread, or through
    /// RunLoop/CF calls that are thread-safe (adding timers).
    final class RunLoopBox: @unchecked Sendable {
        let runLoop: RunLoop
        init(_ runLoop: RunLoop) { self.runLoop = runLoop }
    }

    /// Starts a thread that calls `setup` with its run loop, then runs `schedule`: a list of
    /// (mode, seconds) phases, one after the other.
    init(setup: @escaping @Sendable (RunLoop) -> Void, schedule: [(RunLoop.Mode, Double)]) {
        let phases = schedule.map { ($0.0.rawValue, $0.1) }
        let thread = Thread { [self] in
            let runLoop = RunLoop.current
            runLoopBox.withLock { $0 = RunLoopBox(runLoop) }
            setup(runLoop)
            // Keeps every mode alive so run(mode:before:) does not return at once.
            let keepAlive = Timer(fire: .distantFuture, interval: 1e9, repeats: true) { _ in }
            for (mode, _) in phases { runLoop.add(keepAlive, forMode: RunLoop.Mode(mode)) }
            started.signal()
            for (mode, seconds) in phases {
                let end = Date(timeIntervalSinceNow: seconds)
                while Date() < end { _ = runLoop.run(mode: RunLoop.Mode(mode), before: end) }
            }
            keepAlive.invalidate()
            finished.signal()
        }
        thread.start()
        started.wait()
    }

    func waitUntilFinished() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async { [self] in
                finished.wait()
                c.resume()
            }
        }
    }
}

/// Makes `mode` one of the current thread's run loop's common modes, as UIKit does for its
/// tracking mode. Foundation on Linux has no Swift API for it, so this calls CoreFoundation's C
/// function, which libFoundation exports.
func addCommonModeToCurrentRunLoop(_ mode: RunLoop.Mode) -> Bool {
    typealias GetCurrent = @convention(c) () -> OpaquePointer?
    typealias CreateString = @convention(c) (OpaquePointer?, UnsafePointer<CChar>, UInt32) -> OpaquePointer?
    typealias AddCommonMode = @convention(c) (OpaquePointer?, OpaquePointer?) -> Void
    guard let handle = dlopen(nil, RTLD_NOW),
          let getCurrent = dlsym(handle, "CFRunLoopGetCurrent"),
          let createString = dlsym(handle, "CFStringCreateWithCString"),
          let addCommon = dlsym(handle, "CFRunLoopAddCommonMode") else { return false }
    let runLoop = unsafeBitCast(getCurrent, to: GetCurrent.self)()
    let name = unsafeBitCast(createString, to: CreateString.self)(nil, mode.rawValue, 0x0800_0100)  // UTF-8
    guard runLoop != nil, name != nil else { return false }
    unsafeBitCast(addCommon, to: AddCommonMode.self)(runLoop, name)
    return true
}

/// Counts vblanks on the daemon's own clock, independently of the library under test: a raw
/// protocol client with its own subscription. Waiting for N of them is how a test lets time
/// pass "while nothing may happen" (a paused or invalidated link): by the display's sequence,
/// not by a sleep, so a loaded machine cannot shorten the window.
///
/// `@unchecked Sendable`: one test task uses it at a time; the blocking reads run on a global
/// queue so they never hold a thread of the test runner's cooperative pool.
final class VblankWitness: @unchecked Sendable {
    private let client: RawClient

    init(socketPath: String) throws {
        client = try RawClient(path: socketPath)
        try client.handshake(name: "vblank-witness", version: 2)
        _ = try client.subscribe(1, fps: 0)
    }

    /// Returns once `count` more vblanks were ticked (the sequence of the last), nil if the
    /// daemon stopped ticking for 2 s.
    @discardableResult
    func wait(vblanks count: Int) async -> UInt64? {
        await withCheckedContinuation { (c: CheckedContinuation<UInt64?, Never>) in
            DispatchQueue.global().async { c.resume(returning: self.blockingWait(vblanks: count)) }
        }
    }

    private func blockingWait(vblanks count: Int) -> UInt64? {
        guard var last = client.nextTick()?.sequence else { return nil }
        let end = last + UInt64(count)
        while last < end {
            guard let tick = client.nextTick() else { return nil }
            last = tick.sequence
        }
        return last
    }
}

/// Waits up to `timeout` seconds for `condition`, recording an issue when it never held: for
/// waits whose failure would otherwise go unnoticed (the caller goes on with what it has).
@discardableResult
func expectEventually(_ what: @autoclosure () -> String, timeout: Double, sourceLocation: SourceLocation = #_sourceLocation,
                      _ condition: () -> Bool) async -> Bool {
    let held = await eventually(timeout: timeout, condition)
    if !held { Issue.record("timed out after \(timeout) s waiting for \(what())", sourceLocation: sourceLocation) }
    return held
}
