import Glibc
import VsyncCore

// Who may connect and how many connections each may hold: judged once, at accept.
extension Server {
    /// The card nodes open now, by path (what `DisplayAccess` judges by default).
    var servedNodePaths: [String] {
        var paths: [String] = []
        for d in displays where !paths.contains(d.key.device) { paths.append(d.key.device) }
        return paths
    }

    /// Refuses `fd` (and returns false) when the peer may not use the display or holds its share
    /// of connections; logs each refusal with the peer's pid, uid and app.
    func admit(_ fd: borrowing FileDescriptor, _ peer: inout Peer) -> Bool {
        if clients.count >= configuration.maxClients {
            refuse(
                fd, peer, "vsyncd serves at most \(configuration.maxClients) clients; try again later",
                log: "at the cap of \(configuration.maxClients) clients (--max-clients)")
            return false
        }
        if case .refused(let line) = access.decide(peer, served: servedNodePaths) {
            refuse(fd, peer, line, log: line)
            return false
        }
        // Counted on demand: accepts are rare next to ticks, and nothing can drift.
        let held = clients.reduce(0) { $0 + ($1.uid == peer.uid ? 1 : 0) }
        if held >= configuration.maxClientsPerUser {
            refuse(
                fd, peer,
                "uid \(peer.uid) already has \(held) connections, the per-user limit: close some, or raise vsyncd's --max-clients-per-user",
                log: "uid \(peer.uid) is at the per-user cap of \(configuration.maxClientsPerUser) connections (--max-clients-per-user)"
            )
            return false
        }
        peer.lookUpAppID()
        if let app = peer.appID {
            let cap = configuration.maxClientsPerApp
            let byApp = clients.reduce(0) { $0 + ($1.uid == peer.uid && $1.appID == app ? 1 : 0) }
            if byApp >= cap {
                refuse(
                    fd, peer,
                    "app \(app) already has \(byApp) connections, its share of uid \(peer.uid)'s \(configuration.maxClientsPerUser): close some, or raise vsyncd's --max-clients-per-user",
                    log: "app \(app) of uid \(peer.uid) is at the per-app cap of \(cap) connections (half of --max-clients-per-user)")
                return false
            }
        }
        return true
    }

    /// Sends REFUSED (code 2, the one a client can get before its HELLO) and lets `fd` close.
    func refuse(_ fd: borrowing FileDescriptor, _ peer: Peer, _ message: String, log: String) {
        // Logged before the client can see the refusal, so the log never lags what it saw.
        clients.noteRefusal(peer.labelWithAppID(), log, logger: logger)
        let refusal = ServerMessage.refused(Refusal(code: .tooManyClients, message: message))
        _ = refusal.encoded().withUnsafeBytes { Client.send(fd.raw, $0.baseAddress, $0.count) }
    }

    /// Why `client` may not subscribe once more, or nil. Every subscription costs a send per due
    /// vblank: one user's total bounds its share of a tick, and one sandboxed app's half of that.
    func subscriptionShareExceeded(by client: Client) -> String? {
        let held = clients.reduce(0) { $0 + ($1.uid == client.uid ? $1.subscriptions.count + $1.waiting.count : 0) }
        if held >= configuration.maxSubscriptionsPerUser {
            return
                "uid \(client.uid) holds \(held) subscriptions, the per-user limit: end some, or raise vsyncd's --max-subscriptions-per-user"
        }
        guard let app = client.appID else { return nil }
        let byApp = clients.reduce(0) {
            $0 + ($1.uid == client.uid && $1.appID == app ? $1.subscriptions.count + $1.waiting.count : 0)
        }
        guard byApp >= configuration.maxSubscriptionsPerApp else { return nil }
        return
            "app \(app) holds \(byApp) subscriptions, half of uid \(client.uid)'s limit: end some, or raise vsyncd's --max-subscriptions-per-user"
    }
}
