import Foundation
import OrchardCrypto
import OrchardFixtures
import OrchardX509
import PaymentToken
import Testing

@testable import MerchantKit

@Suite("Real Apple tokens: verify and decrypt")
struct AppleTokenTests {
    static let names = ["gala-2015", "gala-2023", "basis-rsa"]

    static func identity(_ name: String) throws -> MerchantIdentity {
        let folder = "apple-pay/\(name)/"
        if name == "basis-rsa" {
            return try MerchantIdentity(
                certificatePEM: Fixtures.string(folder + "apple_pay.pem"),
                privateKeyPEM: Fixtures.string(folder + "private.key"))
        }
        return try MerchantIdentity(
            certificatePEM: Fixtures.string(folder + "certificate.pem"),
            privateKeyPEM: Fixtures.string(folder + "private_key.pem"))
    }

    static func token(_ name: String) throws -> PaymentToken {
        try PaymentToken(jsonBytes: Fixtures.data("apple-pay/\(name)/token.json"))
    }

    static func signingTime(_ name: String) throws -> Date {
        let raw = try JSONSerialization.jsonObject(with: Fixtures.data("apple-pay/expected.json")) as! [String: Any]
        let text = (raw[name] as! [String: Any])["signing_time"] as! String  // "2014-10-27 19:51:43+00:00"
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ssxxx"
        return try #require(formatter.date(from: text))
    }

    @Test func appleRootIsPinned() throws {
        let root = AppleRootCertificates.rootCAG3
        #expect(
            StrictEncoding.hexEncode(SHA256.hash(root.derRepresentation))
                == "63343abfb89a6a03ebb57e9b3f5fa7be7c4f5c756f3017b3a8c488c3653e9179")
        #expect(
            root.derRepresentation
                == (try Certificate(pemEncoded: Fixtures.string("apple-pay/AppleRootCA-G3.pem"))).derRepresentation)
    }

    @Test(arguments: names)
    func decryptsAtItsSigningTime(name: String) throws {
        let signedAt = try Self.signingTime(name)
        let decryptor = try PaymentTokenDecryptor(
            identities: [Self.identity(name)], clock: ManualClock(now: signedAt + 60))
        let result = try decryptor.decrypt(Self.token(name))
        #expect(abs(result.signature.signingTime.timeIntervalSince(signedAt)) < 1)
        #expect(result.signature.chain.count == 3)
        #expect(result.payment.transactionAmount == 100)
        #expect(result.payment.currencyCode == "840")
        let raw = try JSONSerialization.jsonObject(with: Fixtures.data("apple-pay/expected.json")) as! [String: Any]
        let expected = (raw[name] as! [String: Any])["payment_data"] as! [String: Any]
        #expect(
            result.payment.applicationPrimaryAccountNumber == expected["applicationPrimaryAccountNumber"] as? String)
        // The plaintext object is kept exactly: same keys and values as expected.json.
        let decoded = try JSONSerialization.jsonObject(with: Data(result.payment.plaintextJSON.utf8)) as! NSDictionary
        #expect(decoded == expected as NSDictionary)
    }

    @Test("A7: the real tokens are stale today", arguments: names)
    func staleAtTodaysDate(name: String) throws {
        let decryptor = try PaymentTokenDecryptor(identities: [Self.identity(name)])
        #expect(throws: MerchantKitError(.signingTimeTooOld, "")) { try decryptor.decrypt(Self.token(name)) }
        // And the chain itself has expired today.
        let verifier = try CMSVerifier(
            trustRoots: [AppleRootCertificates.rootCAG3], policy: .applePaymentTokenSigning)
        let token = try Self.token(name)
        let outcome = try verifier.verifyDetachedSignature(
            token.paymentData.signature, content: token.paymentData.signedBytes, at: .date(Date()))
        #expect(outcome.failure?.code == .certificateExpired)
    }

    @Test func insecureEvaluationAtSigningTimeSkipsOnlyFreshness() throws {
        let decryptor = try PaymentTokenDecryptor(
            identities: [Self.identity("gala-2015")], evaluation: .insecureAtSigningTime)
        #expect(try decryptor.decrypt(Self.token("gala-2015")).payment.transactionAmount == 100)
        // The signature is still checked.
        var token = try Self.token("gala-2015")
        token.paymentData.data[0] ^= 1
        #expect(throws: MerchantKitError(.signatureInvalid, "")) { try decryptor.decrypt(token) }
    }

    @Test("A8: every bit flip of a signed field is rejected")
    func everySignedFieldBitFlipIsRejected() throws {
        let name = "gala-2023"
        let decryptor = try PaymentTokenDecryptor(
            identities: [Self.identity(name)], clock: ManualClock(now: try Self.signingTime(name) + 60))
        let token = try Self.token(name)
        var mutants: [PaymentToken] = []
        for bit in stride(from: 0, to: token.paymentData.header.keyMaterialBytes.count * 8, by: 7) {
            var t = token
            var key = t.paymentData.header.keyMaterialBytes
            key[bit / 8] ^= UInt8(1 << (bit % 8))
            t.paymentData.header.keyMaterial = .ephemeralPublicKey(key)
            mutants.append(t)
        }
        for bit in stride(from: 0, to: token.paymentData.data.count * 8, by: 13) {
            var t = token
            t.paymentData.data[bit / 8] ^= UInt8(1 << (bit % 8))
            mutants.append(t)
        }
        for bit in 0..<(token.paymentData.header.transactionId.count * 8) {
            var t = token
            t.paymentData.header.transactionId[bit / 8] ^= UInt8(1 << (bit % 8))
            mutants.append(t)
        }
        var withApplicationData = token
        withApplicationData.paymentData.header.applicationData = SHA256.hash([1, 2, 3])
        mutants.append(withApplicationData)
        for bit in stride(from: 0, to: token.paymentData.signature.count * 8, by: 11) {
            var t = token
            t.paymentData.signature[bit / 8] ^= UInt8(1 << (bit % 8))
            mutants.append(t)
        }
        for mutant in mutants {
            #expect(throws: MerchantKitError.self) { try decryptor.decrypt(mutant) }
        }
    }

    @Test("A8: Wycheproof's invalid ephemeral keys are refused")
    func wycheproofInvalidEphemeralKeysAreRefused() throws {
        struct File: Decodable {
            struct Group: Decodable { let tests: [Case] }
            struct Case: Decodable { let `public`: String; let result: String; let flags: [String] }
            let testGroups: [Group]
        }
        let file = try JSONDecoder().decode(File.self, from: Fixtures.data("wycheproof/ecdh_secp256r1_test.json"))
        let name = "gala-2015"
        let identity = try Self.identity(name)
        let token = try Self.token(name)
        var refused = 0
        for test in file.testGroups.flatMap(\.tests) where test.result == "invalid" {
            guard let spki = StrictEncoding.hexDecode(test.public) else { continue }
            var t = token
            t.paymentData.header.keyMaterial = .ephemeralPublicKey(spki)
            #expect(throws: MerchantKitError(.invalidEphemeralKey, "")) {
                try PayloadDecryption(identities: [identity]).decrypt(t.paymentData)
            }
            refused += 1
        }
        #expect(refused > 50)
    }
}

@Suite("Decryptor with a test PKI")
struct DecryptorTests {
    @Test func roundTripsECAndRSAWithAndWithoutApplicationData() throws {
        let pki = try TestPKI()
        let decryptor = try pki.decryptor()
        let orderData = Array("order-1234".utf8)
        for certificate in [pki.ecCertificate, pki.rsaCertificate] {
            for applicationData in [nil, orderData] {
                let token = try pki.token(for: certificate, applicationData: applicationData)
                #expect(token.paymentData.version == (certificate == pki.rsaCertificate ? .rsaV1 : .ecV1))
                #expect(token.paymentData.signature.starts(with: [0x30, 0x80]))
                let reparsed = try PaymentToken(jsonBytes: Array(token.json.serialized.utf8))
                let result = try decryptor.decrypt(
                    reparsed, order: ExpectedOrder(applicationData: applicationData, amount: 1999, currencyCode: "840"))
                #expect(result.payment.json == TestPKI.samplePayment)
                #expect(result.payment.plaintextJSON == TestPKI.samplePayment.serialized)
            }
        }
    }

    @Test func emvPaymentDataRoundTrips() throws {
        let pki = try TestPKI()
        let emv = try StrictJSONParser.parse(
            Array(
                """
                {"applicationPrimaryAccountNumber":"6212345678901232","applicationExpirationDate":"301231",\
                "currencyCode":"156","transactionAmount":500,"paymentDataType":"EMV",\
                "paymentData":{"emvData":"nwIGAAAAAAEA","encryptedPINData":"0011"}}
                """.utf8), limits: .paymentToken)
        let token = try pki.token(for: pki.rsaCertificate, payment: emv)
        let result = try pki.decryptor().decrypt(token)
        #expect(result.payment.paymentDataType == .emv)
        #expect(result.payment.credential == .emv(emvData: "nwIGAAAAAAEA", encryptedPINData: "0011"))
    }

    @Test("A7: the signing time must be within the window on both sides")
    func freshnessWindowOnBothSides() throws {
        let pki = try TestPKI()
        let old = try pki.token(signedAt: TestPKI.now - 301)
        #expect(throws: MerchantKitError(.signingTimeTooOld, "")) { try pki.decryptor().decrypt(old) }
        let future = try pki.token(signedAt: TestPKI.now + 301)
        #expect(throws: MerchantKitError(.signingTimeTooNew, "")) { try pki.decryptor().decrypt(future) }
        let edge = try pki.token(signedAt: TestPKI.now - 299)
        #expect(try pki.decryptor().decrypt(edge).payment.transactionAmount == 1999)
    }

    @Test("A6: a foreign root and missing certificate markers are refused")
    func foreignRootAndMissingMarkers() throws {
        let pki = try TestPKI()
        let token = try pki.token()
        let other = try TestPKI()
        #expect(throws: MerchantKitError(.chainUntrusted, "")) {
            try other.decryptor(identities: [try pki.ecIdentity()]).decrypt(token)
        }
        for (leafMarker, intermediateMarker) in [(false, true), (true, false)] {
            let unmarked = try TestPKI(leafMarker: leafMarker, intermediateMarker: intermediateMarker)
            let t = try unmarked.token()
            #expect(throws: MerchantKitError(.markerMissing, "")) { try unmarked.decryptor().decrypt(t) }
        }
    }

    @Test("A6: extra or repeated certificates are refused")
    func extraOrRepeatedCertificatesAreRefused() throws {
        let pki = try TestPKI()
        var token = try pki.token()
        let signedBytes = token.paymentData.signedBytes
        for certificates in [
            [pki.leaf, pki.intermediate, pki.root], [pki.leaf, pki.leaf, pki.intermediate], [pki.leaf],
        ] {
            token.paymentData.signature = try CMS.signDetached(
                signedBytes, signer: pki.leaf, key: pki.leafKey, certificates: certificates, signingTime: TestPKI.now,
                encoding: .berIndefiniteLength)
            #expect(throws: MerchantKitError.self) { try pki.decryptor().decrypt(token) }
        }
    }

    @Test("A4: the wrong merchant is refused; key rotation keeps both keys")
    func wrongMerchantAndKeyRotation() throws {
        let pki = try TestPKI()
        let token = try pki.token()
        let stranger = try MerchantIdentity(
            key: .ec(try P256.KeyAgreement.PrivateKey()), merchantIdentifier: "merchant.other")
        #expect(throws: MerchantKitError(.unknownPublicKeyHash, "")) {
            try pki.decryptor(identities: [stranger]).decrypt(token)
        }
        // Two keys for one merchant during a rotation: tokens for either decrypt.
        let rotated = try pki.decryptor(identities: [stranger, try pki.ecIdentity(), try pki.rsaIdentity()])
        #expect(try rotated.decrypt(token).payment.transactionAmount == 1999)
        #expect(try rotated.decrypt(try pki.token(for: pki.rsaCertificate)).version == .rsaV1)
    }

    @Test("A5/A10: applicationData, amount and currency mismatches are refused")
    func applicationDataAmountAndCurrencyMismatches() throws {
        let pki = try TestPKI()
        let decryptor = try pki.decryptor()
        let withData = try pki.token(applicationData: Array("order-1".utf8))
        let withoutData = try pki.token()
        let cases: [(PaymentToken, ExpectedOrder)] = [
            (withData, ExpectedOrder(applicationData: Array("order-2".utf8), amount: 1999, currencyCode: "840")),
            (withData, ExpectedOrder(applicationData: nil, amount: 1999, currencyCode: "840")),
            (withoutData, ExpectedOrder(applicationData: Array("order-1".utf8), amount: 1999, currencyCode: "840")),
            (withoutData, ExpectedOrder(applicationData: nil, amount: 2000, currencyCode: "840")),
            (withoutData, ExpectedOrder(applicationData: nil, amount: 1999, currencyCode: "978")),
        ]
        for (token, order) in cases {
            #expect(throws: MerchantKitError(.orderMismatch, "")) { try decryptor.decrypt(token, order: order) }
        }
    }

    @Test("A10: the replay guard refuses a second use")
    func replayGuardRefusesASecondUse() throws {
        let pki = try TestPKI()
        let clock = ManualClock(now: TestPKI.now)
        let decryptor = try pki.decryptor(replayGuard: InMemoryReplayGuard(clock: clock))
        let token = try pki.token()
        _ = try decryptor.decrypt(token)
        #expect(throws: MerchantKitError(.replayed, "")) { try decryptor.decrypt(token) }
        _ = try decryptor.decrypt(try pki.token())  // another transaction is fine
    }

    @Test func identityKeyMismatchIsAConfigurationError() throws {
        let pki = try TestPKI()
        #expect(throws: MerchantKitError(.invalidConfiguration, "")) {
            try MerchantIdentity(
                certificate: pki.ecCertificate, privateKeyPEM: try P256.KeyAgreement.PrivateKey().pemRepresentation)
        }
    }
}
