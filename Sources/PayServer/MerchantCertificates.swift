public import Foundation
public import OrchardCrypto
import OrchardHTTP
public import OrchardStore
import OrchardX509
import PaymentToken

/// One certificate the Pay server issued a merchant, as `orchard merchant certs` lists it.
public struct MerchantCertificateRecord: Sendable, Hashable, Codable {
    /// Upper-case hex.
    public let serial: String
    public let merchantIdentifier: String
    /// `processing` or `identity`.
    public let kind: String
    /// `P-256` or `RSA-2048`.
    public let keyType: String
    public let notAfter: Date
    public let revokedAt: Date?
    /// The processor the merchant delegated a processing certificate to through its portal (nil: its own key).
    public let processor: String?
}

/// Listing and revoking the merchant certificates in `pay.sqlite`, and choosing the processing certificate a
/// token is encrypted to. A revoked or expired certificate is never chosen: the server refuses to encrypt
/// to it.
public final class MerchantCertificates: Sendable {
    private let store: Store
    private let clock: any WallClock

    public init(store: Store, clock: any WallClock) {
        self.store = store
        self.clock = clock
    }

    /// Every certificate of `merchantIdentifier` (all merchants when nil), newest expiry first.
    public func list(merchantIdentifier: String? = nil) async throws -> [MerchantCertificateRecord] {
        try await store.read { db in
            try db.query(
                """
                SELECT serial, merchant_identifier, kind, der, not_after, revoked_at, processor
                FROM merchant_certificates
                WHERE ?1 IS NULL OR merchant_identifier = ?1 ORDER BY merchant_identifier, not_after DESC, serial
                """, [.optional(merchantIdentifier)]
            ) { row in
                let certificate = try Certificate(derEncoded: try row.blob(3))
                // try?: a listing label only: a key that cannot be read is shown as P-256.
                let keyType = (try? certificate.publicKey)?.rsa != nil ? "RSA-2048" : "P-256"
                return MerchantCertificateRecord(
                    serial: try row.string(0), merchantIdentifier: try row.string(1), kind: try row.string(2),
                    keyType: keyType, notAfter: try row.date(4),
                    revokedAt: try row.optionalInt64(5).map { Date(timeIntervalSince1970: Double($0) / 1000) },
                    processor: try row.optionalString(6))
            }
        }
    }

    /// Revokes the certificate with `serial` (hex, any case). Revoking twice keeps the first time.
    public func revoke(serial: String) async throws {
        let now = clock.now()
        let changed = try await store.write { db in
            try db.execute(
                "UPDATE merchant_certificates SET revoked_at = coalesce(revoked_at, ?) WHERE serial = ?",
                [.milliseconds(now), .text(serial.uppercased())])
        }
        guard changed == 1 else { throw PayServerError(.notFound, "no merchant certificate \(serial)") }
    }

    /// Revokes every certificate of `merchantIdentifier` not yet revoked, except those whose DER is in `except`
    /// (the ones just issued to the merchant's new root at a re-key); returns how many it revoked. Revoked, they
    /// are refused on every route and no token is encrypted to them.
    @discardableResult
    public func revokeAll(merchantIdentifier: String, except: Set<[UInt8]>) async throws -> Int {
        let now = clock.now()
        return try await store.write { db in
            let candidates = try db.query(
                "SELECT serial, der FROM merchant_certificates WHERE merchant_identifier = ? AND revoked_at IS NULL",
                [.text(merchantIdentifier)]
            ) { row in (try row.string(0), try row.blob(1)) }
            var revoked = 0
            for (serial, der) in candidates where !except.contains(der) {
                revoked += try db.execute(
                    "UPDATE merchant_certificates SET revoked_at = ? WHERE serial = ? AND revoked_at IS NULL",
                    [.milliseconds(now), .text(serial)])
            }
            return revoked
        }
    }

    /// The processing certificate a token for `merchantIdentifier` is encrypted to at `now`, inside a
    /// transaction: unrevoked, valid now, the latest expiry first (then the latest issued, so a certificate just
    /// issued, such as one delegated to a processor, takes over), P-256 (EC_v1) before RSA (RSA_v1, for a merchant
    /// with only RSA).
    static func processingCertificate(
        for merchantIdentifier: String, at now: Date, in db: Database,
        parse: ([UInt8]) throws -> (Certificate, MerchantProcessingPublicKey) = {
            let certificate = try Certificate(derEncoded: $0)
            return (certificate, try MerchantProcessingPublicKey(processingCertificate: certificate))
        }
    ) throws -> Certificate? {
        let candidates = try db.query(
            """
            SELECT der FROM merchant_certificates
            WHERE merchant_identifier = ? AND kind = 'processing' AND revoked_at IS NULL AND not_after > ?
            ORDER BY not_after DESC, coalesce(issued_at, 0) DESC, serial
            """, [.text(merchantIdentifier), .milliseconds(now)]
        ) { row in try parse(try row.blob(0)) }
        let valid = candidates.filter { $0.0.isValid(at: now) }
        let ec = valid.first { if case .ec = $0.1 { return true } else { return false } }
        return (ec ?? valid.first)?.0
    }
}

/// The Pay server's revoked client certificates: the merchant certificates `orchard merchant certs --revoke` marked
/// (`revoked_at` in `pay.sqlite`), read at each request, so a revocation takes effect at once, on every route, even
/// while the server runs.
///
/// Only the merchant CA's certificates are in that table, so only they can be revoked here: a certificate with
/// another issuer (a device's) is told apart once, by its parsed issuer, and its requests cost no read.
final class MerchantCertificateRevocations: ClientCertificateRevocations {
    let store: Store
    private let merchantCA: Certificate
    private let issuedByMerchantCA = DERMemo<Bool>(capacity: VerifiedKeyCache.capacity)

    init(store: Store, merchantCA: Certificate) {
        self.store = store
        self.merchantCA = merchantCA
    }

    func isRevoked(_ certificate: ClientCertificate) async throws -> Bool {
        try await isRevoked(der: certificate.derRepresentation)
    }

    func isRevoked(der: [UInt8]) async throws -> Bool {
        guard mayBeRevoked(der) else { return false }
        return try await store.read { db in
            // Compared by the whole certificate (serial numbers are unique per CA only); an index of the revoked
            // ones alone answers it (migration 12).
            try db.query("SELECT 1 FROM merchant_certificates WHERE revoked_at IS NOT NULL AND der = ?", [.blob(der)]) {
                _ in true
            }
        }.isEmpty == false
    }

    /// Whether `der` names the merchant CA as its issuer; a certificate that cannot be parsed is looked up too.
    private func mayBeRevoked(_ der: [UInt8]) -> Bool {
        issuedByMerchantCA.value(
            for: der,
            always: {
                // try?: a certificate that does not parse may still be revoked, so it is looked up (true).
                (try? Certificate(derEncoded: der)).map { $0.issuer == merchantCA.subject } ?? true
            })
    }
}
