import CardBasics
import Foundation
import Issuer
import NetworkAuthorizationAPI
import NetworkTestSupport
import OrchardCrypto
import OrchardFixtures
import PaymentCredential
import Testing
import TokenService

@Suite("Software HSM: self-test, wrapping, usage binding, derivation vectors")
struct SoftwareHSMTests {
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

    static func hsm(_ lmk: SymmetricKey = SymmetricKey(bitCount: 256)) throws -> SoftwareHSM {
        try SoftwareHSM(
            localMasterKey: lmk,
            verifiers: [
                TestDoubleCryptogramVerifier(kind: .proximityARQC), TestDoubleCryptogramVerifier(kind: .remote),
            ])
    }

    @Test func standardSelfTestPasses() throws {
        try HSMSelfTest.standard.run()
        _ = try Self.hsm()
    }

    @Test func everyTamperedKnownAnswerStopsTheHSM() throws {
        var answers: [HSMSelfTest] = []
        var a = HSMSelfTest.standard
        a.optionA.cardMasterKey = "7AA1D352E6D5C2E629ADC4C78329866F"
        answers.append(a)
        var b = HSMSelfTest.standard
        b.optionB.pan = "4895370012345678912"
        answers.append(b)
        var c = HSMSelfTest.standard
        c.hmac.mac = String(c.hmac.mac.dropLast()) + "4"
        answers.append(c)
        var d = HSMSelfTest.standard
        d.hkdf.info = "f0f1f2f3f4f5f6f7f8f8"
        answers.append(d)
        var e = HSMSelfTest.standard
        e.aesGCM.tag = "76fc6ece0f4e1768cddf8853bb2d551c"
        answers.append(e)
        var f = HSMSelfTest.standard
        f.aesGCM.aad = "feedfacedeadbeeffeedfacedeadbeefabaddad3"
        answers.append(f)
        for tampered in answers {
            #expect(throws: TokenServiceError(.selfTestFailed, "")) {
                try SoftwareHSM(localMasterKey: SymmetricKey(bitCount: 256), verifiers: [], selfTest: tampered)
            }
        }
        #expect(throws: TokenServiceError(.configuration, "")) {
            try SoftwareHSM(localMasterKey: SymmetricKey(bitCount: 128), verifiers: [])
        }
        #expect(throws: TokenServiceError(.configuration, "")) {
            try SoftwareHSM(
                localMasterKey: SymmetricKey(bitCount: 256),
                verifiers: [
                    TestDoubleCryptogramVerifier(kind: .remote), TestDoubleCryptogramVerifier(kind: .remote),
                ])
        }
    }

    /// V1 (option A) and V2 (option B) through the HSM: import the published IMK, personalise a token with
    /// the vector's PAN and PSN, open the envelope as the SE and compare the card master key.
    @Test func personalisationCarriesTheEMVMasterKeys() throws {
        let hsm = try Self.hsm()
        let se = try P256.KeyAgreement.PrivateKey()
        let label = try EncryptedEnvelope.Label(purpose: "se-personalisation", sender: "tsp", recipient: "se/1")
        for (id, imkName, panName, mkName) in [
            ("V1", "IMK-AC", "PAN (DPAN)", "MK-AC (odd parity)"), ("V2", "IMK-AC", "PAN", "MK (odd parity)"),
        ] {
            let v = try Self.vector(id)
            let imk = SecureBytes(try hex(try #require(v.inputs[imkName])))
            let proximity = try hsm.importKey(imk, usage: .proximityIssuerMasterKey, id: "imk-\(id)")
            let remote = try hsm.importKey(imk, usage: .remoteIssuerMasterKey, id: "imk-rp-\(id)")
            let psnText = try #require(v.inputs["PSN"])
            let psn = try #require(UInt8(psnText))
            let template = PersonalisationTemplate(
                tokenReference: "tok", dpan: try PrimaryAccountNumber(try #require(v.inputs[panName])),
                panSequenceNumber: psn, tokenExpiry: try CardExpiry(year: 2029, month: 3),
                network: .visa)
            let signed = try hsm.sealPersonalisation(
                template, proximityKey: proximity, remoteKey: remote, to: se.publicKey, label: label,
                install: Self.install, signingKey: try hsm.generateKey(usage: .personalisationSigning, id: "sign"))
            let data = try PersonalisationData(
                decoding: try EncryptedEnvelope(serialized: signed.envelope).open(with: se, label: label))
            let expected = SymmetricKey(data: try hex(try #require(v.outputs[mkName])))
            #expect(data.proximityMasterKey == expected, "\(id)")
            #expect(data.remoteMasterKey == expected, "\(id): same IMK, same derivation")
        }
    }

    @Test func keysAreUsageBound() throws {
        let hsm = try Self.hsm()
        let proximity = try hsm.generateKey(usage: .proximityIssuerMasterKey, id: "imk-ac")
        let remote = try hsm.generateKey(usage: .remoteIssuerMasterKey, id: "imk-rp")
        let vault = try hsm.generateKey(usage: .vaultEncryption, id: "kek")
        let pan = try PrimaryAccountNumber("4895370012345671")
        let remoteSubmission = CryptogramSubmission(
            kind: .remote, cryptogram: [UInt8](repeating: 0, count: 8), applicationTransactionCounter: 1,
            transactionData: [UInt8](repeating: 0, count: 17))
        // A proximity key cannot verify a remote cryptogram, nor the reverse.
        #expect(throws: TokenServiceError(.keyUsageViolation, "")) {
            try hsm.verifyCryptogram(remoteSubmission, issuerMasterKey: proximity, pan: pan, panSequenceNumber: 0)
        }
        let proximitySubmission = CryptogramSubmission(
            kind: .proximityARQC, cryptogram: [UInt8](repeating: 0, count: 8), applicationTransactionCounter: 1,
            transactionData: [UInt8](repeating: 0, count: 17))
        #expect(throws: TokenServiceError(.keyUsageViolation, "")) {
            try hsm.verifyCryptogram(proximitySubmission, issuerMasterKey: remote, pan: pan, panSequenceNumber: 0)
        }
        // An IMK cannot encrypt vault data, a vault key cannot hash PANs.
        #expect(throws: TokenServiceError(.keyUsageViolation, "")) {
            try hsm.seal(SecureBytes([1]), key: proximity, context: [])
        }
        #expect(throws: TokenServiceError(.keyUsageViolation, "")) {
            try hsm.lookupHash(of: SecureBytes([1]), key: vault)
        }
        #expect(throws: TokenServiceError(.keyUsageViolation, "")) { try hsm.publicKey(of: vault) }
        // Relabelling a handle's usage breaks its wrapping: the usage is authenticated data.
        let relabelled = KeyHandle(id: proximity.id, usage: .remoteIssuerMasterKey, wrappedKey: proximity.wrappedKey)
        #expect(throws: TokenServiceError(.invalidKeyHandle, "")) {
            try hsm.verifyCryptogram(remoteSubmission, issuerMasterKey: relabelled, pan: pan, panSequenceNumber: 0)
        }
        let renamed = KeyHandle(id: "other", usage: .vaultEncryption, wrappedKey: vault.wrappedKey)
        #expect(throws: TokenServiceError(.invalidKeyHandle, "")) {
            try hsm.seal(SecureBytes([1]), key: renamed, context: [])
        }
    }

    @Test func handlesOfAnotherHSMDoNotUnwrap() throws {
        let one = try Self.hsm()
        let two = try Self.hsm()
        let key = try one.generateKey(usage: .vaultEncryption, id: "kek")
        #expect(throws: TokenServiceError(.invalidKeyHandle, "")) {
            try two.seal(SecureBytes([1]), key: key, context: [])
        }
        // The same local master key restores the same keys (handles are what gets persisted).
        let lmk = SymmetricKey(bitCount: 256)
        let a = try Self.hsm(lmk)
        let b = try Self.hsm(lmk)
        let kek = try a.generateKey(usage: .vaultEncryption, id: "kek")
        let sealed = try a.seal(SecureBytes(Array("4111111111111111".utf8)), key: kek, context: [1])
        #expect(try b.open(sealed, key: kek, context: [1]) == SecureBytes(Array("4111111111111111".utf8)))
        #expect("\(kek)" == "KeyHandle(kek, vaultEncryption)")
    }

    @Test func vaultSealingIsBoundToItsContext() throws {
        let hsm = try Self.hsm()
        let kek = try hsm.generateKey(usage: .vaultEncryption, id: "kek")
        let plain = SecureBytes(Array("4111111111111111".utf8))
        let sealed = try hsm.seal(plain, key: kek, context: Array("card:1".utf8))
        #expect(!String(decoding: sealed, as: UTF8.self).contains("4111111111111111"))
        #expect(try hsm.open(sealed, key: kek, context: Array("card:1".utf8)) == plain)
        #expect(throws: TokenServiceError(.envelopeRejected, "")) {
            try hsm.open(sealed, key: kek, context: Array("card:2".utf8))
        }
        var flipped = sealed
        flipped[20] ^= 1
        #expect(throws: TokenServiceError(.envelopeRejected, "")) {
            try hsm.open(flipped, key: kek, context: Array("card:1".utf8))
        }
        #expect(throws: TokenServiceError(.envelopeRejected, "")) { try hsm.open([1, 2, 3], key: kek, context: []) }
    }

    @Test func lookupHashIsKeyedAndStable() throws {
        let hsm = try Self.hsm()
        let one = try hsm.generateKey(usage: .panLookup, id: "lookup")
        let two = try hsm.generateKey(usage: .panLookup, id: "lookup-2")
        let pan = SecureBytes(Array("4111111111111111".utf8))
        #expect(try hsm.lookupHash(of: pan, key: one) == (try hsm.lookupHash(of: pan, key: one)))
        #expect(try hsm.lookupHash(of: pan, key: one) != (try hsm.lookupHash(of: pan, key: two)))
        #expect(try hsm.lookupHash(of: pan, key: one) != SHA256.hash(Array("4111111111111111".utf8)))
    }

    @Test func importValidatesLengthsAndGeneratedIMKsHaveOddParity() throws {
        let hsm = try Self.hsm()
        #expect(throws: TokenServiceError(.invalidRequest, "")) {
            try hsm.importKey(SecureBytes([UInt8](repeating: 1, count: 24)), usage: .proximityIssuerMasterKey, id: "x")
        }
        #expect(throws: TokenServiceError(.invalidRequest, "")) {
            try hsm.importKey(SecureBytes([UInt8](repeating: 0, count: 32)), usage: .provisioningDecryption, id: "x")
        }
        #expect(throws: TokenServiceError(.invalidRequest, "")) {
            try hsm.importKey(SecureBytes([UInt8](repeating: 1, count: 32)), usage: .vaultEncryption, id: "")
        }
        // A generated IMK derives card keys whose every byte has odd parity.
        let imk = try hsm.generateKey(usage: .proximityIssuerMasterKey, id: "imk")
        let rp = try hsm.generateKey(usage: .remoteIssuerMasterKey, id: "rp")
        let se = try P256.KeyAgreement.PrivateKey()
        let label = try EncryptedEnvelope.Label(purpose: "p", sender: "s", recipient: "r")
        let signingKey = try hsm.generateKey(usage: .personalisationSigning, id: "sign")
        let signed = try hsm.sealPersonalisation(
            PersonalisationTemplate(
                tokenReference: "t", dpan: try PrimaryAccountNumber("4895370012345671"), panSequenceNumber: 0,
                tokenExpiry: try CardExpiry(year: 2029, month: 3), network: .visa),
            proximityKey: imk, remoteKey: rp, to: se.publicKey, label: label, install: Self.install,
            signingKey: signingKey)
        let data = try PersonalisationData(
            decoding: try EncryptedEnvelope(serialized: signed.envelope).open(with: se, label: label))
        #expect(data.proximityMasterKey.bytes.unsafeCopyOfBytes().allSatisfy { $0.nonzeroBitCount % 2 == 1 })
        #expect(data.proximityMasterKey != data.remoteMasterKey)
        // The install is signed by that key, over the install ID, the certificate digest and the envelope.
        #expect(signed.isSigned(by: try hsm.signingPublicKey(of: signingKey)))
        #expect(
            signed.installID == Self.install.installID && signed.certificateDigest == Self.install.certificateDigest)
        #expect(!signed.isSigned(by: try P256.Signing.PrivateKey().publicKey))
        // Only a personalisation-signing key signs installs.
        #expect(throws: TokenServiceError(.keyUsageViolation, "")) {
            try hsm.sealPersonalisation(
                PersonalisationTemplate(
                    tokenReference: "t", dpan: try PrimaryAccountNumber("4895370012345671"), panSequenceNumber: 0,
                    tokenExpiry: try CardExpiry(year: 2029, month: 3), network: .visa),
                proximityKey: imk, remoteKey: rp, to: se.publicKey, label: label, install: Self.install,
                signingKey: imk)
        }
    }

    static let install = PersonalisationInstall(
        installID: [UInt8](repeating: 0xA5, count: 16), certificateDigest: SHA256.hash(Array("certificate".utf8)))
}

func hex(_ text: String) throws -> [UInt8] {
    var out: [UInt8] = []
    let chars = Array(text.utf8)
    guard chars.count % 2 == 0 else { throw TestDoubleError("odd hex") }
    for index in stride(from: 0, to: chars.count, by: 2) {
        guard let byte = UInt8(String(decoding: chars[index...index + 1], as: UTF8.self), radix: 16) else {
            throw TestDoubleError("bad hex")
        }
        out.append(byte)
    }
    return out
}
