// vsync-bench-client: one client process of vsync-bench. Not meant to be run by hand.
//
//   vsync-bench-client --index I --mode tick|direct|raw|connect|paused [--fps N] [--ready-fd 3] [--max-seconds S]
//
// tick:    a DisplayLink on a serial queue; each callback records its entry time minus the
//          tick's timestamp (CLOCK_MONOTONIC) into an HDR histogram while recording is on.
// direct:  the same with `link.start()`: the callback runs on DisplayLink's reader thread.
// raw:     no DisplayLink: blocking recv on its own socket, like the C reference's clients, to
//          split latency into the daemon's share and DisplayLink's.
// connect: handshakes on a raw socket and subscribes to nothing (vsync-bench --idle).
// paused:  a DisplayLink created paused (vsync-bench --idle).
//
// --work-ns W: the link subscribes with that work duration; latency is then measured from the
// instant the daemon aims the wake at (targetTimestamp − W), and lost frames from gaps in the
// target sequence.
//
// Control, so every client measures the same window as the daemon's CPU figure:
// it writes "I\n" to the ready fd once it is live (tick mode: after its first tick);
// SIGUSR1 starts recording, SIGUSR2 prints one JSON line (ClientReport) on stdout and exits.
// vsync-bench starts it under `setpriv --pdeathsig KILL` so it dies with the bench; it also
// exits by itself after --max-seconds.
import Dispatch
import DisplayLink
import Glibc
import VsyncCore

let options = ClientOptions.parse(CommandLine.arguments)

let queue = DispatchQueue(label: "vsync-bench-client")
let recorder = Recorder(index: options.index)

// Keep the signal sources and the link alive for the life of the process.
var keepAlive: [Any] = []

for (signo, action) in [
    (SIGUSR1, { recorder.startRecording(window: options.windowFile.flatMap(Recorder.readWindow)) }),
    (SIGUSR2, { recorder.finish(exitCode: 0) }),
] {
    signal(signo, SIG_IGN)
    let source = DispatchSource.makeSignalSource(signal: signo, queue: queue)
    source.setEventHandler(handler: action)
    source.resume()
    keepAlive.append(source)
}
queue.asyncAfter(deadline: .now() + .seconds(options.maxSeconds)) {
    recorder.note("gave up after \(options.maxSeconds) s without SIGUSR2")
    recorder.finish(exitCode: 3)
}

switch options.mode {
case .tick, .direct, .paused:
    let link = DisplayLink(display: .primary) { link in
        let entry = DisplayLink.currentTimeNanoseconds()
        // The whole frame under one lock, as a frame-pacing app would read it.
        guard let frame = link.currentFrame else { return }
        let paced = options.workNs > 0
        recorder.record(
            entryNs: entry, timestampNs: paced ? frame.targetTimestampNanoseconds &- options.workNs : frame.timestampNanoseconds,
            sequence: paced ? frame.targetSequence : frame.sequence,
            skipped: frame.skipped,
            intervalNs: paced ? frame.durationNanoseconds : frame.targetTimestampNanoseconds &- frame.timestampNanoseconds,
            durationNs: frame.durationNanoseconds,
            readNs: paced ? nil : frame.receivedNanoseconds)
    }
    link.errorHandler = { error in recorder.note("\(error)") }
    link.preferredFramesPerSecond = options.fps
    try link.setWorkDuration(.nanoseconds(Int64(options.workNs)))  // validated as 0…1000 ms by the options
    if options.mode == .paused {
        link.isPaused = true
        link.start(on: queue)
        ReadyPipe.announce(options)
    } else {
        // Before starting: a first tick that came before this was set would never be announced.
        recorder.onFirstTick = { ReadyPipe.announce(options) }
        if options.mode == .direct { link.start() } else { link.start(on: queue) }
    }
    keepAlive.append(link)
case .raw:
    switch RawConnection.handshake(socketPath: options.socketPath) {
    case .success(let fd):
        RawConnection.receiveTicks(fd: fd, fps: options.fps, workNs: options.workNs, recorder: recorder) { ReadyPipe.announce(options) }
    case .failure(let message):
        recorder.note(message)
        recorder.finish(exitCode: 2)
    }
case .connect:
    queue.async {
        switch RawConnection.handshake(socketPath: options.socketPath) {
        case .success:
            // The fd stays open (and the connection idle) until the process exits.
            ReadyPipe.announce(options)
        case .failure(let message):
            recorder.note(message)
            recorder.finish(exitCode: 2)
        }
    }
}
dispatchMain()
