import Glibc
import Logging
import VsyncCore

// Non-blocking sends: blocked clients, pending ticks, the stall bound.
extension Server {
    func sendFailed(_ client: Client, _ e: Int32) {
        let reason = e == EPIPE || e == ECONNRESET ? "closed by client" : "send failed: \(errnoText(e))"
        disconnect(client, reason: reason, level: .info)
    }

    /// Something waits for the client's socket: the stall clock runs, and EPOLLOUT says when
    /// it has room.
    func markBlocked(_ client: Client) {
        clients.markBlocked(client)
        if !client.watchingOutput {
            client.watchingOutput = true
            loop.watchOutput(client.fd, true)
        }
    }

    /// Sends a control message in order behind anything already waiting.
    func send(_ message: [UInt8], to client: Client) {
        guard client.closeReason == nil else { return }
        if !client.isBlocked {
            switch message.withUnsafeBytes({ Client.send(client.fd, $0.baseAddress, $0.count) }) {
            case .sent: return
            case .full: break
            case .failed(let e):
                sendFailed(client, e)
                return
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
        defer { clients.drained(client) }
        while client.outboxHead < client.outbox.count {
            let result = client.outbox[client.outboxHead].withUnsafeBytes { Client.send(client.fd, $0.baseAddress, $0.count) }
            switch result {
            case .sent: client.outboxHead += 1
            case .full: return
            case .failed(let e):
                sendFailed(client, e)
                return
            }
        }
        client.outbox.removeAll(keepingCapacity: true)
        client.outboxHead = 0
        while let (sub, tick) = client.pendingTicks.first {
            switch sendTick(tick, sub) {
            case .sent:
                client.pendingTicks.removeFirst()
            case .full: return
            case .failed(let e):
                sendFailed(client, e)
                return
            }
        }
        settle(client)
    }

    /// A client with nothing left to send is not stalled, even if its socket is still full
    /// (e.g. it paused or unsubscribed while blocked).
    func settle(_ client: Client) {
        guard client.closeReason == nil, client.outboxHead >= client.outbox.count,
            client.pendingTicks.isEmpty
        else { return }
        if client.watchingOutput {
            client.watchingOutput = false
            loop.watchOutput(client.fd, false)
        }
        clients.unblock(client)
    }
}
