import CardBasics
import CommandTestSupport
import Foundation
import MerchantKit
import OrchardCrypto
import OrchardHTTP
import OrchardLogging
import OrchardRuntime
import OrchardStore
import Synchronization
import Testing

@testable import MerchantServer

/// Two merchant server instances on one PostgreSQL database: each knows only its own requests in flight,
/// so a charge another instance began is left to it for ``PaymentProcessor/sharedChargeGrace`` on the database's
/// clock, and an outcome is recorded only over the state it was decided from. Found by `orchard chaos --instances 2`:
/// one instance's reconciliation pass reversed the other's charge in flight, which then recorded it approved.
@Suite(
    "Merchant instances on one PostgreSQL database: a charge in flight is its instance's", .serialized,
    .enabled(if: TestPostgreSQL.enabled, Comment(rawValue: TestPostgreSQL.installHint)))
struct SharedChargeTests {
    /// The acquirer as the merchant sees it: records every reversal and acknowledges it.
    final class RecordingGateway: AcquirerGateway {
        let reversals = Mutex<[String]>([])

        func authorize(_ charge: AcquirerCharge) async -> AcquirerOutcome<AcquirerDecision> {
            .notDelivered("not used by this test")
        }

        func reverse(
            merchantID: String, idempotencyKey: String, amountMinorUnits: Int64, currency: String, reason: String
        ) async -> AcquirerOutcome<Bool> {
            reversals.withLock { $0.append(idempotencyKey) }
            return .answered(true)
        }
    }

    static let merchant = "merchant.dev.orchard.demo"

    static func instance(_ store: Store, _ gateway: RecordingGateway) throws -> PaymentProcessor {
        let identity = try MerchantIdentity(key: .ec(try P256.KeyAgreement.PrivateKey()), merchantIdentifier: merchant)
        return PaymentProcessor(
            merchantIdentifier: merchant, store: store, decryptor: try PaymentTokenDecryptor(identities: [identity]),
            gateway: gateway, clock: SystemClock(), random: SystemRandom(), logger: .disabled)
    }

    /// An order being charged by "another instance": the order claimed and its payment `charging`, received now on
    /// the database's clock, as ``PaymentProcessor/begin(order:submission:maskedPAN:)`` records it.
    static func charging(_ orderID: String, in store: Store) async throws -> String {
        let transactionID = "tx-" + orderID
        try await store.write { db in
            let order = MerchantOrderStore.Order(
                orderID: orderID, item: "Lemonade", amount: try Money(minorUnits: 450, currency: try Currency("USD")),
                applicationData: Array(repeating: 7, count: 32), createdAt: Date(), state: .open, chargeAttempts: 0,
                fulfilment: nil)
            try MerchantOrderStore.insert(order, in: db)
            try db.execute(
                "UPDATE orders SET state = 'charging', charge_attempts = 1 WHERE order_id = ?", [.text(orderID)])
            let now = try #require(try db.databaseClockMicroseconds()) / 1000
            try db.execute(
                """
                INSERT INTO order_payments (transaction_id, order_id, token_hash, idempotency_key, state, masked_pan,
                                            transaction_identifier, received_at)
                VALUES (?, ?, ?, ?, 'charging', '489537******0013', ?, ?)
                """,
                [
                    .text(transactionID), .text(orderID), .blob(Array(repeating: 1, count: 32)),
                    .text(PaymentProcessor.idempotencyKey(orderID: orderID, attempt: 1)), .text(transactionID),
                    .integer(now),
                ])
        }
        return transactionID
    }

    static func state(_ transactionID: String, in store: Store) async throws -> String? {
        try await store.read { db in
            try MerchantOrderStore.payment(transactionID: transactionID, in: db)?.state.rawValue
        }
    }

    @Test("A charge another instance began is not reversed by this one's pass until the grace on the database's clock")
    func reconciliationLeavesAChargeInFlight() async throws {
        let server = try await TestPostgreSQL.shared()
        let store = try Store(
            location: .postgreSQL(try PostgreSQLLocation(url: server.url, schema: TestPostgreSQL.freshSchema("m"))),
            options: MerchantService.storeOptions, migrations: MerchantOrderStore.migrations)
        let gateway = RecordingGateway()
        let other = try Self.instance(store, gateway)
        let transactionID = try await Self.charging("ord_inflight", in: store)

        await other.resolveUnfinished()
        #expect(gateway.reversals.withLock { $0 }.isEmpty)
        #expect(try await Self.state(transactionID, in: store) == "charging")
        // Past the grace (the row aged on the database's clock), the instance that began it is gone: reversed once.
        try await store.write { db in
            try db.execute(
                "UPDATE order_payments SET received_at = received_at - ? WHERE transaction_id = ?",
                [.integer(Int64(PaymentProcessor.sharedChargeGrace * 1000) + 1000), .text(transactionID)])
        }
        await other.resolveUnfinished()
        #expect(gateway.reversals.withLock { $0 } == ["order-ord_inflight-1"])
        #expect(try await Self.state(transactionID, in: store) == "reversed")
        let order = try await store.read { db in try MerchantOrderStore.order("ord_inflight", in: db) }
        #expect(order?.state == .open)
        await store.close()
    }

    @Test("An approval one instance recorded is not overwritten by another's reversal, nor sent to the acquirer")
    func outcomesRecordedOverTheirState() async throws {
        let server = try await TestPostgreSQL.shared()
        let store = try Store(
            location: .postgreSQL(try PostgreSQLLocation(url: server.url, schema: TestPostgreSQL.freshSchema("m"))),
            options: MerchantService.storeOptions, migrations: MerchantOrderStore.migrations)
        let gateway = RecordingGateway()
        let other = try Self.instance(store, gateway)
        let transactionID = try await Self.charging("ord_approved", in: store)
        // The instance that charged it records the approval first.
        try await store.write { db in
            try db.execute(
                """
                UPDATE order_payments SET state = 'approved', answer_status = 200, answer = '{"outcome":"approved"}'
                WHERE transaction_id = ?
                """, [.text(transactionID)])
            try db.execute(
                "UPDATE orders SET state = 'paid', paid_transaction_id = ? WHERE order_id = 'ord_approved'",
                [.text(transactionID)])
        }
        let order = try #require(try await store.read { db in try MerchantOrderStore.order("ord_approved", in: db) })
        // Another instance's reversal of it (a resubmission, a pass that read it `charging`) reverses nothing.
        let answer = try await other.reverse(transactionID, key: "order-ord_approved-1", order: order)
        #expect(answer.status.code == 200 && String(decoding: answer.body, as: UTF8.self).contains("approved"))
        #expect(gateway.reversals.withLock { $0 }.isEmpty)
        #expect(try await Self.state(transactionID, in: store) == "approved")
        let after = try await store.read { db in try MerchantOrderStore.order("ord_approved", in: db) }
        #expect(after?.state == .paid)
        await store.close()
    }
}
