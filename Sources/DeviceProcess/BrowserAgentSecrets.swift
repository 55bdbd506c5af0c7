import Foundation
import OrchardCrypto

/// The secrets the browser agent hands its documents' page loads (`POST /v1/secret`): each load gets its own, which
/// names the kind of document and when it was minted, authenticated under a key the agent draws at start.
///
/// Nothing is stored per secret, so no number of page loads can push an open page's secret out (a table of the
/// latest secrets could be flushed by loading pages); a secret expires ``lifetime`` after it was minted, and with
/// the agent's process. What a secret may do is bound to its page load: a web session answers only the frame
/// secret that began it.
struct BrowserAgentSecrets: Sendable {
    enum Kind: UInt8, Sendable { case frame = 1, sheet = 2, screen = 3 }

    /// How long a page load may keep using its secret: a working day, for a checkout page left open.
    static let lifetime: Duration = .seconds(12 * 3600)

    private let key: SymmetricKey
    private let random: any RandomSource
    private let started: ContinuousClock.Instant
    private let now: @Sendable () -> ContinuousClock.Instant

    /// The kind byte, the milliseconds since the agent started when the secret was minted (8 bytes, big-endian) and 8
    /// random bytes, then the first 16 bytes of their HMAC-SHA256: 66 hex digits.
    private static let bodyCount = 17
    private static let macCount = 16

    init(
        random: any RandomSource = SystemRandom(),
        now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }
    ) {
        key = SymmetricKey(bitCount: 256, using: random)
        self.random = random
        self.now = now
        started = now()
    }

    /// A fresh secret for one page load of a document of `kind`.
    func mint(_ kind: Kind) -> String {
        let elapsed = now() - started
        let milliseconds =
            UInt64(max(0, elapsed.components.seconds)) * 1000
            + UInt64(elapsed.components.attoseconds / 1_000_000_000_000_000)
        var body: [UInt8] = [kind.rawValue]
        body += withUnsafeBytes(of: milliseconds.bigEndian, Array.init)
        body += random.bytes(8)
        let mac = HMAC<SHA256>.authenticationCode(for: body, using: key).prefix(Self.macCount)
        return Hex.encode(body + mac, lowercase: true)
    }

    /// The kind of the document `secret` was minted for, if it was minted by this agent and has not expired.
    func kind(of secret: String) -> Kind? {
        guard secret.utf8.count == 2 * (Self.bodyCount + Self.macCount),
            let bytes = Hex.decode(secret)
        else { return nil }
        let body = bytes.prefix(Self.bodyCount)
        guard HMAC<SHA256>.isValidAuthenticationCode(bytes.suffix(Self.macCount), authenticating: body, using: key),
            let kind = Kind(rawValue: body[body.startIndex])
        else { return nil }
        let served = body.dropFirst().prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let age = (now() - started) - .milliseconds(Int64(clamping: served))
        guard age >= .zero, age <= Self.lifetime else { return nil }
        return kind
    }
}
