import Dispatch
import Foundation
import OrchardCrypto
import Testing

/// Pins the behaviour of the fast paths the benchmarks drove: P-256 public keys imported onto a shared
/// group, hex written straight into a string, AES-GCM output buffers resized in place.
@Suite("Hot-path equivalence: P-256 import, hex, AES-GCM buffers")
struct HotPathTests {
    /// The P-256 field prime, big-endian.
    static let fieldPrime = hex("ffffffff00000001000000000000000000000000ffffffffffffffffffffffff")

    @Test func importedPointsAgreeAcrossEncodingsAndECDH() throws {
        let a = try P256.KeyAgreement.PrivateKey()
        let b = try P256.KeyAgreement.PrivateKey()
        let fromX963 = try P256.KeyAgreement.PublicKey(x963Representation: b.publicKey.x963Representation)
        let fromDER = try P256.KeyAgreement.PublicKey(derRepresentation: b.publicKey.derRepresentation)
        let fromPEM = try P256.KeyAgreement.PublicKey(pemRepresentation: b.publicKey.pemRepresentation)
        #expect(fromX963 == b.publicKey && fromDER == b.publicKey && fromPEM == b.publicKey)
        let z = try a.sharedSecretFromKeyAgreement(with: fromX963)
        #expect(z == (try b.sharedSecretFromKeyAgreement(with: a.publicKey)))
        // The imported key verifies signatures made by the matching private key.
        let signer = try P256.Signing.PrivateKey()
        let verifier = try P256.Signing.PublicKey(x963Representation: signer.publicKey.x963Representation)
        let message = Array("orchard".utf8)
        #expect(verifier.isValidSignature(try signer.signature(for: message), for: message))
        #expect(!verifier.isValidSignature(try signer.signature(for: message), for: Array("orcharD".utf8)))
    }

    @Test func invalidPointsAreRejected() throws {
        let valid = try P256.KeyAgreement.PrivateKey().publicKey.x963Representation
        var offCurve = valid
        offCurve[64] ^= 0x01
        var xIsPrime = valid
        xIsPrime.replaceSubrange(1...32, with: Self.fieldPrime)
        var yIsPrime = valid
        yIsPrime.replaceSubrange(33...64, with: Self.fieldPrime)
        var hybrid = valid
        hybrid[0] = 0x06
        let zero = [0x04] + [UInt8](repeating: 0, count: 64)
        let compressed = [0x02] + Array(valid[1...32])
        for bad in [offCurve, xIsPrime, yIsPrime, hybrid, zero, compressed, [0x00], []] {
            expectCryptoError(.invalidKey) { _ = try P256.KeyAgreement.PublicKey(x963Representation: bad) }
            expectCryptoError(.invalidKey) { _ = try P256.Signing.PublicKey(x963Representation: bad) }
        }
        // A valid point still imports after the failures (the shared group is not disturbed).
        #expect(try P256.KeyAgreement.PublicKey(x963Representation: valid).x963Representation == valid)
    }

    @Test func importsFromManyThreadsAgree() throws {
        let keys = try (0..<8).map { _ in try P256.KeyAgreement.PrivateKey() }
        let points = keys.map(\.publicKey.x963Representation)
        let results = Results(count: 64)
        DispatchQueue.concurrentPerform(iterations: 64) { i in
            let point = points[i % points.count]
            results.set(i, (try? P256.KeyAgreement.PublicKey(x963Representation: point))?.x963Representation)
        }
        for i in 0..<64 { #expect(results.get(i) == points[i % points.count]) }
    }

    @Test func hexMatchesFormatForEveryByteAndSequenceKind() {
        let all = [UInt8](0...255)
        let lower = all.map { String(format: "%02x", $0) }.joined()
        #expect(Hex.encode(all, lowercase: true) == lower)
        #expect(Hex.encode(all) == lower.uppercased())
        #expect(Hex.encode(all[16..<32], lowercase: true) == String(lower.dropFirst(32).prefix(32)))
        // A sequence without contiguous storage takes the copying path and gives the same text.
        #expect(Hex.encode((0...255).lazy.map { UInt8($0) }, lowercase: true) == lower)
        #expect(Hex.encode([UInt8]()) == "")
        #expect(Hex.decode(Hex.encode(all)) == all)
    }

    @Test func gcmBuffersShrinkAndGrowWithTheMessage() throws {
        let key = SymmetricKey(data: [UInt8](repeating: 3, count: 32))
        let iv = [UInt8](repeating: 0, count: 16)
        var sealed = [UInt8](repeating: 0xEE, count: 5000)
        var opened = [UInt8](repeating: 0xEE, count: 5000)
        for size in [3000, 16, 0, 1024, 1024, 17] {
            let plaintext = [UInt8]((0..<size).map { UInt8(truncatingIfNeeded: $0 * 7) })
            try AES.GCM.seal(plaintext, using: key, iv: iv, into: &sealed)
            #expect(sealed == (try AES.GCM.seal(plaintext, using: key, iv: iv).combined))
            try AES.GCM.open(combined: sealed, using: key, iv: iv, into: &opened)
            #expect(opened == plaintext)
        }
        // A failed seal leaves no stale ciphertext behind.
        var out = sealed
        expectCryptoError(.invalidParameter) {
            try AES.GCM.seal([1, 2], using: SymmetricKey(data: [1, 2, 3]), iv: iv, into: &out)
        }
        #expect(out.isEmpty)
        out = sealed
        expectCryptoError(.invalidParameter) { try AES.GCM.seal([1, 2], using: key, iv: [], into: &out) }
        #expect(out.isEmpty)
        out = [1, 2, 3]
        expectCryptoError(.invalidParameter) { try AES.GCM.open(combined: sealed, using: key, iv: [], into: &out) }
        #expect(out.isEmpty)
    }
}

/// Slots written from concurrent threads, read after they finish.
private final class Results: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [[UInt8]?]
    init(count: Int) { values = Array(repeating: nil, count: count) }
    func set(_ i: Int, _ value: [UInt8]?) { lock.withLock { values[i] = value } }
    func get(_ i: Int) -> [UInt8]? { lock.withLock { values[i] } }
}
