import Foundation
import Glibc
import Synchronization
import VsyncClientCore
import VsyncCore

/// The process's one connection to a vsyncd socket, shared by every ``DisplayLink`` on it: the
/// thread-free client core (``VsyncClient``, the same core libvsync runs on) plus one reader
/// thread that waits on its fd and hands each link what the core produced.
///
/// **Lock order**: a link's state lock, then this connection's core lock, never the reverse.
/// Links call in here with their own lock held (to subscribe, pause, change the rate). The reader
/// thread takes the core lock only to run the core and collect its events, and takes links'
/// locks only after releasing it. `DisplayLink` asserts the order in debug builds
/// (``isCoreLockedByCurrentThread``).
final class DisplayLinkConnection: Sendable {
    /// Inline delivery (see `State.soleQueue`) makes the reader wait while the queue runs other
    /// work, and meanwhile nothing reads the socket: past the daemon's stall timeout (2 s by
    /// default) the daemon would cut the connection. A queue that once kept the reader waiting
    /// this long is used for long work, so its links go back to `async` delivery for good.
    static let inlineWaitLimitNs: UInt64 = 250_000_000

    /// The reader thread's name, as `top -H` and `/proc/PID/task/*/comm` show it (15 bytes at most).
    static let readerThreadName = "DisplayLink"

    /// `explicit`, else `$VSYNCD_SOCKET`, else the default path.
    static func resolvedPath(_ explicit: String?) -> String { VsyncClient.resolvedSocketPath(explicit) }

    static func error(forErrno err: Int32, path: String) -> DisplayLinkError { .forErrno(err, path: path) }

    private static let connections = Mutex<[String: DisplayLinkConnection]>([:])

    /// The connection for `socketPath`, created on first use.
    static func shared(socketPath: String) -> DisplayLinkConnection {
        connections.withLock { all in
            if let existing = all[socketPath] { return existing }
            let created = DisplayLinkConnection(socketPath: socketPath)
            all[socketPath] = created
            return created
        }
    }

    /// A link's delivery needs, as the reader thread sees them.
    private struct Registration {
        let link: DisplayLink
        /// Set while a queue is the link's only context (see `DisplayLink.State.inlineQueue`).
        var inlineQueue: DispatchQueue?
    }

    /// The core is not thread-safe: it is only ever used under the connection's lock, which is
    /// what makes this `@unchecked Sendable` sound.
    private struct Core: @unchecked Sendable {
        let client: VsyncClient
    }

    private struct State {
        /// Nil only if the core could not make its fds (`coreError` says why).
        var core: Core?
        var client: VsyncClient? { core?.client }
        var coreError: DisplayLinkError?
        var links: [UInt32: Registration] = [:]
        var threadStarted = false
        /// The queue every link is delivered on, when they all share one that may run inline:
        /// the reader thread then reads the socket inside `sync` on it, so a tick wakes one
        /// thread instead of two. With links on several contexts, nil: queues are then posted
        /// to with `async`, so no queue's backlog can hold up another's links.
        var soleQueue: DispatchQueue?
        /// Set for good once the reader waited too long for the sole queue.
        var inlineDisabled = false

        mutating func updateSoleQueue() {
            guard !inlineDisabled else {
                soleQueue = nil
                return
            }
            var sole: DispatchQueue?
            for reg in links.values {
                guard let queue = reg.inlineQueue, sole == nil || sole === queue else {
                    soleQueue = nil
                    return
                }
                sole = queue
            }
            soleQueue = sole
        }
    }

    let socketPath: String
    private let state: Mutex<State>
    /// The thread holding the core lock (0: none), for the lock-order assertion.
    private let coreHolder = Atomic<UInt>(0)

    private init(socketPath: String) {
        self.socketPath = socketPath
        var config = VsyncClient.Configuration(socketPath: socketPath, clientName: ProcessInfo.processInfo.processName)
        config.connector = .unixSocket
        var initial = State()
        do {
            initial.core = Core(client: try VsyncClient(config))
        } catch {
            initial.coreError = error
        }
        state = Mutex(initial)
    }

    /// True while the calling thread holds the core lock (debug assertions only).
    var isCoreLockedByCurrentThread: Bool { coreHolder.load(ordering: .relaxed) == UInt(pthread_self()) }

    private func withCore<R>(_ body: (inout State) -> R) -> R {
        state.withLock { s in
            coreHolder.store(UInt(pthread_self()), ordering: .relaxed)
            defer { coreHolder.store(0, ordering: .relaxed) }
            return body(&s)
        }
    }

    // MARK: Called by links (any thread, with the link's lock held)

    func register(_ link: DisplayLink, selector: DisplaySelector, range: FrameRateRange, paused: Bool,
                  flags: SubscribeFlags, workDurationNs: UInt64, inlineQueue: DispatchQueue?) -> UInt32? {
        let (id, startThread, failure) = withCore { s -> (UInt32?, Bool, DisplayLinkError?) in
            guard let client = s.client else { return (nil, false, s.coreError) }
            let id = client.subscribe(selector, range: range, paused: paused, flags: flags, workDurationNs: workDurationNs)
            s.links[id] = Registration(link: link, inlineQueue: inlineQueue)
            s.updateSoleQueue()
            let start = !s.threadStarted
            s.threadStarted = true
            return (id, start, nil)
        }
        // The caller holds the link's lock: report from elsewhere (the core could not even make its fds).
        if let failure { DispatchQueue.global().async { link.connectionDidFail(failure) } }
        if startThread {
            let thread = Thread { [self] in
                // Set on the running thread, so the kernel's name (top -H, /proc) is set too.
                Thread.current.name = Self.readerThreadName
                self.run()
            }
            thread.start()
        }
        return id
    }

    func unregister(_ id: UInt32) {
        withCore { s in
            guard s.links.removeValue(forKey: id) != nil else { return }
            s.client?.unsubscribe(id)
            s.updateSoleQueue()
        }
    }

    /// The link's one context became `queue` (or stopped being a single queue).
    func setInlineQueue(_ id: UInt32, _ queue: DispatchQueue?) {
        withCore { s in
            guard s.links[id] != nil else { return }
            s.links[id]?.inlineQueue = queue
            s.updateSoleQueue()
        }
    }

    func setRange(_ id: UInt32, _ range: FrameRateRange) {
        withCore { s in s.client?.setRange(id, range) }
    }

    func setPaused(_ id: UInt32, _ paused: Bool) {
        withCore { s in s.client?.setPaused(id, paused) }
    }

    func setWorkDuration(_ id: UInt32, _ ns: UInt64) {
        withCore { s in s.client?.setWorkDuration(id, ns) }
    }

    func setPredictWhileOff(_ id: UInt32, _ on: Bool) {
        withCore { s in s.client?.setPredictWhileOff(id, on) }
    }

    // MARK: The reader thread

    /// One event of the core for one link, collected under the core lock, delivered after it.
    private typealias Delivery = (link: DisplayLink, event: ClientEvent)

    private func run() {
        guard let fd = withCore({ $0.client?.fileDescriptor }) else { return }
        var batch: [Delivery] = []
        batch.reserveCapacity(8)
        var handlers: [(DisplayLink, DisplayLink.Handoff)] = []
        handlers.reserveCapacity(4)
        while true {
            // Waits without the lock: links register, pause and change rates meanwhile, and
            // whatever the core must then do (connect, send, retry) makes this fd readable.
            VsyncClient.wait(fileDescriptor: fd, timeoutMs: -1)
            if let queue = withCore({ $0.soleQueue }) {
                // Waits while the queue runs other work; the core then still hands over only the
                // newest tick, so a busy queue skips frames rather than queueing them.
                let before = MonotonicClock.nanoseconds()
                var waitedNs: UInt64 = 0
                queue.sync {
                    waitedNs = MonotonicClock.nanoseconds() &- before
                    collect(&batch)
                    deliver(&batch, &handlers, inlineOn: queue)
                }
                if waitedNs > Self.inlineWaitLimitNs {
                    withCore { s in
                        s.inlineDisabled = true
                        s.updateSoleQueue()
                    }
                }
            } else {
                collect(&batch)
                deliver(&batch, &handlers, inlineOn: nil)
            }
        }
    }

    /// Runs the core once and takes its events for the links they belong to.
    private func collect(_ batch: inout [Delivery]) {
        withCore { s in
            guard let client = s.client else { return }
            client.dispatch(timeoutMs: 0)
            while let event = client.nextEvent() {
                let id: UInt32
                switch event {
                case .frame(let frame): id = frame.subscriptionID
                case .subscribed(let answer): id = answer.subscriptionID
                case .display(let sub, _), .error(let sub, _): id = sub
                case .connected: continue
                }
                // 0: a display was added (the core renews what waited for it) or an error with
                // no subscription, which no link needs.
                guard id != 0, let link = s.links[id]?.link else { continue }
                batch.append((link, event))
            }
        }
    }

    /// Hands each link its events. Links whose handler runs on this thread (``DisplayLink/start()``,
    /// or inline on the sole queue) run last, so a slow one delays only the others of its kind.
    private func deliver(_ batch: inout [Delivery], _ handlers: inout [(DisplayLink, DisplayLink.Handoff)],
                         inlineOn inlineQueue: DispatchQueue?) {
        for (link, event) in batch {
            switch event {
            case .frame(let frame):
                let handoff = link.connectionDidDeliver(DisplayLink.Frame(frame), inlineOn: inlineQueue)
                if handoff != .none { handlers.append((link, handoff)) }
            case .subscribed(let answer):
                link.connectionDidSubscribe(answer)
            case .display(_, let event):
                link.connectionDidReceive(event)
            case .error(_, let error):
                link.connectionDidFail(error)
            case .connected:
                break
            }
        }
        batch.removeAll(keepingCapacity: true)
        for (link, handoff) in handlers {
            switch handoff {
            case .none: break
            case .direct: link.runDirectHandler()
            case .inline: link.fireQueue()
            }
        }
        handlers.removeAll(keepingCapacity: true)
    }
}
