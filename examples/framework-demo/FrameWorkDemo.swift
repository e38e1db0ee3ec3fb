import ArgumentParser
import Dispatch
import DisplayLink
import Foundation
import Synchronization

/// Frame work against a real vsyncd: rotating stars rasterized on the CPU, one tile per key,
/// committed on the main actor at the link's rate, while some draws take a frame and a half.
///
///     vsyncd --source timer:60 --socket /tmp/v.sock &
///     swift run framework-demo --socket /tmp/v.sock
@main
struct FrameWorkDemo: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "framework-demo",
        abstract: "Rasterize stars off the link's queue with DisplayLink's FrameWork and print what was committed.")

    @Option(help: "The vsyncd socket (default: $VSYNCD_SOCKET, else /run/vsyncd/vsyncd.sock).")
    var socket: String?
    @Option(help: "How long to run, in seconds.")
    var seconds: Double = 5
    @Option(help: "Tiles (keys) redrawn every frame.")
    var tiles: Int = 4
    @Option(help: "Tile size in pixels.")
    var size: Int = 160
    @Option(help: "Write the last committed screen here as a PGM image.")
    var pgm: String?

    mutating func validate() throws {
        guard seconds > 0, (1...16).contains(tiles), (16...1024).contains(size) else {
            throw ValidationError("use --seconds > 0, --tiles 1…16 and --size 16…1024")
        }
    }

    func run() throws {
        let raster = StarRaster(size: size, points: 7)
        // Calibrate: the cost of one subsample on this machine, so a draw can be asked to take
        // a given fraction of a frame.
        let started = DisplayLink.currentTimeNanoseconds()
        _ = raster.render(angle: 0, samples: 8, cancelled: { false })
        let nsPerSample = Double(DisplayLink.currentTimeNanoseconds() - started) / Double(size * size * 64)
        let (socket, tiles, seconds, pgm) = (self.socket, self.tiles, self.seconds, self.pgm)
        // ArgumentParser calls run() on the main thread: the presenter is main-actor code, its
        // link and monitor are on the main run loop.
        try MainActor.assumeIsolated {
            let presenter = Presenter(raster: raster, tiles: tiles, nsPerSample: nsPerSample, socket: socket)
            print(String(format: "framework-demo: %d tiles of %d px, %.1f ns a subsample, pool threads: %d",
                         tiles, raster.size, nsPerSample, FrameWorkPool.shared.threadCount))
            RunLoop.main.run(until: Date(timeIntervalSinceNow: seconds))
            presenter.stop()
            try presenter.report(pgm: pgm)
        }
    }
}

/// The app's side, on the main actor: the link's handler draws nothing itself; it commits the
/// tiles drawn for this frame and requests the next ones.
@MainActor final class Presenter {
    let raster: StarRaster
    let tiles: Int
    let nsPerSample: Double
    let screen: Screen
    let work = FrameWork<Int, [UInt8]>()
    private var link: DisplayLink?
    private let monitor: FrameMonitor

    init(raster: StarRaster, tiles: Int, nsPerSample: Double, socket: String?) {
        self.raster = raster
        self.tiles = tiles
        self.nsPerSample = nsPerSample
        screen = Screen(tiles: tiles, size: raster.size)
        monitor = FrameMonitor(socketPath: socket, frameWork: work) { r in
            let w = r.frameWork
            print(String(format: "fps %5.1f  dropped %2d  hitches %d  |  work: committed %3d  late %3d  superseded %3d  coalesced %d",
                         r.framesPerSecond, r.droppedFrames, r.hitches, w.committed, w.late, w.superseded, w.coalesced))
        }
        monitor.add(to: .main, forMode: .common)
        link = DisplayLink(target: self, socketPath: socket) { presenter, link in presenter.step(link) }
        link?.errorHandler = { error in print("vsync: \(error)") }
        link?.add(to: .main, forMode: .common)
    }

    func step(_ link: DisplayLink) {
        guard let frame = link.currentFrame else { return }
        screen.frame(frame.targetSequence)
        let frameNs = Double(frame.targetTimestampNanoseconds &- frame.timestampNanoseconds)
        let raster = raster
        work.advance(link) { done in
            screen.commit(done.key, done.output, for: done.targetSequence)
        } requesting: {
            for tile in 0..<tiles {
                // Mostly a quarter of a frame; every 11th frame one tile takes a frame and a half.
                let cost = (frame.sequence + UInt64(tile) * 3) % 11 == 0 ? 1.5 : 0.15 + 0.1 * Double(tile % 3)
                let samples = max(1, min(48, Int((cost * frameNs / nsPerSample / Double(raster.size * raster.size)).squareRoot())))
                let angle = Double(frame.targetSequence) * 0.02 * Double(tile + 1)
                work.request(tile) { run in
                    guard let image = raster.render(angle: angle, samples: samples, cancelled: { run.isCancelled }) else {
                        throw CancellationError()
                    }
                    return image
                }
            }
        }
    }

    func stop() {
        link?.invalidate()
        monitor.invalidate()
    }

    func report(pgm: String?) throws {
        let c = work.counts
        let summary = screen.summary()
        print("frames \(summary.frames), frames that committed \(summary.framesWithCommits), commits per frame p50 \(summary.p50), "
            + "longest gap between a tile's commits \(summary.longestGap) frames")
        print("requested \(c.requested) = committed \(c.committed) + cancelled \(c.cancelled) (superseded \(c.superseded), late \(c.late), "
            + "failed \(c.failed), abandoned \(c.abandoned)) + coalesced \(c.coalesced) + outstanding \(c.outstanding)")
        if let pgm { try screen.writePGM(to: pgm) }
    }
}

/// What was committed: the tiles' images and, per frame, how many landed. The presenter's,
/// on the main actor.
@MainActor final class Screen {
    let tiles: Int
    let size: Int
    private var images: [[UInt8]]
    private var commitsByFrame: [UInt64: Int] = [:]
    private var lastCommit: [Int: UInt64] = [:]
    private var longestGap: UInt64 = 0
    private var frames: [UInt64] = []

    init(tiles: Int, size: Int) {
        self.tiles = tiles
        self.size = size
        images = Array(repeating: [UInt8](repeating: 0, count: size * size), count: tiles)
    }

    func frame(_ target: UInt64) { frames.append(target) }

    func commit(_ tile: Int, _ image: [UInt8], for target: UInt64) {
        images[tile] = image
        commitsByFrame[target, default: 0] += 1
        if let last = lastCommit[tile] { longestGap = max(longestGap, target - last) }
        lastCommit[tile] = target
    }

    func summary() -> (frames: Int, framesWithCommits: Int, p50: Int, longestGap: UInt64) {
        let perFrame = frames.map { commitsByFrame[$0] ?? 0 }.sorted()
        return (frames.count, perFrame.filter { $0 > 0 }.count, perFrame.isEmpty ? 0 : perFrame[perFrame.count / 2], longestGap)
    }

    func writePGM(to path: String) throws {
        var data = Data("P5\n\(size * tiles) \(size)\n255\n".utf8)
        for y in 0..<size { for t in 0..<tiles { data.append(contentsOf: images[t][(y * size)..<((y + 1) * size)]) } }
        try data.write(to: URL(fileURLWithPath: path))
    }
}
