import EMV
import Foundation
import OrchardCrypto
import Testing

/// Every vector of Tests/Fixtures/emv/emv_vectors.json from V1 on (V0 is in PrimitiveVectorTests), each
/// with a negative case: a changed input must change the output.
@Suite("EMV vectors V1–V7")
struct VectorTests {
    func v(_ id: String) throws -> PrimitiveVectorTests.Vector { try PrimitiveVectorTests.vector(id) }
    func key(_ text: String?) throws -> SymmetricKey { SymmetricKey(data: hex(try #require(text))) }
    func bytes(_ key: SymmetricKey) -> [UInt8] { key.bytes.unsafeCopyOfBytes() }

    @Test func v1MasterKeyOptionA() throws {
        let v = try v("V1")
        let pan = try #require(v.inputs["PAN (DPAN)"])
        let psn = try #require(Int(v.inputs["PSN"] ?? ""))
        let y = try EMVKeyDerivation.masterKeyDerivationData(pan: pan, panSequenceNumber: psn, option: .optionA)
        #expect(y == hex(v.outputs["Y = rightmost 16 digits of PAN||PSN"]!))
        #expect(y.map { $0 ^ 0xFF } == hex(v.outputs["Y xor FF..FF"]!))
        let imk = try key(v.inputs["IMK-AC"])
        let mk = try EMVKeyDerivation.masterKey(
            issuerMasterKey: imk, pan: pan, panSequenceNumber: psn, option: .optionA)
        #expect(bytes(mk) == hex(v.outputs["MK-AC (odd parity)"]!))
        // Z before parity: the parity adjustment changes only bit 1 of each byte.
        let z = hex(v.outputs["Z = 3DES(IMK)[Y] || 3DES(IMK)[Y^FF]"]!)
        #expect(zip(z, bytes(mk)).allSatisfy { $0 & 0xFE == $1 & 0xFE })
        #expect(try EMVKeyDerivation.keyCheckValue(mk) == (try TripleDES.keyCheckValue(SymmetricKey(data: z))))
        // Automatic is option A for 16 digits; another PSN or PAN gives another key.
        #expect(
            try bytes(EMVKeyDerivation.masterKey(issuerMasterKey: imk, pan: pan, panSequenceNumber: psn)) == bytes(mk))
        #expect(
            try bytes(EMVKeyDerivation.masterKey(issuerMasterKey: imk, pan: pan, panSequenceNumber: 1)) != bytes(mk))
        #expect(
            try bytes(EMVKeyDerivation.masterKey(issuerMasterKey: imk, pan: "4895370012345672", panSequenceNumber: psn))
                != bytes(mk))
    }

    @Test func v1bOptionAWith17Digits() throws {
        let v = try v("V1b")
        let pan = try #require(v.inputs["PAN"])
        let y = try EMVKeyDerivation.masterKeyDerivationData(pan: pan, panSequenceNumber: 1, option: .optionA)
        #expect(y == hex(v.outputs["Y"]!))
        let mk = try EMVKeyDerivation.masterKey(
            issuerMasterKey: try key(v.inputs["IMK"]), pan: pan, panSequenceNumber: 1, option: .optionA)
        #expect(bytes(mk) == hex(v.outputs["MK (odd parity)"]!))
        // Automatic picks option B above 16 digits, which gives a different key here.
        let automatic = try EMVKeyDerivation.masterKey(
            issuerMasterKey: try key(v.inputs["IMK"]), pan: pan, panSequenceNumber: 1)
        #expect(bytes(automatic) != bytes(mk))
    }

    @Test func v2MasterKeyOptionB() throws {
        let v = try v("V2")
        let pan = try #require(v.inputs["PAN"])
        let y = try EMVKeyDerivation.masterKeyDerivationData(pan: pan, panSequenceNumber: 1, option: .optionB)
        #expect(y == hex(v.outputs["Y (decimalised, 16 digits)"]!))
        #expect(SHA1.hash(hex(v.outputs["X = PAN||PSN (left '0' if odd)"]!)) == hex(v.outputs["SHA-1(X)"]!))
        let mk = try EMVKeyDerivation.masterKey(
            issuerMasterKey: try key(v.inputs["IMK-AC"]), pan: pan, panSequenceNumber: 1)
        #expect(bytes(mk) == hex(v.outputs["MK (odd parity)"]!))
        // For 16 digits option B is option A (the note in V2); above 16 they differ.
        let a = try EMVKeyDerivation.masterKeyDerivationData(
            pan: "4895370012345671", panSequenceNumber: 0, option: .optionA)
        let b = try EMVKeyDerivation.masterKeyDerivationData(
            pan: "4895370012345671", panSequenceNumber: 0, option: .optionB)
        #expect(a == b)
        #expect(try EMVKeyDerivation.masterKeyDerivationData(pan: pan, panSequenceNumber: 1, option: .optionA) != y)
        // A changed digit changes Y.
        #expect(
            try EMVKeyDerivation.masterKeyDerivationData(
                pan: "4895370012345678905", panSequenceNumber: 1, option: .optionB) != y)
    }

    @Test func v3CommonSessionKey() throws {
        let v = try v("V3")
        let mk = try key(v.inputs["MK-AC"])
        let (f1, f2) = EMVKeyDerivation.sessionKeyDiversification(r: hex(v.inputs["R = ATC||00*6"]!))
        #expect(f1 == hex(v.outputs["F1 = R with byte3:='F0'"]!))
        #expect(f2 == hex(v.outputs["F2 = R with byte3:='0F'"]!))
        let sk = try EMVKeyDerivation.commonSessionKey(masterKey: mk, atc: 0x002A)
        #expect(bytes(sk) == hex(v.outputs["SK-AC (odd parity)"]!))
        #expect(try bytes(EMVKeyDerivation.commonSessionKey(masterKey: mk, atc: 0x002B)) != bytes(sk))
    }

    @Test func v4MastercardSessionKey() throws {
        let v = try v("V4")
        let mk = try key(v.inputs["MK-AC"])
        let un = hex(v.inputs["UN (9F37)"]!)
        let (f1, f2) = EMVKeyDerivation.sessionKeyDiversification(r: hex(v.inputs["R"]!))
        #expect(f1 == hex(v.outputs["F1"]!))
        #expect(f2 == hex(v.outputs["F2"]!))
        let sk = try EMVKeyDerivation.mastercardSessionKey(masterKey: mk, atc: 0x002A, unpredictableNumber: un)
        #expect(bytes(sk) == hex(v.outputs["SK-AC (odd parity)"]!))
        #expect(
            try bytes(
                EMVKeyDerivation.mastercardSessionKey(
                    masterKey: mk, atc: 0x002A, unpredictableNumber: [0x7A, 0x3B, 0x9C, 0x02]))
                != bytes(sk))
        #expect(throws: EMVError(.invalidArgument, "")) {
            try EMVKeyDerivation.mastercardSessionKey(masterKey: mk, atc: 1, unpredictableNumber: [1, 2, 3])
        }
    }

    /// The V5a transaction data (PDOL values without TTQ) as tagged values.
    static func v5aValues(_ v: PrimitiveVectorTests.Vector) -> [TLVTag: [UInt8]] {
        var values: [TLVTag: [UInt8]] = [:]
        for (tag, name) in [
            (0x9F02, "9F02"), (0x9F03, "9F03"), (0x9F1A, "9F1A"), (0x95, "95"), (0x5F2A, "5F2A"),
            (0x9A, "9A"), (0x9C, "9C"), (0x9F37, "9F37"),
        ] as [(UInt32, String)] {
            values[TLVTag(integerLiteral: tag)] = hex(v.inputs[name]!)
        }
        return values
    }

    @Test func v5aVisaCVN18() throws {
        let v = try v("V5a")
        let values = Self.v5aValues(v)
        let data = try CryptogramData(
            values: { values[$0] }, applicationInterchangeProfile: hex(v.inputs["82"]!), atc: 0x002A,
            issuerApplicationData: hex(v.inputs["9F10 (IAD)"]!))
        #expect(try data.macInput(for: .visa18) == hex(v.outputs["MAC input (unpadded)"]!))
        #expect(RetailMAC.pad(try data.macInput(for: .visa18), .method2) == hex(v.outputs["MAC input (padded)"]!))
        let mk = try key(try PrimitiveVectorTests.vector("V3").inputs["MK-AC"])
        let arqc = try ApplicationCryptogram.generate(.visa18, masterKey: mk, data: data)
        #expect(arqc == hex(v.outputs["ARQC (9F26)"]!))
        // From the session key directly, as the vector states it.
        let sk = try key(v.inputs["SK-AC (from V3)"])
        #expect(
            try ApplicationCryptogram.mac(key: sk, data: try data.macInput(for: .visa18), padding: .method2) == arqc)
        // Changed unpredictable number, amount, currency or ATC: a different cryptogram.
        for (tag, changed) in [
            (TLVTag.unpredictableNumber, hex("7A3B9C02")), (.amountAuthorised, hex("000000015001")),
            (.transactionCurrencyCode, hex("0978")),
        ] {
            var other = values
            other[tag] = changed
            let otherData = try CryptogramData(
                values: { other[$0] }, applicationInterchangeProfile: data.applicationInterchangeProfile, atc: 0x002A,
                issuerApplicationData: data.issuerApplicationData)
            #expect(
                try ApplicationCryptogram.generate(.visa18, masterKey: mk, data: otherData) != arqc, "changed \(tag)")
        }
        let otherATC = try CryptogramData(
            transactionData: data.transactionData, applicationInterchangeProfile: data.applicationInterchangeProfile,
            atc: 0x002B, issuerApplicationData: data.issuerApplicationData)
        #expect(try ApplicationCryptogram.generate(.visa18, masterKey: mk, data: otherATC) != arqc)
        // A missing or wrong-length data object is a typed error, not a crash.
        #expect(throws: EMVError(.invalidArgument, "")) {
            try CryptogramData(
                values: { $0 == .unpredictableNumber ? [1] : values[$0] }, applicationInterchangeProfile: [0x20, 0],
                atc: 1, issuerApplicationData: [6])
        }
    }

    @Test func v5bVisaCVN10() throws {
        let v = try v("V5b")
        let mk = try key(v.inputs["MK-AC"])
        let base = hex(v.inputs["data as V5a without IAD"]!)
        let iad = hex("060112") + hex(v.inputs["CVR"]!)
        let data = try CryptogramData(
            transactionData: Array(base[0..<29]), applicationInterchangeProfile: Array(base[29..<31]), atc: 0x002A,
            issuerApplicationData: iad)
        #expect(RetailMAC.pad(try data.macInput(for: .visa10), .method1) == hex(v.outputs["MAC input (padded)"]!))
        let arqc = try ApplicationCryptogram.generate(.visa10, masterKey: mk, data: data)
        #expect(arqc == hex(v.outputs["ARQC"]!))
        let changedCVR = try CryptogramData(
            transactionData: data.transactionData, applicationInterchangeProfile: data.applicationInterchangeProfile,
            atc: 0x002A, issuerApplicationData: hex("06011203A00001"))
        #expect(try ApplicationCryptogram.generate(.visa10, masterKey: mk, data: changedCVR) != arqc)
    }

    @Test func v5cMastercardCVN16And20() throws {
        let v = try v("V5c")
        let base = hex(v.inputs["data as V5a without IAD"]!)
        let iad = hex("0110") + hex(v.inputs["CVR"]!) + [UInt8](repeating: 0, count: 10)
        let data = try CryptogramData(
            transactionData: Array(base[0..<29]), applicationInterchangeProfile: Array(base[29..<31]), atc: 0x002A,
            issuerApplicationData: iad)
        #expect(RetailMAC.pad(try data.macInput(for: .mastercard16), .method2) == hex(v.outputs["MAC input (padded)"]!))
        let sk16 = try key(v.inputs["SK (CVN16, V4)"])
        let sk20 = try key(v.inputs["SK (CVN20, V3)"])
        let input = try data.macInput(for: .mastercard16)
        #expect(
            try ApplicationCryptogram.mac(key: sk16, data: input, padding: .method2) == hex(v.outputs["ARQC CVN16"]!))
        #expect(
            try ApplicationCryptogram.mac(key: sk20, data: input, padding: .method2) == hex(v.outputs["ARQC CVN20"]!))
        // Through the master key and the CVN's own session key.
        let mk = try key(try PrimitiveVectorTests.vector("V3").inputs["MK-AC"])
        #expect(
            try ApplicationCryptogram.generate(.mastercard16, masterKey: mk, data: data)
                == hex(v.outputs["ARQC CVN16"]!))
        #expect(
            try ApplicationCryptogram.generate(.mastercard20, masterKey: mk, data: data)
                == hex(v.outputs["ARQC CVN20"]!))
        // CVN 16's session key depends on the UN: a changed UN changes both key and data.
        var other = data.transactionData
        other[28] ^= 1
        let changed = try CryptogramData(
            transactionData: other, applicationInterchangeProfile: data.applicationInterchangeProfile, atc: 0x002A,
            issuerApplicationData: iad)
        #expect(
            try ApplicationCryptogram.generate(.mastercard16, masterKey: mk, data: changed)
                != hex(v.outputs["ARQC CVN16"]!))
    }

    @Test func v6ARPC() throws {
        let v = try v("V6")
        let sk = try key(v.inputs["SK-AC"])
        let arqc = hex(v.inputs["ARQC"]!)
        let arc = hex(v.inputs["ARC (method 1)"]!)
        let csu = hex(v.inputs["CSU (method 2)"]!)
        let prop = hex(v.inputs["Proprietary Auth Data (method 2, 2nd case)"]!)
        let arpc1 = try ApplicationCryptogram.arpcMethod1(key: sk, arqc: arqc, responseCode: arc)
        #expect(arpc1 == hex(v.outputs["ARPC1 = 3DES(SK)[ARQC xor (ARC||00*6)]"]!))
        #expect(arpc1 + arc == hex(v.outputs["tag 91 (method 1)"]!))
        let arpc2 = try ApplicationCryptogram.arpcMethod2(key: sk, arqc: arqc, cardStatusUpdate: csu)
        #expect(arpc2 == hex(v.outputs["ARPC2 = MAC3(SK)[pad2(ARQC||CSU)] left 4"]!))
        #expect(arpc2 + csu == hex(v.outputs["tag 91 (method 2)"]!))
        let arpc2p = try ApplicationCryptogram.arpcMethod2(
            key: sk, arqc: arqc, cardStatusUpdate: csu, proprietaryData: prop)
        #expect(arpc2p == hex(v.outputs["ARPC2 with prop. data"]!))
        #expect(arpc2p + csu + prop == hex(v.outputs["tag 91 (method 2 + prop)"]!))
        // A declined response code gives another ARPC; bad sizes are typed errors.
        #expect(try ApplicationCryptogram.arpcMethod1(key: sk, arqc: arqc, responseCode: hex("3035")) != arpc1)
        #expect(throws: EMVError(.invalidArgument, "")) {
            try ApplicationCryptogram.arpcMethod1(key: sk, arqc: [1], responseCode: arc)
        }
        #expect(throws: EMVError(.invalidArgument, "")) {
            try ApplicationCryptogram.arpcMethod2(
                key: sk, arqc: arqc, cardStatusUpdate: csu, proprietaryData: [UInt8](repeating: 0, count: 9))
        }
    }

    @Test func v7CVC3() throws {
        let v = try v("V7")
        let key = try EMVKeyDerivation.masterKey(
            issuerMasterKey: try key(v.inputs["IMK-CVC3"]), pan: v.inputs["PAN"]!, panSequenceNumber: 0)
        #expect(bytes(key) == hex(v.outputs["ICC-CVC3 key"]!))
        let track = hex(v.inputs["Track2 template"]!)
        #expect(
            try DynamicCVC3.ivcvc3(key: key, trackData: track)
                == hex(v.outputs["IVCVC3 (last 2 bytes of MAC3(pad2(track)))"]!))
        let cvc3 = try DynamicCVC3.cvc3(
            key: key, trackData: track, unpredictableNumber: hex(v.inputs["UN"]!), atc: 0x005E)
        #expect(String(cvc3) == v.outputs["CVC3 (decimal of last 2 bytes)"]!)
        #expect(
            try DynamicCVC3.cvc3(key: key, trackData: track, unpredictableNumber: hex(v.inputs["UN"]!), atc: 0x005F)
                != cvc3)
    }
}
