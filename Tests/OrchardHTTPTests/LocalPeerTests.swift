import CommandTestSupport
import Foundation
import Synchronization
import Testing

@testable import OrchardHTTP

#if canImport(Glibc)
    import Glibc
#endif

/// A listener for one user of the machine (``ListenerPeers/localUser(uid:)``): the kernel's record of the connecting
/// socket decides, before a byte of the request is read.
@Suite("A loopback listener for one user answers only that user's sockets")
struct LocalPeerTests {
    /// How many requests the handler ran.
    final class Calls: Sendable {
        private let count = Atomic(0)
        func add() { count.add(1, ordering: .relaxed) }
        var value: Int { count.load(ordering: .relaxed) }
    }

    static func counting(_ calls: Calls) -> Router {
        var router = Router()
        router.get("/health") { _ in
            calls.add()
            return .text("ok")
        }
        return router
    }

    @Test("U1: a listener for this user answers this user's connection")
    func theOwnersConnectionIsAnswered() async throws {
        let calls = Calls()
        try await withServer(peers: .processOwner, router: Self.counting(calls)) { server in
            let client = try PKI.client()
            defer { client.shutdown() }
            #expect(try await client.get(url(server, "/health")).status == .ok)
        }
        #expect(calls.value == 1)
    }

    @Test("U1: a listener for another user closes this user's connection unread; no handler runs")
    func aConnectionOfAnotherUserIsClosedUnread() async throws {
        // This process connects to a listener for another user: from that user's side, this is the attacker.
        let calls = Calls()
        let other: UInt32 = geteuid() == 65534 ? 65533 : 65534
        try await withServer(peers: .localUser(uid: other), router: Self.counting(calls)) { server in
            let client = try PKI.client { $0.maxAttempts = 1 }
            defer { client.shutdown() }
            await #expect(throws: (any Error).self) { try await client.get(url(server, "/health")) }
            // A raw TLS connection that sends its request at once gets no answer either.
            let raw = try? PKI.raw(port: server.port, timeout: .seconds(5))
            if let raw {
                try? raw.write(Array("GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n".utf8))
                let response = try? raw.readResponse()
                #expect(response == nil)
            }
        }
        #expect(calls.value == 0)
    }

    @Test(
        "U1: as another user (nobody): refused by a listener for this user, answered by one for anyone",
        .enabled(if: OtherUser.available, "needs root, to act as another user with runuser (CI runs as root)"))
    func anotherUserOfTheMachine() async throws {
        let calls = Calls()
        try await withServer(peers: .processOwner, router: Self.counting(calls)) { server in
            let outcome = try await OtherUser.get(port: server.port, path: "/health")
            #expect(outcome.hasPrefix("refused") || outcome == "closed", "\(outcome)")
        }
        #expect(calls.value == 0)
        try await withServer(router: Self.counting(calls)) { server in
            let outcome = try await OtherUser.get(port: server.port, path: "/health")
            #expect(outcome == "answered 200")
        }
        #expect(calls.value == 1)
    }
}
