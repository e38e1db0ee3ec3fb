import VsyncClientCore
import VsyncCore

// The fd + dispatch form, for Swift render loops that already poll (a game loop, an epoll
// loop, GLib): no reader thread, no locks, callbacks-by-events on the caller's thread. It is the
// same core every DisplayLink runs on, and the one libvsync gives C:
//
//     let client = try VsyncClient(.init(socketPath: VsyncClient.resolvedSocketPath(nil), clientName: "game"))
//     let id = client.subscribe(.primary, range: FrameRateRange(preferredFramesPerSecond: 60))
//     while running {
//         poll(client.fileDescriptor, …)          // with the loop's other fds
//         client.dispatch(timeoutMs: 0)
//         while let event = client.nextEvent() {
//             if case .frame(let frame) = event { render(until: frame.targetTimestampNs) }
//         }
//     }
//
// One thread at a time uses a client; it reconnects and renews its subscriptions by itself.

/// The thread-free vsyncd client: one fd to poll, ``VsyncClient/dispatch(timeoutMs:)``, events.
public typealias VsyncClient = VsyncClientCore.VsyncClient
/// What ``VsyncClient/dispatch(timeoutMs:)`` produced: frames, display changes, errors.
public typealias ClientEvent = VsyncClientCore.ClientEvent
/// One frame from ``VsyncClient``: the newest tick of a subscription, with the skipped count.
public typealias ClientFrame = VsyncClientCore.ClientFrame
/// One presentation candidate: a vblank at the link's rate and its predicted time.
public typealias FrameTimeline = VsyncCore.FrameTimeline
/// Up to four presentation candidates, the target first (``DisplayLink/Frame/frameTimelines``).
public typealias FrameTimelines = VsyncCore.FrameTimelines
