internal import CVsyncSys

#if !VSYNC_EMBEDDED
    import VsyncCore
#endif

// The daemon's display list, asked for and waited on: libvsync's vsync_client_get_displays.
extension VsyncClient {
    /// Asks the daemon for its displays and waits up to `timeoutNs` for the answer, connecting
    /// first if there is no connection. Frames and events read meanwhile stay queued, and the fd
    /// is kept readable so the app's loop comes back to dispatch them.
    public func listDisplays(timeoutNs: UInt64) throws(ClientError) -> [DisplayInfo] {
        let deadline = vsync_sys_now_ns() &+ timeoutNs
        if !ready, let error = connect(timeoutNs: timeoutNs) { throw error }
        send(.listDisplays)
        displayListsRequested += 1
        defer { if eventCursor < events.count { wakeSoon() } }
        while displayListsReceived < displayListsRequested {
            // The connection went while waiting: its error says why (the client reconnects later).
            guard socketFD >= 0, ready else { throw lastError ?? .connectionLost(socketPath: socketPath) }
            let now = vsync_sys_now_ns()
            guard now < deadline else { throw .connectionFailed(socketPath: socketPath, errno: ETIMEDOUT) }
            _ = vsync_sys_epoll_wait(epollFD, Int32(min((deadline - now + 999_999) / 1_000_000, 60_000)))
            process(now: vsync_sys_now_ns())
        }
        return lastDisplayList
    }

    /// Makes the fd readable now (an expired timer), so the app's loop dispatches the events
    /// already queued; the next dispatch re-arms the timer for its real deadline.
    func wakeSoon() {
        _ = vsync_sys_timerfd_set(timerFD, 1)
        armedDeadline = 1
    }
}
