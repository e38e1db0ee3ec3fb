import VsyncClientCore
import VsyncCore

@_exported import enum VsyncClientCore.ClientEvent
@_exported import struct VsyncClientCore.ClientFrame
// The client core's and the protocol's types that DisplayLink's API names, re-exported by
// name: an app imports DisplayLink alone (the other modules are not products), and under Swift
// 6's member import visibility a type's members (`frameTimelines[1].sequence`) are visible
// only through an import of the module that declares them. The rest of those modules stays
// out of the app's namespace.
@_exported import class VsyncClientCore.VsyncClient
@_exported import enum VsyncCore.DisplaySelector
@_exported import struct VsyncCore.FrameFacts
@_exported import struct VsyncCore.FrameJank
@_exported import enum VsyncCore.FrameJankReason
@_exported import struct VsyncCore.FrameJankTracker
@_exported import struct VsyncCore.FrameRateRange
@_exported import struct VsyncCore.FrameTick
@_exported import struct VsyncCore.FrameTimeline
@_exported import struct VsyncCore.FrameTimelines
@_exported import struct VsyncCore.PerfettoTrace

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
