import ArgumentParser
import Glibc
import VsyncClientCore
import VsyncCore

/// `vsync-probe page`: a page-only client (protocol 5). It subscribes with `pageOnly`, so vsyncd
/// sends it no tick and keeps the display's record on the timing page current, and reads the
/// record from shared memory at its own rate, as an app with its own software vsync timer does.
struct PageCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "page",
        abstract: "Read a display's timing page through vsyncd, without ticks, and print each read.",
        discussion: """
            Each read prints the next vblank the page predicts, the period, whether the record \
            is lit and current, and how old its last real vblank is. Runs until --reads reads or \
            Ctrl-C, then prints a summary. Exits 1 when no vsyncd answers or it has no page.
            """
    )

    @Option(help: "vsyncd socket (default: $VSYNCD_SOCKET, else /run/vsyncd/vsyncd.sock).")
    var socket: String?

    @Option(help: "Display: the selectors of `follow --display`.")
    var display: String = "primary"

    @Option(help: "Read the page every this many ms (default 100).")
    var interval: Double = 100

    @Option(help: "Stop after this many reads (default: run until Ctrl-C).")
    var reads: Int?

    @Flag(help: "One JSON object per read (and per display change, with \"event\"), then one with \"summary\": true.")
    var json = false

    @Option(help: "Exit 1 if the page had no record of the display within this many seconds (default: wait).")
    var timeout: Double?

    func validate() throws {
        if !(interval >= 1 && interval <= 60_000) { throw ValidationError("--interval must be 1 to 60000 ms") }
        if let reads, reads < 1 { throw ValidationError("--reads must be at least 1") }
        if let timeout, !(timeout > 0) { throw ValidationError("--timeout must be above 0 seconds") }
        _ = try FollowCommand.parseSelector(display)
    }

    func run() throws {
        let selector = try FollowCommand.parseSelector(display)
        let client: VsyncClient
        do {
            let path = VsyncClient.resolvedSocketPath(socket)
            client = try VsyncClient(VsyncClient.Configuration(socketPath: path, clientName: "vsync-probe"))
        } catch {
            throw Failure.exit(error.description)
        }
        var reader = PageReader(json: json, limit: reads)
        Interrupt.install()
        _ = client.subscribe(selector, range: .default, flags: .pageOnly)
        let intervalNs = UInt64(interval * 1e6)
        let start = VBlankRecorder.now(CLOCK_MONOTONIC)
        var nextRead = start
        while !reader.isDone && !Interrupt.received {
            let now = VBlankRecorder.now(CLOCK_MONOTONIC)
            if now >= nextRead {
                reader.read(client, nowNs: now)
                // On the interval's grid; a late read does not make up the ones it missed.
                nextRead &+= intervalNs
                if nextRead <= now { nextRead = now &+ intervalNs }
                if let timeout, reader.reads == 0, now &- start >= UInt64(timeout * 1e9) {
                    throw Failure.exit(
                        "the timing page had no record of \(display) within \(timeout) s: check `vsync-probe list` and the display's cable and mode"
                    )
                }
                continue
            }
            client.dispatch(timeoutMs: Int32(min((nextRead - now + 999_999) / 1_000_000, 60_000)))
            while let event = client.nextEvent() { reader.handle(event) }
        }
        if let fatal = reader.fatal { throw Failure.exit(fatal) }
        reader.printSummary(display: display)
    }
}
