import Foundation
import OrchardCrypto
import Testing

@Suite("CryptoError")
struct ErrorTests {
    /// OpenSSL's reasons are drained into the error that reports them, so no later error inherits them.
    @Test func openSSLErrorQueueIsDrainedIntoTheError() throws {
        let parseError = #expect(throws: CryptoError.self) {
            _ = try P256.Signing.PrivateKey(derRepresentation: [0x30, 0x03, 0x02, 0x01, 0x01])
        }
        #expect(parseError?.code == .invalidKey)
        #expect(parseError?.openSSLErrors.isEmpty == false)
        // A failure found in Swift right after carries nothing stale.
        let sizeError = #expect(throws: CryptoError.self) {
            _ = try AES.GCM.seal([1], using: SymmetricKey(data: [1, 2, 3]), iv: [0])
        }
        #expect(sizeError?.openSSLErrors == [])
        // An encrypted PEM fails with OpenSSL's reason attached (and without prompting for a passphrase).
        let encrypted = #expect(throws: CryptoError.self) {
            _ = try P256.Signing.PrivateKey(pemRepresentation: CryptoFixtures.string("p256-encrypted.pkcs8.pem"))
        }
        #expect(encrypted?.openSSLErrors.isEmpty == false)
        // A failed verification returns false and leaves nothing behind.
        let key = try P256.Signing.PrivateKey()
        // r = s = 2^256 - 1 is above the group order: OpenSSL queues an error while refusing it.
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: [UInt8](repeating: 0xFF, count: 64))
        #expect(!key.publicKey.isValidSignature(signature, for: [1]))
        let after = #expect(throws: CryptoError.self) {
            _ = try HKDF.deriveKey(
                inputKeyMaterial: SymmetricKey(data: [1]), salt: [UInt8](), info: [UInt8](), outputByteCount: 0)
        }
        #expect(after?.openSSLErrors == [])
    }

    @Test func equalityIsByCodeAndMessagesCarryNoKeyMaterial() throws {
        #expect(CryptoError(.invalidKey, "one") == CryptoError(.invalidKey, "two"))
        #expect(CryptoError(.invalidKey, "one") != CryptoError(.invalidParameter, "one"))
        #expect(Set([CryptoError(.invalidKey, "a"), CryptoError(.invalidKey, "b")]).count == 1)
        #expect("\(CryptoError(.decryptionFailure, "x"))".hasPrefix("decryptionFailure: x"))
        let codes: [CryptoError.Code] = [
            .invalidKey, .invalidSignature, .authenticationFailure, .invalidParameter, .invalidEncoding,
            .decryptionFailure,
            .unsupported, .internalFailure,
        ]
        #expect(Set(codes.map(\.description)).count == codes.count)

        // Failures involving secret bytes name sizes, never the bytes.
        let secret = [UInt8](repeating: 0xC3, count: 20)
        let keyError = #expect(throws: CryptoError.self) {
            _ = try AES.GCM.seal([1], using: SymmetricKey(data: secret), iv: [0])
        }
        let box = try AES.GCM.seal(secret, using: SymmetricKey(bitCount: 128), iv: [0])
        let openError = #expect(throws: CryptoError.self) {
            _ = try AES.GCM.open(box, using: SymmetricKey(bitCount: 128), iv: [0])
        }
        let rawError = #expect(throws: CryptoError.self) { _ = try P256.Signing.PrivateKey(rawRepresentation: secret) }
        for error in [keyError, openError, rawError] {
            let text = "\(error.map { String(describing: $0) } ?? "")"
            #expect(!text.isEmpty)
            #expect(!text.lowercased().contains("c3c3"))
            #expect(!text.contains("195"))  // 0xC3 in decimal
        }
    }

    @Test func pemHelpers() throws {
        let der: [UInt8] = Array(0..<200)
        let pem = pemEncode(der, label: "TEST")
        #expect(pem.hasPrefix("-----BEGIN TEST-----\n") && pem.hasSuffix("-----END TEST-----\n"))
        #expect(pem.split(separator: "\n").allSatisfy { $0.count <= 64 })
        #expect(try pemDecode(pem, label: "TEST") == der)
        // Several blocks with text around them, CRLF line ends and an RFC 1421 header.
        let text =
            "intro\r\n" + pemEncode([1, 2, 3], label: "A").replacingOccurrences(of: "\n", with: "\r\n") + "middle\n"
            + pem.replacingOccurrences(of: "-----BEGIN TEST-----\n", with: "-----BEGIN TEST-----\nProc-Type: 4,NONE\n")
        let blocks = try pemBlocks(text)
        #expect(blocks.map(\.label) == ["A", "TEST"])
        #expect(blocks[0].der == [1, 2, 3] && blocks[1].der == der)
        expectCryptoError(.invalidEncoding) { _ = try pemDecode(text, label: "B") }
        expectCryptoError(.invalidEncoding) { _ = try pemBlocks("-----BEGIN A-----\nAQID\n") }
        expectCryptoError(.invalidEncoding) { _ = try pemBlocks("-----BEGIN A-----\nAQID\n-----END B-----\n") }
        expectCryptoError(.invalidEncoding) { _ = try pemBlocks("-----BEGIN A-----\n@@@@\n-----END A-----\n") }
        #expect(try pemBlocks("no PEM here").isEmpty)
    }
}

@Suite("Byte helpers")
struct ByteHelperTests {
    /// `makeBytes` writes in place through `append(contentsOf:)`: every size gets exactly its bytes.
    @Test(arguments: [0, 1, 16, 1000, 1040, 5000])
    func makeBytesWritesExactlyCountBytes(count: Int) {
        var calls = 0
        let bytes = makeBytes(count: count) { out in
            calls += 1
            #expect(out.count == count)
            #expect(out.baseAddress != nil)
            for i in 0..<out.count { out[i] = UInt8(truncatingIfNeeded: i &* 7) }
        }
        #expect(calls == 1)
        #expect(bytes == (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7) })
    }

    @Test func contiguousBytesLendsEveryKindOfInput() {
        let array: [UInt8] = [1, 2, 3, 4]
        #expect(withContiguousBytes(array) { Array($0) } == array)
        #expect(withContiguousBytes(array[1...]) { Array($0) } == [2, 3, 4])
        #expect(withContiguousBytes(Data(array)) { Array($0) } == array)
        // DispatchData made of two regions has no contiguous storage: it is copied.
        var regions = DispatchData.empty
        array[..<2].withUnsafeBytes { regions.append($0) }
        array[2...].withUnsafeBytes { regions.append($0) }
        #expect(regions.withContiguousStorageIfAvailable { _ in true } == nil)
        #expect(withContiguousBytes(regions) { Array($0) } == array)
        #expect(withContiguousBytes([UInt8]()) { $0.count } == 0)
    }
}
