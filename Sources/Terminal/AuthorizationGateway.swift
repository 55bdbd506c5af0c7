public import CardBasics
public import EMV
public import Foundation

/// The terminal's connection to its acquirer: online authorizations and reversals.
///
/// Implementations throw ``TerminalError`` with ``TerminalError/Code/gatewayTimedOut`` when a request may
/// have arrived but no answer came (the terminal then retries with the same idempotency key, or reverses),
/// ``TerminalError/Code/gatewayUnreachable`` when it surely did not arrive, and
/// ``TerminalError/Code/gatewayRefused`` when the acquirer refused the request itself. Any other error is
/// treated like a timeout: its outcome is unknown.
public protocol AuthorizationGateway: Sendable {
    func authorize(_ request: AuthorizationRequest) async throws -> AuthorizationResponse
    func reverse(_ request: ReversalRequest) async throws -> ReversalResponse
}

/// An online authorization from the terminal: the card data the kernel read (the DPAN, never an FPAN),
/// the chip data for field 55, and the terminal ID and STAN that make it idempotent.
///
/// The DPAN is a ``PrimaryAccountNumber``: it prints masked through `description`, interpolation and `dump`.
public struct AuthorizationRequest: Sendable, CustomStringConvertible {
    public let terminalID: String
    /// The system trace audit number: six digits, unique per terminal (until it wraps after 999,999).
    public let systemTraceAuditNumber: String
    public let merchantID: String
    public let pan: PrimaryAccountNumber
    /// `YYMM`.
    public let expiry: String
    public let panSequenceNumber: Int
    public let amount: Money
    public let scheme: PaymentScheme
    /// The ARQC (tag 9F26).
    public let cryptogram: [UInt8]
    /// The ATC (tag 9F36).
    public let applicationTransactionCounter: UInt16
    /// Field 55: the chip data the cryptogram covers.
    public let chipData: [UInt8]
    /// ISO 8583 field 22: `07`, contactless chip.
    public let posEntryMode: String
    public let transmittedAt: Date

    public init(
        terminalID: String, systemTraceAuditNumber: String, merchantID: String, pan: PrimaryAccountNumber,
        expiry: String, panSequenceNumber: Int, amount: Money, scheme: PaymentScheme, cryptogram: [UInt8],
        applicationTransactionCounter: UInt16, chipData: [UInt8], posEntryMode: String = "07", transmittedAt: Date
    ) {
        self.terminalID = terminalID
        self.systemTraceAuditNumber = systemTraceAuditNumber
        self.merchantID = merchantID
        self.pan = pan
        self.expiry = expiry
        self.panSequenceNumber = panSequenceNumber
        self.amount = amount
        self.scheme = scheme
        self.cryptogram = cryptogram
        self.applicationTransactionCounter = applicationTransactionCounter
        self.chipData = chipData
        self.posEntryMode = posEntryMode
        self.transmittedAt = transmittedAt
    }

    /// The key that makes the request idempotent at the acquirer: the same terminal ID and STAN always
    /// reach the first answer.
    public var idempotencyKey: String { "terminal-\(terminalID)-\(systemTraceAuditNumber)" }

    public var description: String {
        "authorization \(terminalID)/\(systemTraceAuditNumber) \(scheme) \(pan.masked) \(amount)"
    }
}

/// The acquirer's answer to an authorization.
public struct AuthorizationResponse: Sendable, Hashable, Codable {
    /// ISO 8583 field 39: `00` approves; anything else declines.
    public let responseCode: String
    /// The issuer's approval code (field 38), when approved.
    public let approvalCode: String?
    /// Why a decline, as the network reports it (`cryptogramMismatch`, `insufficientFunds`, ...).
    public let declineReason: String?
    /// The acquirer's identifier of the authorization.
    public let authorizationID: String?

    public init(
        responseCode: String, approvalCode: String? = nil, declineReason: String? = nil, authorizationID: String? = nil
    )
        throws(TerminalError)
    {
        let code = Array(responseCode.utf8)
        guard code.count == 2, code.allSatisfy({ (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) }) else {
            throw TerminalError(.protocolViolation, "a response code is two digits or capital letters")
        }
        for field in [approvalCode, declineReason, authorizationID] {
            if let field, !(1...64).contains(field.utf8.count) || !field.utf8.allSatisfy({ (0x20...0x7E).contains($0) })
            {
                throw TerminalError(.protocolViolation, "an answer field is 1 to 64 printable characters")
            }
        }
        self.responseCode = responseCode
        self.approvalCode = approvalCode
        self.declineReason = declineReason
        self.authorizationID = authorizationID
    }

    public var isApproved: Bool { responseCode == "00" }

    private enum CodingKeys: String, CodingKey {
        case responseCode, approvalCode, declineReason, authorizationID
    }

    /// Decoding applies the same checks as the initializer.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        do {
            try self.init(
                responseCode: try c.decode(String.self, forKey: .responseCode),
                approvalCode: try c.decodeIfPresent(String.self, forKey: .approvalCode),
                declineReason: try c.decodeIfPresent(String.self, forKey: .declineReason),
                authorizationID: try c.decodeIfPresent(String.self, forKey: .authorizationID))
        } catch let error as TerminalError {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.message))
        }
    }
}

/// A reversal of an authorization whose answer never came: the acquirer finds it by terminal ID and STAN
/// and cancels it if it was approved. On the wire it is an `AcquirerAPI.ReversalRequest`.
public struct ReversalRequest: Sendable, Hashable, CustomStringConvertible {
    public let terminalID: String
    /// The STAN of the authorization to reverse.
    public let systemTraceAuditNumber: String
    public let merchantID: String
    public let amountMinorUnits: Int64
    /// ISO 4217 numeric, three digits.
    public let currency: String
    /// `timeout` (no answer) or `recovery` (the terminal stopped before the answer).
    public let reason: String

    public init(
        terminalID: String, systemTraceAuditNumber: String, merchantID: String, amountMinorUnits: Int64,
        currency: String, reason: String
    ) {
        self.terminalID = terminalID
        self.systemTraceAuditNumber = systemTraceAuditNumber
        self.merchantID = merchantID
        self.amountMinorUnits = amountMinorUnits
        self.currency = currency
        self.reason = reason
    }

    /// The same key as the authorization it reverses.
    public var idempotencyKey: String { "terminal-\(terminalID)-\(systemTraceAuditNumber)" }

    public var description: String { "reversal \(terminalID)/\(systemTraceAuditNumber) (\(reason))" }
}

/// The acquirer's answer to a reversal.
public struct ReversalResponse: Sendable, Hashable, Codable {
    /// Whether an authorization was found and cancelled (false: it never arrived; nothing to undo).
    public let reversed: Bool

    public init(reversed: Bool) { self.reversed = reversed }
}
