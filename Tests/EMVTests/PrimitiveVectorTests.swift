import Foundation
import OrchardCrypto
import OrchardFixtures
import Testing

/// EMV vector V0 (tests/Fixtures/emv): the DES, TDES and retail-MAC primitives EMV is built on.
@Suite("EMV primitive vectors (V0)")
struct PrimitiveVectorTests {
    struct Vector: Decodable {
        let id: String
        let inputs: [String: String]
        let outputs: [String: String]
    }

    static func vector(_ id: String) throws -> Vector {
        struct File: Decodable { let vectors: [Vector] }
        let file = try JSONDecoder().decode(File.self, from: Fixtures.data("emv/emv_vectors.json"))
        return try #require(file.vectors.first { $0.id == id })
    }

    @Test func v0() throws {
        let v = try Self.vector("V0")
        let des = try InsecureSingleDES.encryptECB(
            hex(v.inputs["DES plaintext"]!), key: SymmetricKey(data: hex(v.inputs["DES key"]!)))
        #expect(des == hex(v.outputs["DES ciphertext"]!))
        let tdesKey = SymmetricKey(data: hex(v.inputs["TDES key (K1||K2)"]!))
        let tdes = try TripleDES.encryptECB(hex(v.inputs["TDES plaintext (ASCII '12345678')"]!), key: tdesKey)
        #expect(tdes == hex(v.outputs["TDES ciphertext"]!))
        #expect(try TripleDES.decryptECB(tdes, key: tdesKey) == hex(v.inputs["TDES plaintext (ASCII '12345678')"]!))
        let macKey = SymmetricKey(data: hex(v.inputs["MAC key (K1||K2)"]!))
        #expect(RetailMAC.pad(hex(v.inputs["MAC data"]!), .method2) == hex(v.inputs["MAC data padded (method 2)"]!))
        let mac = try RetailMAC.mac(hex(v.inputs["MAC data"]!), key: macKey, padding: .method2)
        #expect(mac == hex(v.outputs["MAC (8 bytes)"]!))
        // A changed byte or key changes the MAC.
        var changed = hex(v.inputs["MAC data"]!)
        changed[0] ^= 0x01
        #expect(try RetailMAC.mac(changed, key: macKey, padding: .method2) != mac)
        #expect(try RetailMAC.mac(hex(v.inputs["MAC data"]!), key: tdesKey, padding: .method1) != mac)
    }
}

func hex(_ text: String) -> [UInt8] {
    var out: [UInt8] = []
    var chars = Array(text.utf8)
    if chars.count % 2 == 1 { chars.insert(0x30, at: 0) }
    for i in stride(from: 0, to: chars.count, by: 2) {
        out.append(UInt8(String(decoding: chars[i...i + 1], as: UTF8.self), radix: 16)!)
    }
    return out
}
