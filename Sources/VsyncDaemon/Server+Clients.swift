import CLinux
import Glibc
import Logging
import VsyncCore

// Accepting clients, reading their requests, disconnecting them.
extension Server {
    /// Answers one waiting connection with a refusal when out of file descriptors: the spare
    /// descriptor is freed for the accept and taken back after. Without this the listening socket
    /// stays readable and the loop would spin on EMFILE.
    func refuseWithSpareDescriptor() -> Bool {
        guard clients.spare != nil else { return false }
        clients.spare = nil
        let accepted = try? nonBlocking("accept") { accept(clients.listener.fd.raw, nil, nil) }
        if let accepted {
            let fd = FileDescriptor(accepted)
            let refusal = ServerMessage.refused(
                Refusal(
                    code: .tooManyClients, message: "vsyncd is out of file descriptors; try again later"))
            _ = refusal.encoded().withUnsafeBytes { Client.send(fd.raw, $0.baseAddress, $0.count) }
        }
        clients.spare = FileDescriptor(opening: "/dev/null", O_RDONLY)
        return accepted != nil
    }

    func acceptClients() {
        let listener = clients.listener
        for _ in 0..<64 {
            let accepted: Int32?
            do throws(SystemCallError) {
                accepted = try nonBlocking("accept") { accept(listener.fd.raw, nil, nil) }
            } catch  where error.code == ECONNABORTED {
                continue
            } catch {
                clients.noteAcceptFailure(error.code, logger: logger)
                if error.code == EMFILE || error.code == ENFILE, refuseWithSpareDescriptor() { continue }
                // Could not even refuse: stop watching the socket for a moment rather than spin.
                loop.unregister(listener.fd.raw)
                clients.pauseListener(until: monotonicNow() + 100_000_000)
                return
            }
            guard let accepted else { return }
            let fd = FileDescriptor(accepted)
            _ = fcntl(fd.raw, F_SETFL, fcntl(fd.raw, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd.raw, F_SETFD, FD_CLOEXEC)
            var peer = Peer.read(socket: fd.raw)
            guard admit(fd, &peer) else { continue }
            var size = Self.clientSendBuffer
            _ = setsockopt(fd.raw, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
            let client = Client(socket: fd, pid: peer.pid, uid: peer.uid, appID: peer.appID)
            do {
                try loop.register(client.fd, .client(client))
            } catch {
                logger.error("\(error)")
                continue
            }
            clients.add(client)
            logger.info("client connected: \(peer.label) (\(clients.count) client(s))")
        }
    }

    func handleClient(_ client: Client, events: UInt32) {
        if events & Epoll.writable != 0 { flush(client) }
        if client.closeReason == nil, events & Epoll.readable != 0 { readRequests(client) }
        if client.closeReason == nil, events & (Epoll.hangUp | Epoll.error) != 0,
            events & Epoll.readable == 0
        {
            disconnect(client, reason: "connection closed", level: .info)
        }
    }

    func readRequests(_ client: Client) {
        let buffer = clients.receiveBuffer
        // A bounded batch per wake-up, so one chatty client cannot starve the others.
        for _ in 0..<32 {
            let received: Int?
            do throws(SystemCallError) {
                received = try nonBlocking("recv") { () -> Int in
                    recv(client.fd, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT) | Int32(MSG_TRUNC))
                }
            } catch {
                return disconnect(client, reason: "recv failed: \(errnoText(error.code))", level: .info)
            }
            guard let n = received else { return }
            if n == 0 {
                disconnect(client, reason: "closed by client", level: .info)
                return
            }
            let bytes = UnsafeRawBufferPointer(rebasing: buffer[0..<min(n, buffer.count)])
            let result: Result<ClientMessage, WireError>
            do throws(WireError) {
                result = .success(try ClientMessage.decode(bytes, version: client.version ?? WireProtocol.currentVersion))
            } catch {
                result = .failure(n > buffer.count ? .oversized(n) : error)
            }
            handle(result, from: client)
            if client.closeReason != nil { return }
        }
    }

    /// Sends a last message (best effort) and disconnects.
    func fail(_ client: Client, _ message: ServerMessage, reason: String) {
        let bytes = message.encoded()
        _ = bytes.withUnsafeBytes { Client.send(client.fd, $0.baseAddress, $0.count) }
        disconnect(client, reason: reason, level: .warning)
    }

    /// The one way a subscription ends (unsubscribe, a move to another display, its client
    /// gone, its display gone): out of its client and its display, its pending tick dropped.
    /// The caller re-plans the display's vblank events (`updateVBlank`) once it is done.
    func detach(_ sub: Subscription) {
        let client = sub.client
        client.subscriptions[sub.id] = nil
        client.pendingTicks.removeAll { $0.sub === sub }
        settle(client)
        sub.display.subscriptions.removeAll { $0 === sub }
    }

    func disconnect(_ client: Client, reason: String, level: Logger.Level) {
        guard client.closeReason == nil else { return }
        client.closeReason = reason
        let touched = Set(client.subscriptions.values.map { ObjectIdentifier($0.display) })
        for sub in client.subscriptions.values { detach(sub) }
        client.waiting = [:]
        loop.unregister(client.fd)
        clients.remove(client)
        logger.log(level: level, "client disconnected: \(client.label): \(reason) (\(clients.count) client(s))")
        for d in displays where touched.contains(ObjectIdentifier(d)) { updateVBlank(d) }
    }
}
