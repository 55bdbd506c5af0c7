import Foundation
import NetworkServer
import OrchardLogging
import OrchardStore
import Testing
import TokenService

/// The outbox keeps token-status notifications for the token requestor; one it cannot keep is not an error of
/// the lifecycle call that made it (the requestor's status query recovers it), but it is a line in the log.
@Suite("Token notification outbox")
struct NotificationOutboxTests {
    static let notification = Data(
        #"""
        {"tokenReference":"DNITHE000000000000000001","tokenRequestorID":"40010030273","deviceID":"phone-1",
        "event":"suspended","state":"suspended","suspendedBy":["cardholder"],"cardSuffix":"1111","occurredAt":0}
        """#.utf8)

    @Test("A notification the outbox cannot keep is one error line naming the token reference and the event")
    func aNotificationNotKeptIsLogged() async throws {
        let directory = try TemporaryDirectory()
        let vault = try SQLiteTokenVaultStore(path: directory.path + "/network.sqlite")
        let sink = InMemoryLogSink()
        let outbox = SQLiteNotificationOutbox(vault: vault, logger: Logger(label: "network", level: .debug, sink: sink))
        let notification = try JSONDecoder().decode(TokenStatusNotification.self, from: Self.notification)
        await outbox.tokenStatusChanged(notification)
        #expect(sink.records.isEmpty, "a kept notification logs nothing")
        #expect(try await outbox.notifications(for: "40010030273", after: 0).count == 1)
        await vault.store.close()
        await outbox.tokenStatusChanged(notification)
        #expect(sink.records.count == 1)
        let record = try #require(sink.records.first)
        #expect(record.level == .error && record.message.hasPrefix("token notification: the outbox could not keep it"))
        #expect(record.metadata["token_reference"] == .string("DNITHE000000000000000001"))
        #expect(record.metadata["event"] == .string("suspended"))
    }
}
