public import CardBasics
import Foundation
public import Issuer
public import NetworkAuthorizationAPI
public import OrchardCrypto

import let OrchardLogging.cardNumberShapedKeyMessage
import func OrchardLogging.containsCardNumberShape

/// An authorization as a terminal or a merchant server sends it to the acquirer.
public struct AcquirerAuthorizationRequest: Hashable, Sendable {
    /// Where the request comes from; it fixes the idempotency key.
    public enum Origin: Hashable, Sendable, Codable {
        /// A contactless terminal: the terminal ID and the system trace audit number (STAN, six digits)
        /// identify the transaction.
        case terminal(terminalID: String, systemTraceAuditNumber: String)
        /// A merchant server (in-app or web payment) with its own idempotency key.
        case merchantServer(idempotencyKey: String)
    }

    public let origin: Origin
    public let merchantID: String
    /// The DPAN from the device (NFC) or from the decrypted payment token.
    public let pan: PrimaryAccountNumber
    public let expiry: CardExpiry?
    public let amount: Money
    public let channel: PaymentChannel
    public let cryptogram: CryptogramSubmission?
    /// The Apple-style merchant ID (`merchant.…`) an in-app or web payment is for: required from a merchant
    /// server, and refused unless the merchant's account may charge for it
    /// (``Acquirer/allowAppleMerchantID(_:forMerchant:)``).
    public let appleMerchantID: String?

    public init(
        origin: Origin, merchantID: String, pan: PrimaryAccountNumber, expiry: CardExpiry?, amount: Money,
        channel: PaymentChannel, cryptogram: CryptogramSubmission?, appleMerchantID: String? = nil
    ) {
        self.origin = origin
        self.merchantID = merchantID
        self.pan = pan
        self.expiry = expiry
        self.amount = amount
        self.channel = channel
        self.cryptogram = cryptogram
        self.appleMerchantID = appleMerchantID
    }
}

/// The acquirer: merchant accounts, authorization requests from terminals and merchant servers, routed to
/// the card network.
///
/// Each request is idempotent: terminal ID + STAN, or the merchant's key. A retry gets the first result
/// and never a second authorization; the network transaction ID is derived from the key, so even a retry
/// after a crash between the network's answer and the acquirer's record reaches the network's stored
/// answer. The acquirer keeps the card number only masked.
public actor Acquirer {
    public nonisolated let acquirerID: String
    let store: any AcquirerStore
    let network: any AcquiringNetwork
    let clock: any WallClock
    let random: any RandomSource
    let serializer = KeyedSerializer()
    /// Told when an authorization's result is recorded (crash tests); nil in a deployment.
    let probe: (any AuthorizationProbe)?

    public init(
        acquirerID: String, store: any AcquirerStore, network: any AcquiringNetwork,
        clock: any WallClock = SystemClock(), random: any RandomSource = SystemRandom(),
        authorizationProbe: (any AuthorizationProbe)? = nil
    ) {
        self.acquirerID = acquirerID
        self.store = store
        self.network = network
        self.clock = clock
        self.random = random
        self.probe = authorizationProbe
    }

    /// Opens a merchant account.
    public func registerMerchant(_ merchant: MerchantAccount) async throws {
        for field in [merchant.merchantID] + Array(merchant.terminalIDs) {
            try Self.validateIdentifier(field, "merchant or terminal ID")
        }
        guard Self.isDigits(merchant.categoryCode, count: 4), Self.isDigits(merchant.countryCode, count: 3) else {
            throw AcquirerError(.invalidRequest, "a category code is 4 digits and a country code 3 digits")
        }
        guard try await store.merchant(id: merchant.merchantID) == nil else {
            throw AcquirerError(.duplicate, "a merchant with this identifier already exists")
        }
        try await store.saveMerchant(merchant)
    }

    /// Lets the account `merchantID` charge in-app and web payments made for `appleMerchantID` (`merchant.` and
    /// a reverse-DNS name). Allowing it again is a no-op. Throws ``AcquirerError/Code/unknownMerchant`` for no
    /// such account, ``AcquirerError/Code/duplicate`` when another account already charges for it (one Apple
    /// merchant ID, one account: otherwise that account could charge this merchant's tokens), and
    /// ``AcquirerError/Code/invalidRequest`` for a malformed ID; nothing is stored then.
    public func allowAppleMerchantID(_ appleMerchantID: String, forMerchant merchantID: String) async throws {
        try Self.validateAppleMerchantID(appleMerchantID)
        guard try await store.merchant(id: merchantID) != nil else {
            throw AcquirerError(.unknownMerchant, "no merchant account with this identifier")
        }
        switch try await store.merchantID(forAppleMerchantID: appleMerchantID) {
        case merchantID: return
        case nil: try await store.saveAppleMerchantID(appleMerchantID, merchantID: merchantID)
        case _?: throw AcquirerError(.duplicate, "another merchant account already charges for this merchant ID")
        }
    }

    /// Changes a merchant's status (suspend, reactivate).
    public func setMerchantStatus(_ status: MerchantAccount.Status, merchantID: String) async throws {
        guard var merchant = try await store.merchant(id: merchantID) else {
            throw AcquirerError(.unknownMerchant, "no merchant account with this identifier")
        }
        merchant.status = status
        try await store.saveMerchant(merchant)
    }

    /// Authorizes a payment through the network. Returns the result (approved or declined) or throws for
    /// a request the acquirer refuses before routing it.
    public func authorize(_ request: AcquirerAuthorizationRequest) async throws -> AcquirerAuthorizationResult {
        let idempotencyKey = try Self.idempotencyKey(request)
        let fingerprint = Self.fingerprint(request)
        await serializer.acquire(idempotencyKey)
        defer { serializer.release(idempotencyKey) }
        if let previous = try await store.authorization(idempotencyKey: idempotencyKey) {
            guard previous.requestFingerprint == fingerprint else {
                throw AcquirerError(.idempotencyConflict, "this idempotency key was used for a different payment")
            }
            return previous.result
        }
        // Its reversal came first: declined without asking the network, and kept as the key's answer.
        if try await store.reversal(idempotencyKey: idempotencyKey) != nil {
            let result = reversedFirstResult(request, merchantID: request.merchantID)
            try await store.saveAuthorization(
                AcquirerAuthorizationRecord(
                    idempotencyKey: idempotencyKey, requestFingerprint: fingerprint, result: result))
            return result
        }
        guard let merchant = try await store.merchant(id: request.merchantID) else {
            throw AcquirerError(.unknownMerchant, "no merchant account with this identifier")
        }
        guard merchant.status == .active else { throw AcquirerError(.merchantNotActive, "the merchant is suspended") }
        switch request.origin {
        case .terminal(let terminalID, _):
            guard merchant.terminalIDs.contains(terminalID) else {
                throw AcquirerError(.unknownTerminal, "the terminal is not registered to this merchant")
            }
            guard [.contactless, .magneticStripe, .manualEntry].contains(request.channel) else {
                throw AcquirerError(.invalidRequest, "a terminal sends card-present payments only")
            }
        case .merchantServer:
            guard [.inApp, .web].contains(request.channel) else {
                throw AcquirerError(.invalidRequest, "a merchant server sends in-app or web payments only")
            }
            guard let appleMerchantID = request.appleMerchantID else {
                throw AcquirerError(.invalidRequest, "an in-app or web payment names its Apple merchant ID")
            }
            guard try await store.merchantID(forAppleMerchantID: appleMerchantID) == merchant.merchantID else {
                throw AcquirerError(
                    .merchantIDNotAllowed, "this merchant account may not charge for the payment's merchant ID")
            }
        }
        let networkRequest = NetworkAuthorizationAPI.AuthorizationRequest(
            acquirerID: acquirerID, transactionID: Self.networkTransactionID(for: idempotencyKey),
            pan: request.pan.digits,
            expiry: request.expiry.map { NetworkAuthorizationAPI.Expiry(year: $0.year, month: $0.month) },
            amount: Self.networkMoney(request.amount), channel: request.channel.rawValue,
            merchant: NetworkAuthorizationAPI.Merchant(
                merchantID: merchant.merchantID, name: merchant.name, categoryCode: merchant.categoryCode,
                countryCode: merchant.countryCode, appleMerchantID: request.appleMerchantID),
            cryptogram: request.cryptogram, transmittedAt: clock.now())
        // Sent from here on: if no result follows (the network did not answer, or this process stopped) and the
        // client never asks again, reconciliation reverses it (``reconcile(sentBefore:)``).
        try await store.savePendingAuthorization(
            AcquirerPendingAuthorization(
                idempotencyKey: idempotencyKey, origin: request.origin, merchantID: merchant.merchantID,
                maskedPAN: request.pan.masked, amount: request.amount, sentAt: clock.now()))
        let answer: NetworkAuthorizationAPI.AuthorizationAnswer
        do {
            answer = try await network.authorize(networkRequest)
        } catch {
            throw AcquirerError(.networkUnavailable, "the network did not answer; retry with the same key")
        }
        let result = AcquirerAuthorizationResult(
            authorizationID: "auth_" + Self.hex(random.bytes(12)), merchantID: merchant.merchantID,
            maskedPAN: request.pan.masked, amount: request.amount,
            responseCode: ResponseCode(rawValue: answer.responseCode),
            approvalCode: answer.approvalCode, declineReason: answer.declineReason, decidedAt: clock.now())
        try await store.saveAuthorization(
            AcquirerAuthorizationRecord(idempotencyKey: idempotencyKey, requestFingerprint: fingerprint, result: result)
        )
        await probe?.reached(.acquirerAnswerRecorded, transactionID: networkRequest.transactionID)
        return result
    }

    // MARK: - Helpers

    static func idempotencyKey(_ request: AcquirerAuthorizationRequest) throws(AcquirerError) -> String {
        try idempotencyKey(origin: request.origin, merchantID: request.merchantID)
    }

    static func idempotencyKey(
        origin: AcquirerAuthorizationRequest.Origin, merchantID: String
    ) throws(AcquirerError) -> String {
        try validateIdentifier(merchantID, "merchant ID")
        switch origin {
        case .terminal(let terminalID, let stan):
            try validateIdentifier(terminalID, "terminal ID")
            guard isDigits(stan, count: 6) else { throw AcquirerError(.invalidRequest, "a STAN is six digits") }
            return "terminal:" + terminalID + ":" + stan
        case .merchantServer(let key):
            try validateIdentifier(key, "idempotency key")
            // Keys are stored in clear; one that could hold a card number is refused.
            guard !containsCardNumberShape(key) else {
                throw AcquirerError(.invalidRequest, cardNumberShapedKeyMessage)
            }
            return "merchant:" + merchantID + ":" + key
        }
    }

    /// 32 hex digits of SHA-256 over the idempotency key: the same key always reaches the same network
    /// transaction.
    package static func networkTransactionID(for idempotencyKey: String) -> String {
        hex(SHA256.hash(Array(idempotencyKey.utf8)).prefix(16))
    }

    /// SHA-256 over the request's fields with the card number masked: the acquirer stores no full PAN,
    /// not even as an unkeyed hash (a 16-digit PAN with a known BIN is cheap to find from its hash).
    static func fingerprint(_ request: AcquirerAuthorizationRequest) -> String {
        var fields = [
            request.merchantID, request.pan.masked, request.expiry?.yymm ?? "", String(request.amount.minorUnits),
            request.amount.currency.numericString, request.channel.rawValue,
        ]
        // Only when present, so that the fingerprints of card-present requests stay as they were.
        if let appleMerchantID = request.appleMerchantID { fields.append(appleMerchantID) }
        if let cryptogram = request.cryptogram {
            fields += [
                cryptogram.kind.rawValue, hex(cryptogram.cryptogram), String(cryptogram.applicationTransactionCounter),
                hex(cryptogram.transactionData),
            ]
        }
        return hex(SHA256.hash(Array(fields.joined(separator: "\u{1F}").utf8)))
    }

    /// The amount as the network contract carries it.
    static func networkMoney(_ amount: Money) -> NetworkAuthorizationAPI.Money {
        NetworkAuthorizationAPI.Money(minorUnits: amount.minorUnits, currency: amount.currency.numericString)
    }

    static func validateIdentifier(_ value: String, _ name: String) throws(AcquirerError) {
        let bytes = Array(value.utf8)
        guard (1...64).contains(bytes.count), bytes.allSatisfy({ (0x21...0x7E).contains($0) && $0 != 0x3A }) else {
            throw AcquirerError(.invalidRequest, "a \(name) is 1 to 64 printable ASCII characters without ':'")
        }
    }

    /// `merchant.` and a reverse-DNS name: letters, digits, `.`, `-` and `_`, at most 128 characters.
    static func validateAppleMerchantID(_ value: String) throws(AcquirerError) {
        let bytes = Array(value.utf8)
        guard bytes.count <= 128, value.hasPrefix("merchant."), bytes.count > 9,
            bytes.allSatisfy({ byte in
                (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                    || byte == 0x2E || byte == 0x2D || byte == 0x5F
            })
        else {
            throw AcquirerError(
                .invalidRequest, "an Apple merchant ID is merchant.<reverse DNS>: letters, digits, '.', '-', '_'")
        }
    }

    static func isDigits(_ value: String, count: Int) -> Bool {
        let bytes = Array(value.utf8)
        return bytes.count == count && bytes.allSatisfy { (0x30...0x39).contains($0) }
    }

    /// Lower-case hex, as the acquirer's identifiers and fingerprints have always been written.
    static func hex(_ bytes: some Sequence<UInt8>) -> String { Hex.encode(bytes, lowercase: true) }
}
