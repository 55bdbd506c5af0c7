public import EMV
import Foundation
import OrchardCrypto

/// `orchard emv bench`: issuer-side cryptogram verifications per second on one core, and the card applet's own
/// time per contactless transaction, for a Visa-style (CVN 18) and a Mastercard-style (CVN 16) card.
public enum EMVBenchmark {
    /// One scheme's figures.
    public struct Figures: Sendable {
        /// `Visa CVN 18` or `Mastercard CVN 16`.
        public let name: String
        public let scheme: PaymentScheme
        /// Verifications per second when the card key is derived from the IMK each time (the issuer's case).
        public let verificationsFromIMKPerSecond: Double
        /// Verifications per second from the card's master key.
        public let verificationsFromCardKeyPerSecond: Double
        /// The card applet's processing time for one whole transaction's APDUs.
        public let cardMicrosecondsPerTransaction: Double
        public let apdusPerTransaction: Int
    }

    /// The target the slower scheme must meet.
    public static let targetVerificationsPerSecond = 20_000.0

    /// Runs each figure for `seconds` (a release build measures what ships; a debug build the compiler's debug
    /// code).
    public static func run(seconds: Double) async throws -> [Figures] {
        let clock = SystemClock()
        let imk = SymmetricKey(data: Hex.decode("0123456789ABCDEFFEDCBA9876543210")!)
        func measure(_ body: () throws -> Void) throws -> Double {
            var count = 0
            let start = clock.nanoseconds()
            let end = start + UInt64(seconds * 1e9)
            var now = start
            while now < end {
                for _ in 0..<64 { try body() }
                count += 64
                now = clock.nanoseconds()
            }
            return Double(count) / (Double(now - start) / 1e9)
        }
        var figures: [Figures] = []
        let cards: [(scheme: PaymentScheme, pan: String)] = [
            (.visa, "4895370012345671"), (.mastercard, "5413330089020011"),
        ]
        for (scheme, pan) in cards {
            let mk = try EMVKeyDerivation.masterKey(issuerMasterKey: imk, pan: pan, panSequenceNumber: 0)
            let profile = try CardApplicationProfile(scheme: scheme, pan: pan, expiry: "2812", masterKey: mk)
            var card = try ContactlessCard(
                applications: [CardApplication(profile: profile, atcStore: WrappingATCStore())])
            // One transaction's APDUs as the kernel sends them.
            let link = InProcessCardLink(card: card)
            await link.authorize(CardholderAuthorization(verifiedBy: .face))
            var configuration = TerminalConfiguration(countryCode: 840, currencyCode: 840)
            configuration.preferredAID = scheme.aid
            let outcome = try await TerminalKernel(configuration: configuration).run(
                TransactionParameters(amount: 1500, date: try TransactionDate(yymmdd: "260115")), card: link)
            guard let read = outcome.card else {
                throw BenchmarkError(.operationFailed, "the benchmark transaction failed")
            }
            let commands = try outcome.transcript.map { try CommandAPDU(bytes: $0.command) }
            let data = ChipAuthorizationData(read)
            let verifier = CryptogramVerifier()
            let fromIMK = try measure {
                guard try verifier.verify(data, issuerMasterKey: imk, lastSeenATC: nil).isValid else {
                    throw BenchmarkError(.operationFailed, "a cryptogram failed to verify")
                }
            }
            let fromMK = try measure {
                guard try verifier.verify(data, masterKey: mk, lastSeenATC: nil).isValid else {
                    throw BenchmarkError(.operationFailed, "a cryptogram failed to verify")
                }
            }
            let transactions = try measure {
                card.authorize(CardholderAuthorization(verifiedBy: .face))
                for command in commands where card.process(command).statusWord != .success {
                    throw BenchmarkError(.operationFailed, "the card refused a benchmark APDU")
                }
            }
            figures.append(
                Figures(
                    name: "\(scheme.displayName) CVN \(profile.cryptogramVersion.number)", scheme: scheme,
                    verificationsFromIMKPerSecond: fromIMK, verificationsFromCardKeyPerSecond: fromMK,
                    cardMicrosecondsPerTransaction: 1e6 / transactions, apdusPerTransaction: commands.count))
        }
        return figures
    }
}

/// The benchmark's ATC store: it wraps around instead of exhausting, so a long run can repeat transactions.
/// Never for a real card (it reuses counter values).
private final class WrappingATCStore: ATCStore, @unchecked Sendable {
    // @unchecked: the counter is guarded by `lock`.
    private let lock = NSLock()
    private var last: UInt16 = 0

    func currentATC() throws(EMVError) -> UInt16 { lock.withLock { last } }
    func incrementATC() throws(EMVError) -> UInt16? {
        lock.withLock {
            last = last == 0xFFFF ? 1 : last + 1
            return last
        }
    }
}
