public import Foundation

/// Where a transaction stands in the terminal's journal.
public enum TransactionState: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    /// The STAN is taken; the tap is in progress.
    case started
    /// The authorization request went out; its answer is not recorded yet (unknown if the terminal stops now).
    case sent
    /// Approved by the issuer.
    case approved
    /// Declined: by the issuer or network (a response code), by the card, or because no card answered.
    case declined
    /// No answer came; the reversal is not confirmed yet (sent again at the next start).
    case reversalPending = "reversal-pending"
    /// No answer came and the acquirer confirmed the reversal.
    case reversed
    /// The terminal stopped during the tap, before any request went out: nothing to undo.
    case interrupted

    /// Whether the acquirer may hold an authorization the terminal does not know the outcome of.
    public var needsReversal: Bool { self == .sent || self == .reversalPending }

    public var description: String { rawValue }
}

/// One line of the terminal's journal. The card number appears only masked (first six, last four digits of
/// the DPAN); the terminal never sees an FPAN.
public struct TransactionRecord: Sendable, Hashable, Codable {
    /// The store's identifier of the line.
    public let id: Int64
    public let terminalID: String
    /// Six digits.
    public let systemTraceAuditNumber: String
    public let startedAt: Date
    public var updatedAt: Date
    public let amountMinorUnits: Int64
    /// ISO 4217 alphabetic.
    public let currency: String
    public var state: TransactionState
    /// `phone` or `watch`.
    public var deviceKind: String?
    /// The DPAN masked: `476173******0119`.
    public var maskedPAN: String?
    /// `visa` or `mastercard`.
    public var scheme: String?
    public var applicationTransactionCounter: Int?
    public var responseCode: String?
    public var approvalCode: String?
    public var reason: String?
    /// Authorization attempts sent (retries share the STAN).
    public var attempts: Int

    public init(
        id: Int64, terminalID: String, systemTraceAuditNumber: String, startedAt: Date, amountMinorUnits: Int64,
        currency: String, state: TransactionState = .started
    ) {
        self.id = id
        self.terminalID = terminalID
        self.systemTraceAuditNumber = systemTraceAuditNumber
        self.startedAt = startedAt
        updatedAt = startedAt
        self.amountMinorUnits = amountMinorUnits
        self.currency = currency
        self.state = state
        attempts = 0
    }

    private enum CodingKeys: String, CodingKey {
        case id, terminalID = "terminalId", systemTraceAuditNumber = "stan", startedAt, updatedAt, amountMinorUnits
        case currency, state, deviceKind, maskedPAN = "maskedPan", scheme
        case applicationTransactionCounter = "atc", responseCode, approvalCode, reason, attempts
    }
}

/// The terminal's persistent state: its settings, the STAN counter, and the journal.
///
/// ``begin(terminalID:amountMinorUnits:currency:startedAt:)`` takes the next STAN and writes the journal
/// line in one durable step, so a STAN is never handed out twice, even across a crash.
public protocol TerminalStore: Sendable {
    /// The terminal with `id`, or nil.
    func terminal(_ id: String) async throws -> TerminalSettings?
    /// Every terminal, by ID.
    func terminals() async throws -> [TerminalSettings]
    /// Adds a terminal (STANs start at 000001) or replaces the settings of an existing one.
    func saveTerminal(_ settings: TerminalSettings) async throws
    /// Takes the next STAN of `terminalID` (000001 to 999999, then 000001 again) and records a transaction.
    func begin(
        terminalID: String, amountMinorUnits: Int64, currency: String, startedAt: Date
    ) async throws -> TransactionRecord
    /// Stores the record's new state.
    func update(_ record: TransactionRecord) async throws
    /// The last `limit` transactions of `terminalID`, newest first.
    func transactions(terminalID: String, limit: Int) async throws -> [TransactionRecord]
    /// The transactions of `terminalID` that are not finished (started, sent, reversal pending), oldest first.
    func unresolved(terminalID: String) async throws -> [TransactionRecord]
}

/// A terminal store in memory, for tests and simulations.
public actor InMemoryTerminalStore: TerminalStore {
    private var settings: [String: TerminalSettings] = [:]
    private var nextSTAN: [String: Int] = [:]
    private var records: [TransactionRecord] = []

    public init() {}

    public func terminal(_ id: String) -> TerminalSettings? { settings[id] }

    public func terminals() -> [TerminalSettings] { settings.values.sorted { $0.terminalID < $1.terminalID } }

    public func saveTerminal(_ settings: TerminalSettings) {
        if self.settings[settings.terminalID] == nil { nextSTAN[settings.terminalID] = 1 }
        self.settings[settings.terminalID] = settings
    }

    public func begin(
        terminalID: String, amountMinorUnits: Int64, currency: String, startedAt: Date
    ) throws -> TransactionRecord {
        guard let stan = nextSTAN[terminalID] else {
            throw TerminalError(.notConfigured, "no terminal \(terminalID)")
        }
        nextSTAN[terminalID] = stan >= 999_999 ? 1 : stan + 1
        let record = TransactionRecord(
            id: Int64(records.count + 1), terminalID: terminalID, systemTraceAuditNumber: STAN.format(stan),
            startedAt: startedAt, amountMinorUnits: amountMinorUnits, currency: currency)
        records.append(record)
        return record
    }

    public func update(_ record: TransactionRecord) throws {
        guard let index = records.firstIndex(where: { $0.id == record.id }) else {
            throw TerminalError(.storeFailure, "no journal line \(record.id)")
        }
        records[index] = record
    }

    public func transactions(terminalID: String, limit: Int) -> [TransactionRecord] {
        Array(records.filter { $0.terminalID == terminalID }.reversed().prefix(limit))
    }

    public func unresolved(terminalID: String) -> [TransactionRecord] {
        records.filter { $0.terminalID == terminalID && ($0.state.needsReversal || $0.state == .started) }
    }
}

/// System trace audit numbers: six digits.
enum STAN {
    static func format(_ value: Int) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, 6 - digits.count)) + digits
    }
}
