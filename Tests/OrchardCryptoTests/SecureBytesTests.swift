import Foundation
import OrchardCrypto
import Testing

@Suite("SecureBytes and secret-holding types")
struct SecureBytesTests {
    @Test func redactedEverywhere() throws {
        let secret = SecureBytes([0xDE, 0xAD, 0xBE, 0xEF])
        let key = SymmetricKey(data: [UInt8](repeating: 0xAB, count: 32))
        let p256 = try P256.KeyAgreement.PrivateKey()
        for text in [
            "\(secret)", String(reflecting: secret), "\(key)", String(reflecting: key), "\(p256)",
            String(reflecting: p256),
        ] {
            #expect(!text.lowercased().contains("dead"))
            #expect(!text.lowercased().contains("abab"))
        }
        var dumped = ""
        dump(secret, to: &dumped)
        dump(key, to: &dumped)
        #expect(!dumped.contains("222"))  // 0xDE = 222 would appear if the mirror exposed bytes
        #expect(!dumped.contains("171"))  // 0xAB
    }

    @Test func constantTimeEquality() {
        #expect(SecureBytes([1, 2, 3]) == SecureBytes([1, 2, 3]))
        #expect(SecureBytes([1, 2, 3]) != SecureBytes([1, 2, 4]))
        #expect(SecureBytes([1, 2, 3]) != SecureBytes([1, 2]))
        #expect(SecureBytes([UInt8]()) == SecureBytes([UInt8]()))
    }

    @Test func deterministicRandomIsReproducible() {
        let a = InsecureDeterministicRandom(seed: [1, 2, 3]).bytes(100)
        let b = InsecureDeterministicRandom(seed: [1, 2, 3]).bytes(100)
        let c = InsecureDeterministicRandom(seed: [1, 2, 4]).bytes(100)
        #expect(a == b)
        #expect(a != c)
        #expect(SystemRandom().bytes(32) != SystemRandom().bytes(32))
    }
}
