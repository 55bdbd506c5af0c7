import OrchardCrypto
import Testing

@Suite("AES-GCM into caller-owned buffers")
struct AESGCMBufferTests {
    let key = SymmetricKey(data: [UInt8](repeating: 7, count: 32))
    let iv = [UInt8](repeating: 0, count: 16)

    @Test func matchesTheAllocatingAPIAndReusesStorage() throws {
        var sealed: [UInt8] = []
        var opened: [UInt8] = []
        for size in [0, 1, 15, 16, 1024, 3000] {
            let plaintext = [UInt8]((0..<size).map { UInt8(truncatingIfNeeded: $0) })
            try AES.GCM.seal(plaintext, using: key, iv: iv, authenticating: [1, 2], into: &sealed)
            #expect(sealed == (try AES.GCM.seal(plaintext, using: key, iv: iv, authenticating: [1, 2]).combined))
            try AES.GCM.open(combined: sealed, using: key, iv: iv, authenticating: [1, 2], into: &opened)
            #expect(opened == plaintext)
        }
    }

    @Test func tamperingLeavesTheOutputEmpty() throws {
        var sealed: [UInt8] = []
        try AES.GCM.seal(Array("secret".utf8), using: key, iv: iv, into: &sealed)
        for index in sealed.indices {
            var tampered = sealed
            tampered[index] ^= 0x01
            var out: [UInt8] = [9, 9, 9]
            #expect(throws: CryptoError(.authenticationFailure, "")) {
                try AES.GCM.open(combined: tampered, using: key, iv: iv, into: &out)
            }
            #expect(out.isEmpty)
        }
        var out: [UInt8] = []
        #expect(throws: CryptoError(.authenticationFailure, "")) {
            try AES.GCM.open(combined: sealed, using: key, iv: iv, authenticating: [1], into: &out)
        }
        #expect(throws: CryptoError(.invalidParameter, "")) {
            try AES.GCM.open(combined: [1, 2, 3], using: key, iv: iv, into: &out)
        }
        #expect(throws: CryptoError.self) {
            try AES.GCM.seal([1], using: SymmetricKey(data: [1, 2, 3]), iv: iv, into: &out)
        }
    }
}
