internal import CBenchmarks
internal import COpenSSL
internal import Foundation
internal import OrchardCrypto

/// `orchard bench crypto`: OrchardCrypto's primitives against the same EVP call sequences in C
/// (`Sources/CBenchmarks`), on the same keys and buffers, with a fresh context per operation on both sides.
public enum CryptoBenchmarks {
    /// The ratio the issue requires for ECDH, ECDSA verification and AES-GCM on 1 KB.
    public static let requiredRatio = 0.90

    public static let suite = BenchmarkSuite(
        name: "crypto",
        summary: "OrchardCrypto and OrchardX509 against the same OpenSSL calls in C "
            + "(P-256, AES-GCM, SHA, HMAC, HKDF, RSA, X.509, CMS)"
    ) {
        try figures()
    }

    /// Makes every figure (generates and parses the keys they use).
    public static func figures() throws -> [BenchmarkFigure] {
        try [
            ecdh(), ecdsaVerify(), ecdsaSign(), aesGCMSeal(), aesGCMOpen(), sha256(), hmac(), hkdf(), rsaOAEPDecrypt(),
        ] + X509Figures.figures()
    }

    /// 1 KB of deterministic data, the payload of the symmetric figures.
    static let kilobyte: [UInt8] = InsecureDeterministicRandom(seed: Array("orchard bench".utf8)).bytes(1024)
    static let zeroIV = [UInt8](repeating: 0, count: 16)

    static func ecdh() throws -> BenchmarkFigure {
        // Both keys go through their encodings first: the figure measures agreement on parsed keys.
        let generated = try P256.KeyAgreement.PrivateKey()
        let key = try P256.KeyAgreement.PrivateKey(derRepresentation: generated.derRepresentation.unsafeCopyOfBytes())
        let peer = try P256.KeyAgreement.PublicKey(
            x963Representation: P256.KeyAgreement.PrivateKey().publicKey.x963Representation)
        let raw: @Sendable (Int) throws -> [UInt8] = { iterations in
            var out = [UInt8](repeating: 0, count: 32)
            try ok(orchard_bench_ecdh(key.impl.key.pointer, peer.impl.key.pointer, &out, iterations), "ECDH")
            return out
        }
        return BenchmarkFigure(
            name: "ECDH P-256 (parsed keys)", minimumRatio: requiredRatio,
            swift: { iterations in
                for _ in 0..<iterations { _ = try key.sharedSecretFromKeyAgreement(with: peer) }
            },
            raw: { _ = try raw($0) },
            crossCheck: {
                try same(try key.sharedSecretFromKeyAgreement(with: peer).unsafeCopyOfBytes(), try raw(1), "ECDH")
            })
    }

    static func ecdsaVerify() throws -> BenchmarkFigure {
        let signer = try P256.Signing.PrivateKey()
        let key = try P256.Signing.PublicKey(derRepresentation: signer.publicKey.derRepresentation)
        let message = kilobyte
        let signature = try P256.Signing.ECDSASignature(
            derRepresentation: signer.signature(for: message).derRepresentation)
        let der = signature.derRepresentation
        let raw: @Sendable (Int) throws -> Void = { iterations in
            try ok(
                orchard_bench_ecdsa_verify(
                    Fetched.sha256, key.impl.key.pointer, der, der.count, message, message.count, iterations),
                "ECDSA verification")
        }
        return BenchmarkFigure(
            name: "ECDSA P-256 verify (parsed key, DER, 1 KB)", minimumRatio: requiredRatio,
            swift: { iterations in
                for _ in 0..<iterations {
                    guard key.isValidSignature(signature, for: message) else {
                        throw BenchmarkError(.operationFailed, "ECDSA verification failed")
                    }
                }
            },
            raw: raw,
            crossCheck: { try raw(1) })
    }

    static func ecdsaSign() throws -> BenchmarkFigure {
        let key = try P256.Signing.PrivateKey(
            derRepresentation: P256.Signing.PrivateKey().derRepresentation.unsafeCopyOfBytes())
        let message = kilobyte
        let raw: @Sendable (Int) throws -> [UInt8] = { iterations in
            var signature = [UInt8](repeating: 0, count: 80)
            var length = signature.count
            try ok(
                orchard_bench_ecdsa_sign(
                    Fetched.sha256, key.impl.key.pointer, message, message.count, &signature, &length, iterations),
                "ECDSA signing")
            return Array(signature[..<length])
        }
        return BenchmarkFigure(
            name: "ECDSA P-256 sign (1 KB)",
            swift: { iterations in
                for _ in 0..<iterations { _ = try key.signature(for: message) }
            },
            raw: { _ = try raw($0) },
            crossCheck: {
                // Signatures are randomized: each side's must verify under the Swift API.
                let signatures = [try raw(1), try key.signature(for: message).derRepresentation]
                for der in signatures {
                    let signature = try P256.Signing.ECDSASignature(derRepresentation: der)
                    guard key.publicKey.isValidSignature(signature, for: message) else {
                        throw BenchmarkError(.mismatch, "an ECDSA signature from the benchmark does not verify")
                    }
                }
            })
    }

    static func aesGCMSeal() throws -> BenchmarkFigure {
        let keyBytes = SystemRandom().bytes(32)
        let key = SymmetricKey(data: keyBytes)
        let plaintext = kilobyte
        let iv = zeroIV
        let raw: @Sendable (Int) throws -> [UInt8] = { iterations in
            var out = [UInt8](repeating: 0, count: plaintext.count)
            var tag = [UInt8](repeating: 0, count: 16)
            try ok(
                orchard_bench_aes_gcm_seal(
                    Fetched.aes256GCM, keyBytes, iv, Int32(iv.count), plaintext, Int32(plaintext.count), &out, &tag,
                    iterations),
                "AES-GCM seal")
            return out + tag
        }
        return BenchmarkFigure(
            name: "AES-256-GCM seal 1 KB (16-byte zero IV)", minimumRatio: requiredRatio,
            swift: { iterations in
                for _ in 0..<iterations { _ = try AES.GCM.seal(plaintext, using: key, iv: iv) }
            },
            raw: { _ = try raw($0) },
            crossCheck: {
                try same(try AES.GCM.seal(plaintext, using: key, iv: iv).combined, try raw(1), "AES-GCM seal")
            })
    }

    static func aesGCMOpen() throws -> BenchmarkFigure {
        let keyBytes = SystemRandom().bytes(32)
        let key = SymmetricKey(data: keyBytes)
        let iv = zeroIV
        let box = try AES.GCM.seal(kilobyte, using: key, iv: iv)
        let ciphertext = box.ciphertext
        let tag = box.tag
        let raw: @Sendable (Int) throws -> [UInt8] = { iterations in
            var out = [UInt8](repeating: 0, count: ciphertext.count)
            try ok(
                orchard_bench_aes_gcm_open(
                    Fetched.aes256GCM, keyBytes, iv, Int32(iv.count), ciphertext, Int32(ciphertext.count), tag, &out,
                    iterations),
                "AES-GCM open")
            return out
        }
        return BenchmarkFigure(
            name: "AES-256-GCM open 1 KB (16-byte zero IV)", minimumRatio: requiredRatio,
            swift: { iterations in
                for _ in 0..<iterations { _ = try AES.GCM.open(box, using: key, iv: iv) }
            },
            raw: { _ = try raw($0) },
            crossCheck: { try same(try AES.GCM.open(box, using: key, iv: iv), try raw(1), "AES-GCM open") })
    }

    static func sha256() throws -> BenchmarkFigure {
        let data = kilobyte
        let raw: @Sendable (Int) throws -> [UInt8] = { iterations in
            var out = [UInt8](repeating: 0, count: 32)
            try ok(orchard_bench_digest(Fetched.sha256, data, data.count, &out, iterations), "SHA-256")
            return out
        }
        return BenchmarkFigure(
            name: "SHA-256 1 KB",
            swift: { iterations in
                for _ in 0..<iterations { _ = SHA256.hash(data) }
            },
            raw: { _ = try raw($0) },
            crossCheck: { try same(SHA256.hash(data), try raw(1), "SHA-256") })
    }

    static func hmac() throws -> BenchmarkFigure {
        let keyBytes = SystemRandom().bytes(32)
        let key = SymmetricKey(data: keyBytes)
        let data = kilobyte
        let raw: @Sendable (Int) throws -> [UInt8] = { iterations in
            var out = [UInt8](repeating: 0, count: 32)
            try ok(
                orchard_bench_hmac(
                    Fetched.hmac, ParamName.sha256, keyBytes, keyBytes.count, data, data.count, &out, out.count,
                    iterations),
                "HMAC")
            return out
        }
        return BenchmarkFigure(
            name: "HMAC-SHA256 1 KB",
            swift: { iterations in
                for _ in 0..<iterations { _ = HMAC<SHA256>.authenticationCode(for: data, using: key) }
            },
            raw: { _ = try raw($0) },
            crossCheck: { try same(HMAC<SHA256>.authenticationCode(for: data, using: key), try raw(1), "HMAC") })
    }

    static func hkdf() throws -> BenchmarkFigure {
        let random = SystemRandom()
        let ikmBytes = random.bytes(32)
        let ikm = SymmetricKey(data: ikmBytes)
        let salt = random.bytes(32)
        let info = Array("orchard bench hkdf".utf8)
        let raw: @Sendable (Int) throws -> [UInt8] = { iterations in
            var out = [UInt8](repeating: 0, count: 32)
            try ok(
                orchard_bench_hkdf(
                    Fetched.hkdf, ParamName.sha256, ikmBytes, ikmBytes.count, salt, salt.count, info, info.count, &out,
                    out.count, iterations),
                "HKDF")
            return out
        }
        let swift: @Sendable () throws -> SymmetricKey = {
            try HKDF.deriveKey(inputKeyMaterial: ikm, salt: salt, info: info, outputByteCount: 32)
        }
        return BenchmarkFigure(
            name: "HKDF-SHA256 (32-byte key, salt, output)",
            swift: { iterations in
                for _ in 0..<iterations { _ = try swift() }
            },
            raw: { _ = try raw($0) },
            crossCheck: { try same(try swift().bytes.unsafeCopyOfBytes(), try raw(1), "HKDF") })
    }

    static func rsaOAEPDecrypt() throws -> BenchmarkFigure {
        let generated = try RSA.PrivateKey(keySize: 2048)
        let key = try RSA.PrivateKey(derRepresentation: generated.derRepresentation.unsafeCopyOfBytes())
        let secret = SystemRandom().bytes(16)
        let ciphertext = try key.publicKey.encrypt(secret)
        let raw: @Sendable (Int) throws -> [UInt8] = { iterations in
            var out = [UInt8](repeating: 0, count: 256)
            var length = out.count
            try ok(
                orchard_bench_rsa_oaep_decrypt(
                    key.key.pointer, Fetched.sha256, Fetched.sha256, ciphertext, ciphertext.count, &out, &length,
                    iterations),
                "RSA-OAEP decryption")
            return Array(out[..<length])
        }
        return BenchmarkFigure(
            name: "RSA-2048 OAEP-SHA256 decrypt (MGF1-SHA256)",
            swift: { iterations in
                for _ in 0..<iterations { _ = try key.decrypt(ciphertext) }
            },
            raw: { _ = try raw($0) },
            crossCheck: {
                try same(try key.decrypt(ciphertext).unsafeCopyOfBytes(), secret, "RSA-OAEP")
                try same(try raw(1), secret, "RSA-OAEP raw")
            })
    }

    private static func ok(_ rc: Int32, _ what: String) throws {
        guard rc == 1 else {
            let queue = drainOpenSSLErrors()
            throw BenchmarkError(
                .operationFailed, "\(what) failed in the C baseline (\(queue.joined(separator: "; ")))")
        }
    }

    private static func same(_ swift: [UInt8], _ raw: [UInt8], _ what: String) throws {
        guard swift == raw else {
            throw BenchmarkError(.mismatch, "\(what): the Swift API and the C baseline computed different results")
        }
    }
}
