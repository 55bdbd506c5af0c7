import CardBasics
import Foundation
public import OrchardStore

/// The merchant's tables in `merchant.sqlite` (WAL, synchronous FULL, secure delete: ``MerchantService/storeOptions``).
///
/// - `orders`: one row per order: item, total, currency, the exact applicationData bytes (the app's, else the
///   order's own), state (`open`, `charging`, `paid`), how many charges were sent for it (the acquirer
///   idempotency key's suffix), and, once paid, what the order needs to be fulfilled (`MerchantAPI.Fulfilment`).
/// - `order_payments`: one row per token submitted, keyed by its `header.transactionId` (hex): the SHA-256 of
///   the token as received (so a resubmission is recognised), the acquirer idempotency key, the state
///   (`charging`, `reversing`, `approved`, `declined`, `reversed`, `refused`), the DPAN masked (first six, last
///   four) and the first answer given, replayed byte for byte. No DPAN, cryptogram or contact.
///
/// A partial unique index allows at most one live charge (charging, reversing or approved) per order.
public enum MerchantOrderStore {
    /// The store's migrations, numbered from 1.
    public static let migrations: [Migration] = [
        Migration(
            version: 1, name: "orders and their payments",
            sql: """
                CREATE TABLE orders (
                    order_id TEXT PRIMARY KEY,
                    item TEXT NOT NULL,
                    amount_minor INTEGER NOT NULL CHECK (amount_minor > 0),
                    currency TEXT NOT NULL,
                    application_data BLOB NOT NULL,
                    created_at INTEGER NOT NULL,
                    state TEXT NOT NULL CHECK (state IN ('open', 'charging', 'paid')),
                    charge_attempts INTEGER NOT NULL DEFAULT 0 CHECK (charge_attempts >= 0),
                    paid_transaction_id TEXT,
                    fulfilment TEXT,
                    CHECK ((state = 'paid') = (paid_transaction_id IS NOT NULL))
                ) STRICT;
                CREATE TABLE order_payments (
                    transaction_id TEXT PRIMARY KEY,
                    order_id TEXT NOT NULL REFERENCES orders (order_id),
                    token_hash BLOB NOT NULL,
                    idempotency_key TEXT NOT NULL,
                    state TEXT NOT NULL
                        CHECK (state IN ('charging', 'reversing', 'approved', 'declined', 'reversed', 'refused')),
                    masked_pan TEXT NOT NULL,
                    transaction_identifier TEXT NOT NULL,
                    received_at INTEGER NOT NULL,
                    decided_at INTEGER,
                    answer_status INTEGER,
                    answer TEXT,
                    CHECK ((answer IS NULL) = (answer_status IS NULL))
                ) STRICT;
                CREATE INDEX order_payments_by_order ON order_payments (order_id, received_at);
                CREATE UNIQUE INDEX one_live_charge_per_order ON order_payments (order_id)
                    WHERE state IN ('charging', 'reversing', 'approved');
                """)
    ]

    enum OrderState: String, Sendable {
        case open, charging, paid
    }

    enum PaymentState: String, Sendable {
        case charging, reversing, approved, declined, reversed, refused

        /// Whether the payment has its final answer on record.
        var isFinal: Bool { [.approved, .declined, .reversed, .refused].contains(self) }
    }

    struct Order: Sendable {
        let orderID: String
        let item: String
        let amount: Money
        let applicationData: [UInt8]
        let createdAt: Date
        let state: OrderState
        let chargeAttempts: Int
        let fulfilment: String?
    }

    struct Payment: Sendable {
        let transactionID: String
        let orderID: String
        let tokenHash: [UInt8]
        let idempotencyKey: String
        let state: PaymentState
        let maskedPAN: String
        let transactionIdentifier: String
        let receivedAt: Date
        let answerStatus: Int?
        let answer: String?
    }

    static func insert(_ order: Order, in db: Database) throws {
        try db.execute(
            """
            INSERT INTO orders (order_id, item, amount_minor, currency, application_data, created_at, state)
            VALUES (?, ?, ?, ?, ?, ?, 'open')
            """,
            [
                .text(order.orderID), .text(order.item), .integer(order.amount.minorUnits),
                .text(order.amount.currency.code), .blob(order.applicationData), .milliseconds(order.createdAt),
            ])
    }

    static func order(_ orderID: String, in db: Database) throws -> Order? {
        try db.queryFirst(
            """
            SELECT order_id, item, amount_minor, currency, application_data, created_at, state, charge_attempts,
                   fulfilment
            FROM orders WHERE order_id = ?
            """, [.text(orderID)]
        ) { row in
            guard let state = OrderState(rawValue: try row.string(6)) else {
                throw MerchantServerError(.internalFailure, "an order row has an unknown state")
            }
            return Order(
                orderID: try row.string(0), item: try row.string(1),
                amount: try Money(minorUnits: try row.int64(2), currency: try Currency(try row.string(3))),
                applicationData: try row.blob(4), createdAt: try row.date(5), state: state,
                chargeAttempts: try row.int(7), fulfilment: try row.optionalString(8))
        }
    }

    private static let paymentColumns = """
        SELECT transaction_id, order_id, token_hash, idempotency_key, state, masked_pan, transaction_identifier,
               received_at, answer_status, answer
        FROM order_payments
        """

    static func payment(transactionID: String, in db: Database) throws -> Payment? {
        try db.queryFirst(paymentColumns + " WHERE transaction_id = ?", [.text(transactionID)], payment(from:))
    }

    /// The order's latest payment (the live one if any, else the last submitted).
    static func latestPayment(orderID: String, in db: Database) throws -> Payment? {
        // PostgreSQL has no rowid: there, two payments received in the same instant are told apart by transaction ID.
        let tieBreak = db.isPostgreSQL ? "transaction_id" : "rowid"
        return try db.queryFirst(
            paymentColumns + " WHERE order_id = ? ORDER BY received_at DESC, \(tieBreak) DESC LIMIT 1",
            [.text(orderID)], payment(from:))
    }

    /// Payments left `charging` or `reversing` (by a process that stopped before the outcome).
    static func unresolvedPayments(in db: Database) throws -> [Payment] {
        try db.query(paymentColumns + " WHERE state IN ('charging', 'reversing')", [], payment(from:))
    }

    private static func payment(from row: Row) throws -> Payment {
        guard let state = PaymentState(rawValue: try row.string(4)) else {
            throw MerchantServerError(.internalFailure, "a payment row has an unknown state")
        }
        let status = try row.optionalInt64(8)
        return Payment(
            transactionID: try row.string(0), orderID: try row.string(1), tokenHash: try row.blob(2),
            idempotencyKey: try row.string(3), state: state, maskedPAN: try row.string(5),
            transactionIdentifier: try row.string(6), receivedAt: try row.date(7), answerStatus: status.map(Int.init),
            answer: try row.optionalString(9))
    }
}
