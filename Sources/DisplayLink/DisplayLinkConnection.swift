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
/// Links call in here with their own lock held (to subscribe, pause, change the rate, read the
/// settings the core owns while they are subscribed). The reader thread takes the core lock
/// only to run the core and collect its events, and takes links' locks only after releasing it.
/// `DisplayLink` asserts the order in debug builds (``isCoreLockedByCurrentThread``).
///
/// **The reader thread's life**: it starts with the first link that subscribes and ends once
/// no link is subscribed and the core has closed its socket (one second after the last link,
/// the core's idle close). The next link starts a new one.
final class DisplayLinkConnection: Sendable {
    /// The reader thread's name, as `top -H` and `/proc/PID/task/*/comm` show it (15 bytes at most).
    static let readerThreadName = "DisplayLink"

    /// Sets the calling thread's kernel name (15 bytes at most), as `pthread_setname_np` does.
    static func nameCurrentThread(_ name: String) {
        let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = Array(name.utf8.prefix(15)).withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
    }

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
        /// By subscription id; scanned, not hashed, on every frame (a process has a few links).
        var links = IDTable<DisplayLink>()
        var inline = InlineDelivery()
        var readerRunning = false
        /// Reader threads started so far (tests check that one ends and the next starts).
        var readersStarted = 0
    }

    let socketPath: String
    /// The core's timing page, read WITHOUT the core lock, from any thread, while the reader
    /// thread dispatches under it: the page pointer is published atomically, every record is
    /// read under its seqlock, and no page is unmapped while this object lives (connections
    /// live as long as the process), so a reader never meets an unmapped page.
    let timingPage: TimingPageMapping?
    private let state: Mutex<State>
    /// The thread holding the core lock (0: none), for the lock-order assertion (debug builds).
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
        timingPage = initial.core?.client.timingPage
        state = Mutex(initial)
    }

    /// True while the calling thread holds the core lock (debug assertions only).
    var isCoreLockedByCurrentThread: Bool { coreHolder.load(ordering: .relaxed) == UInt(pthread_self()) }

    private func withCore<R>(_ body: (inout State) -> R) -> R {
        state.withLock { s in
            #if DEBUG
                coreHolder.store(UInt(pthread_self()), ordering: .relaxed)
                defer { coreHolder.store(0, ordering: .relaxed) }
            #endif
            return body(&s)
        }
    }

    /// Whether a reader thread runs now, and how many were started (for tests).
    var readerStatus: (running: Bool, started: Int) { withCore { ($0.readerRunning, $0.readersStarted) } }

    /// The inline decision now: the queue read on inside `sync`, and whether a long wait
    /// turned it off for good (for tests).
    var inlineStatus: (queue: String?, disabled: Bool) { withCore { ($0.inline.queue?.label, $0.inline.disabled) } }

    // MARK: Called by links (any thread, with the link's lock held)

    /// Subscribes `link` with its settings, which the core owns from now on.
    func register(
        _ link: DisplayLink, selector: DisplaySelector, settings: DisplayLink.Settings,
        onlyQueue: DispatchQueue?
    ) -> UInt32? {
        let (id, startThread, failure) = withCore { s -> (UInt32?, Bool, DisplayLinkError?) in
            guard let client = s.client else { return (nil, false, s.coreError) }
            let id = client.subscribe(
                selector, range: settings.range, paused: settings.paused,
                flags: settings.flags,
                workDurationNs: settings.workDurationNs)
            s.links[id] = link
            s.inline.set(id, onlyQueue: onlyQueue)
            let start = !s.readerRunning
            if start {
                s.readerRunning = true
                s.readersStarted += 1
            }
            return (id, start, nil)
        }
        // The caller holds the link's lock: report from elsewhere (the core could not even make its fds).
        if let failure { DispatchQueue.global().async { link.connectionDidFail(failure) } }
        if startThread {
            let thread = Thread { [self] in
                // Named by the running thread itself through /proc: Foundation's
                // `Thread.current.name` skips the kernel's name when the thread runs before
                // `start()` has recorded its handle, which left some readers unnamed in top -H.
                Thread.current.name = Self.readerThreadName
                Self.nameCurrentThread(Self.readerThreadName)
                self.run()
            }
            thread.start()
        }
        return id
    }

    /// Unsubscribes; returns the subscription's last settings and display, for the link to keep.
    func unregister(_ id: UInt32) -> SubscriptionInfo? {
        withCore { s in
            guard s.links.removeValue(forKey: id) != nil, let client = s.client else { return nil }
            let info = client.subscription(id)
            client.unsubscribe(id)
            s.inline.remove(id)
            // The reader may be waiting with nothing armed: wake it to close or end.
            if s.links.isEmpty { client.wake() }
            return info
        }
    }

    /// The link's contexts changed: its one queue now, or nil.
    func setOnlyQueue(_ id: UInt32, _ queue: DispatchQueue?) {
        withCore { s in
            guard s.links[id] != nil else { return }
            s.inline.set(id, onlyQueue: queue)
        }
    }

    func subscription(_ id: UInt32) -> SubscriptionInfo? { withCore { $0.client?.subscription(id) } }

    /// Sends what changed between two settings of a subscription.
    func apply(_ id: UInt32, from old: DisplayLink.Settings, to new: DisplayLink.Settings) {
        guard old != new else { return }
        withCore { s in
            guard let client = s.client else { return }
            if new.range != old.range { client.setRange(id, new.range) }
            if new.workDurationNs != old.workDurationNs { client.setWorkDuration(id, new.workDurationNs) }
            if new.predictsWhileOff != old.predictsWhileOff { client.setPredictWhileOff(id, new.predictsWhileOff) }
            if new.pageOnly != old.pageOnly { client.setPageOnly(id, new.pageOnly) }
            if new.hardwareTicks != old.hardwareTicks { client.setHardwareTicks(id, new.hardwareTicks) }
            if new.paused != old.paused { client.setPaused(id, new.paused) }
        }
    }

    // MARK: The reader thread

    /// One event of the core for one link, collected under the core lock, delivered after it.
    /// `pauses` is the link's pause count when the core read the event (``DisplayLink/pauses``).
    /// Structs, not tuples: a tuple holding a reference is copied through the runtime's generic
    /// tuple witnesses, on every frame.
    private struct Delivery {
        let link: DisplayLink
        let event: ClientEvent
        let pauses: UInt32
    }

    /// A read's one frame, the usual read.
    private struct Single {
        let link: DisplayLink
        let frame: ClientFrame
        let pauses: UInt32
    }

    /// What a turn of the reader decided under the core lock, besides the events it took.
    private struct Turn {
        /// The queue this turn delivers inline on (decided before its wait for the queue counted).
        var inline: DispatchQueue?
        /// The queue the next turn enters with `sync`, if any.
        var next: DispatchQueue?
        /// No link is left and the core closed its socket: the thread ends.
        var end = false
        /// The read's one event when it was a frame (the usual read), kept out of the batch.
        var single: Single?
    }

    /// Each turn takes the core lock once: a wake-up of the reader is one lock on the core and,
    /// for a frame of one link, one on the link.
    private func run() {
        guard let start = withCore({ s in s.client.map { ($0.fileDescriptor, s.inline.queue) } }) else { return }
        let fd = start.0
        var enter = start.1
        var batch: [Delivery] = []
        batch.reserveCapacity(8)
        var runs: [DisplayLink.PendingRun] = []
        runs.reserveCapacity(4)
        while true {
            // Waits without the lock: links register, pause and change rates meanwhile, and
            // whatever the core must then do (connect, send, retry, close) makes this fd readable.
            VsyncClient.wait(fileDescriptor: fd, timeoutMs: -1)
            var turn = Turn()
            if let queue = enter {
                // Waits while the queue runs other work; the core then still hands over only the
                // newest tick, so a busy queue skips frames rather than queueing them.
                let before = MonotonicClock.nanoseconds()
                queue.sync {
                    turn = collect(&batch, waitedNs: MonotonicClock.nanoseconds() &- before)
                    // The decision may have changed since this turn entered: then `async`.
                    deliver(turn.single, &batch, &runs, inlineOn: turn.inline === queue ? queue : nil)
                }
            } else {
                turn = collect(&batch, waitedNs: 0)
                deliver(turn.single, &batch, &runs, inlineOn: nil)
            }
            // Decided under the core lock, as `register` decides to start one: a link that
            // comes meanwhile either keeps this thread or starts the next.
            if turn.end { return }
            enter = turn.next
        }
    }

    /// Runs the core once and takes its events for the links they belong to; counts the wait
    /// for the queue (`InlineDelivery.waited`) and decides the next turn, in the same lock.
    private func collect(_ batch: inout [Delivery], waitedNs: UInt64) -> Turn {
        withCore { s in
            var turn = Turn()
            turn.inline = s.inline.queue
            s.inline.waited(waitedNs)
            if let client = s.client {
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
                    guard id != 0, let link = s.links[id] else { continue }
                    let pauses = link.pauses.load(ordering: .relaxed)
                    if batch.isEmpty, turn.single == nil, case .frame(let frame) = event {
                        turn.single = Single(link: link, frame: frame, pauses: pauses)
                        continue
                    }
                    if let single = turn.single {
                        batch.append(Delivery(link: single.link, event: .frame(single.frame), pauses: single.pauses))
                        turn.single = nil
                    }
                    batch.append(Delivery(link: link, event: event, pauses: pauses))
                }
            }
            turn.next = s.inline.queue
            // The reader ends once no link is left and the core has closed its socket.
            if s.links.isEmpty && s.client?.isIdle ?? true {
                s.readerRunning = false
                turn.end = true
            }
            return turn
        }
    }

    /// Hands each link its events. Handlers that run on this thread (``DisplayLink/start()``,
    /// or inline on the queue) run last, so a slow one delays only the others of its kind.
    private func deliver(
        _ single: Single?,
        _ batch: inout [Delivery], _ runs: inout [DisplayLink.PendingRun],
        inlineOn inlineQueue: DispatchQueue?
    ) {
        if let single {
            // The usual read: one frame for one link, which no other link waits behind.
            single.link.connectionDidDeliver(DisplayLink.Frame(single.frame), pauses: single.pauses, inlineOn: inlineQueue)
            return
        }
        guard !batch.isEmpty else { return }
        for delivery in batch {
            let link = delivery.link
            switch delivery.event {
            case .frame(let frame):
                link.connectionDidDeliver(DisplayLink.Frame(frame), pauses: delivery.pauses, inlineOn: inlineQueue, into: &runs)
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
        for run in runs { run.run() }
        runs.removeAll(keepingCapacity: true)
    }
}
