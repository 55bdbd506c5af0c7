import EMV
import Foundation
import OrchardCrypto

/// The parties of vector V9, shared by the card, kernel and verifier tests.
enum V9 {
    static let imk = SymmetricKey(data: hex("0123456789ABCDEFFEDCBA9876543210"))
    static let visaPAN = "4895370012345671"
    static let mastercardPAN = "5413330089020011"

    static func masterKey(_ pan: String) throws -> SymmetricKey {
        try EMVKeyDerivation.masterKey(issuerMasterKey: imk, pan: pan, panSequenceNumber: 0)
    }

    static func visaProfile(carriesCDCVMInIAD: Bool = true, priority: UInt8 = 1) throws -> CardApplicationProfile {
        try CardApplicationProfile(
            scheme: .visa, pan: visaPAN, expiry: "2812", masterKey: try masterKey(visaPAN), priority: priority,
            carriesCDCVMInIAD: carriesCDCVMInIAD)
    }

    static func mastercardProfile(
        _ version: CryptogramVersion = .mastercard16, priority: UInt8 = 1
    ) throws
        -> CardApplicationProfile
    {
        try CardApplicationProfile(
            scheme: .mastercard, pan: mastercardPAN, expiry: "2812", masterKey: try masterKey(mastercardPAN),
            cryptogramVersion: version, priority: priority)
    }

    static func card(_ profiles: [CardApplicationProfile], lastATC: UInt16 = 0x29) throws -> ContactlessCard {
        try ContactlessCard(
            applications: profiles.map { CardApplication(profile: $0, atcStore: InMemoryATCStore(lastUsed: lastATC)) })
    }

    static let terminal = TerminalConfiguration(countryCode: 840, currencyCode: 840)

    static func transaction(amount: UInt64 = 15000, un: String = "7A3B9C01") throws -> TransactionParameters {
        TransactionParameters(amount: amount, date: try TransactionDate(yymmdd: "260115"), unpredictableNumber: hex(un))
    }

    /// Runs the reader against `card` after the host authorized it with `method` (nil: no authorization).
    static func run(
        _ card: ContactlessCard, method: CDCVMMethod? = .face, configuration: TerminalConfiguration = terminal,
        transaction: TransactionParameters? = nil
    ) async throws -> TerminalOutcome {
        let link = InProcessCardLink(card: card)
        if let method { await link.authorize(CardholderAuthorization(verifiedBy: method)) }
        return try await TerminalKernel(configuration: configuration).run(
            try transaction ?? Self.transaction(), card: link)
    }
}

/// An ATC store whose writes fail, as a full or broken disk would.
final class FailingATCStore: ATCStore {
    func currentATC() throws(EMVError) -> UInt16 { 7 }
    func incrementATC() throws(EMVError) -> UInt16? { throw EMVError(.storeFailure, "disk full") }
}

/// An ATC store that logs every value it made durable, in order.
final class LoggingATCStore: ATCStore, @unchecked Sendable {
    private let lock = NSLock()
    private var last: UInt16
    private var log: [UInt16] = []

    init(lastUsed: UInt16) { last = lastUsed }

    var persisted: [UInt16] { lock.withLock { log } }
    func currentATC() throws(EMVError) -> UInt16 { lock.withLock { last } }
    func incrementATC() throws(EMVError) -> UInt16? {
        lock.withLock {
            guard last < 0xFFFF else { return nil }
            last += 1
            log.append(last)
            return last
        }
    }
}

extension ContactlessCard {
    /// Sends hex and returns the response as hex.
    mutating func send(_ command: String) -> String {
        process(bytes: hex(command)).map { String(format: "%02X", $0) }.joined()
    }
}

func hexString(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02X", $0) }.joined() }
