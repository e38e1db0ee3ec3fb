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
        while let sub = client.pendingTicks.first {
            guard let tick = sub.pending else { client.pendingTicks.removeFirst(); continue }
            switch sendTick(tick, sub) {
            case .sent:
                sub.pending = nil
                client.pendingTicks.removeFirst()
            case .full: return
            case .failed(let e): sendFailed(client, e); return
            }
        }
        settle(client)
    }

    /// A client with nothing left to send is not stalled, even if its socket is still full
    /// (e.g. it paused or unsubscribed while blocked).
    func settle(_ client: Client) {
        guard client.closeReason == nil, client.outboxHead >= client.outbox.count,
              client.pendingTicks.isEmpty else { return }
        client.blockedSinceNs = nil
        if client.watchingOutput {
            client.watchingOutput = false
            epoll.modify(client.fd, events: Epoll.readable)
        }
        updateHousekeeping()
    }
}
