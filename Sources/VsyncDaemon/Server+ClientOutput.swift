import Glibc
import Logging
import VsyncCore

// Non-blocking sends: blocked clients, pending ticks, the stall bound.
extension Server {
    func sendFailed(_ client: Client, _ e: Int32) {
        let reason = e == EPIPE || e == ECONNRESET ? "closed by client" : "send failed: \(errnoText(e))"
        disconnect(client, reason: reason, level: .info)
    }

    func markBlocked(_ client: Client) {
        if client.blockedSinceNs == nil {
            client.blockedSinceNs = monotonicNow()
            blockedClients += 1
            updateHousekeeping()
        }
        if !client.watchingOutput {
            client.watchingOutput = true
            epoll.modify(client.fd, events: Epoll.readable | Epoll.writable)
        }
    }

    /// Sends a control message in order behind anything already waiting.
    func send(_ message: [UInt8], to client: Client) {
        guard client.closeReason == nil else { return }
        if !client.isBlocked {
            switch message.withUnsafeBytes({ Client.send(client.fd, $0.baseAddress, $0.count) }) {
            case .sent: return
            case .full: break
            case .failed(let e): sendFailed(client, e); return
            }
        }
        guard client.outbox.count - client.outboxHead < Client.maxOutbox else {
            disconnect(client, reason: "over \(Client.maxOutbox) messages waiting (client stopped reading)", level: .warning)
            return
        }
        client.outbox.append(message)
        markBlocked(client)
    }

    /// EPOLLOUT: control messages first, then the newest pending tick of each subscription.
    func flush(_ client: Client) {
        // A client that drains at all is slow, not stalled: the stall clock restarts.
        defer { if client.blockedSinceNs != nil { client.blockedSinceNs = monotonicNow() } }
        while client.outboxHead < client.outbox.count {
            let result = client.outbox[client.outboxHead].withUnsafeBytes { Client.send(client.fd, $0.baseAddress, $0.count) }
            switch result {
            case .sent: client.outboxHead += 1
            case .full: return
            case .failed(let e): sendFailed(client, e); return
            }
        }
        client.outbox.removeAll(keepingCapacity: true)
        client.outboxHead = 0
        while let (sub, tick) = client.pendingTicks.first {
            switch sendTick(tick, sub) {
            case .sent:
                client.pendingTicks.removeFirst()
            case .full: return
            case .failed(let e): sendFailed(client, e); return
            }
        }
        settle(client)
    }

    /// A client with nothing left to send is not stalled, even if its socket is still full
    /// (e.g. it paused or unsubscribed while blocked). Touches this client only: housekeeping
    /// is re-planned when the last blocked client drains, so many draining in one frame cost
    /// one scan of the clients, not one each.
    func settle(_ client: Client) {
        guard client.closeReason == nil, client.outboxHead >= client.outbox.count,
              client.pendingTicks.isEmpty else { return }
        if client.watchingOutput {
            client.watchingOutput = false
            epoll.modify(client.fd, events: Epoll.readable)
        }
        guard client.blockedSinceNs != nil else { return }
        client.blockedSinceNs = nil
        blockedClients -= 1
        if blockedClients == 0 { updateHousekeeping() }
    }
}
