import Foundation
import OrchardCrypto
import OrchardFixtures
import OrchardX509
import Testing

@Suite("Certificates: parsing")
struct CertificateParsingTests {
    /// Every real certificate the fixtures hold: Apple's root, the leaves and intermediates inside the
    /// three tokens' signatures, and the three merchant processing certificates.
    static func realCertificates() throws -> [(name: String, certificate: Certificate)] {
        var out: [(String, Certificate)] = [("AppleRootCA-G3", try AppleToken.appleRoot())]
        for name in AppleToken.names {
            let token = try AppleToken.load(name)
            for (i, c) in try CMSSignedData(berEncoded: token.signature).certificates.enumerated() {
                out.append(("\(name) signature certificate \(i)", c))
            }
        }
        for path in ["gala-2015/certificate.pem", "gala-2023/certificate.pem", "basis-rsa/apple_pay.pem"] {
            out.append((path, try Certificate(pemEncoded: Fixtures.string("apple-pay/\(path)"))))
        }
        return out
    }

    @Test func appleRootCA() throws {
        let root = try AppleToken.appleRoot()
        #expect(root.subject.commonName == "Apple Root CA - G3")
        #expect(root.subject.organization == "Apple Inc.")
        #expect(root.subject.country == "US")
        #expect(root.isSelfIssued)
        #expect(root.version == 3)
        #expect(root.notValidBefore == TestPKI.date(2014, 4, 30) + 18 * 3600 + 19 * 60 + 6)
        #expect(root.notValidAfter == TestPKI.date(2039, 4, 30) + 18 * 3600 + 19 * 60 + 6)
        #expect(root.subjectPublicKeyInfo.algorithm.algorithm == .ecPublicKey)
        #expect(
            root.subjectPublicKeyInfo.algorithm.parameters == DERWriter.encode { $0.appendObjectIdentifier(.secp384r1) }
        )
        #expect(root.signatureAlgorithm.algorithm == .ecdsaWithSHA384)
        #expect(try root.basicConstraints == BasicConstraints(isCA: true))
        #expect(try root.keyUsage == [.keyCertSign, .cRLSign])
        // P-384 is not a key type Orchard signs with; chains through it are checked by OpenSSL.
        #expect(throws: X509Error(.unsupportedAlgorithm, "")) { try root.publicKey }
        #expect(try root.subjectKeyIdentifier == bytes("BBB0DEA15833889AA48A99DEBEBDEBAFDACB24AB"))
    }

    @Test("F2: the Swift parser agrees with OpenSSL on every real certificate")
    func swiftParserAgreesWithOpenSSLOnEveryRealCertificate() throws {
        let certificates = try Self.realCertificates()
        #expect(certificates.count == 10)
        for (name, c) in certificates {
            let reference = try OpenSSLReference.certificateFields(c.derRepresentation)
            #expect(reference.reencoded == c.derRepresentation, "\(name): OpenSSL re-encodes to the same DER")
            #expect(reference.tbsDER == Array(c.tbsCertificateBytes), "\(name): tbsCertificate")
            #expect(reference.subjectDER == c.subject.derRepresentation, "\(name): subject")
            #expect(reference.issuerDER == c.issuer.derRepresentation, "\(name): issuer")
            #expect(reference.serialMagnitude == Array(c.serialNumber.drop(while: { $0 == 0 })), "\(name): serial")
            #expect(reference.notBefore == c.notValidBefore, "\(name): notBefore")
            #expect(reference.notAfter == c.notValidAfter, "\(name): notAfter")
            #expect(reference.subjectPublicKeyInfoDER == c.subjectPublicKeyInfo.derRepresentation, "\(name): SPKI")
            #expect(reference.signatureAlgorithm == c.signatureAlgorithm.algorithm.description, "\(name): algorithm")
            #expect(reference.signature == c.signature, "\(name): signature")
            #expect(
                reference.extensions
                    == c.extensions.map { .init(oid: $0.oid.description, critical: $0.isCritical, value: $0.value) },
                "\(name): extensions")
        }
    }

    @Test func appleSigningCertificatesCarryTheMarkers() throws {
        for name in AppleToken.names {
            let token = try AppleToken.load(name)
            let certificates = try CMSSignedData(berEncoded: token.signature).certificates
            #expect(certificates.count == 2)
            let leaf = certificates[0]
            let intermediate = certificates[1]
            #expect(leaf.subject.commonName == token.leafCommonName)
            #expect(intermediate.subject.commonName == "Apple Application Integration CA - G3")
            #expect(leaf.extension(.appleTokenSigningLeaf)?.value == [0x05, 0x00])
            #expect(leaf.extension(.appleTokenSigningLeaf)?.isCritical == false)
            #expect(intermediate.extension(.appleApplicationIntegrationCA)?.value == [0x05, 0x00])
            #expect(ApplePayCertificates.hasTokenSigningMarkers(leaf: leaf, intermediate: intermediate))
            #expect(!ApplePayCertificates.hasTokenSigningMarkers(leaf: intermediate, intermediate: leaf))
            #expect(ApplePayCertificates.tokenSigningChainViolation([leaf]) != nil)
            #expect(try leaf.authorityKeyIdentifier == intermediate.subjectKeyIdentifier)
            // The leaf's ECDSA signature by the intermediate (P-256) verifies in Swift.
            #expect(leaf.isSignature(validUnder: try intermediate.publicKey))
            #expect(!intermediate.isSignature(validUnder: try intermediate.publicKey))
            #expect((try leaf.publicKey.rsa != nil) == token.isRSA)
        }
    }

    @Test func merchantCertificatesCarryTheMerchantIdentifier() throws {
        let expected = try #require(
            try JSONSerialization.jsonObject(with: Fixtures.data("apple-pay/expected.json")) as? [String: [String: Any]]
        )
        for (folder, file) in [("gala-2015", "certificate.pem"), ("gala-2023", "certificate.pem")] {
            let c = try Certificate(pemEncoded: Fixtures.string("apple-pay/\(folder)/\(file)"))
            let hex = try #require(expected[folder]?["merchant_id_ext"] as? String)
            #expect(try c.appleMerchantIdentifierHash == bytes(hex))
            let token = try AppleToken.load(folder)
            #expect(SHA256.hash(c.subjectPublicKeyInfo.derRepresentation) == token.publicKeyHash)
        }
        // Method 1 = method 2: SHA-256 of the subject's UID is the extension's value.
        let gala = try Certificate(pemEncoded: Fixtures.string("apple-pay/gala-2023/certificate.pem"))
        #expect(gala.subject.userID == "merchant.test.spreedly.123merchant")
        #expect(try gala.appleMerchantIdentifierHash == SHA256.hash(Array("merchant.test.spreedly.123merchant".utf8)))
        let rsa = try Certificate(pemEncoded: Fixtures.string("apple-pay/basis-rsa/apple_pay.pem"))
        #expect(try rsa.publicKey.rsa?.keySizeInBits == 2048)
        #expect(
            SHA256.hash(rsa.subjectPublicKeyInfo.derRepresentation) == (try AppleToken.load("basis-rsa").publicKeyHash))
        #expect(try rsa.appleMerchantIdentifierHash?.count == 32)
    }

    @Test func pemBundlesAndErrors() throws {
        let root = try AppleToken.appleRoot()
        let gala = try Certificate(pemEncoded: Fixtures.string("apple-pay/gala-2023/certificate.pem"))
        let bundle = root.pemRepresentation + "junk between blocks\n" + gala.pemRepresentation
        #expect(try Certificate.certificates(fromPEM: bundle) == [root, gala])
        #expect(throws: X509Error(.invalidPEM, "")) { try Certificate(pemEncoded: "no certificate") }
        #expect(throws: X509Error(.invalidPEM, "")) {
            try Certificate.certificates(fromPEM: "-----BEGIN CERTIFICATE-----\n!!\n-----END CERTIFICATE-----\n")
        }
    }

    @Test func truncatedCertificatesAreTypedErrors() throws {
        for (_, c) in try Self.realCertificates().prefix(3) {
            let der = c.derRepresentation
            for length in 0..<der.count {
                #expect(throws: X509Error.self) { try Certificate(derEncoded: der[0..<length]) }
            }
            #expect(throws: X509Error(.trailingData, "")) { try Certificate(derEncoded: der + [0x00]) }
        }
    }

    @Test func bitFlipsNeverCrashAndAreCaughtBySignatureOrParser() throws {
        let token = try AppleToken.load("gala-2023")
        let certificates = try CMSSignedData(berEncoded: token.signature).certificates
        let leaf = certificates[0]
        let issuerKey = try certificates[1].publicKey
        let der = leaf.derRepresentation
        for index in 0..<der.count {
            var flipped = der
            flipped[index] ^= 0x01
            do {
                let c = try Certificate(derEncoded: flipped)
                // Whatever still parses must not verify under the issuer's key.
                #expect(!c.isSignature(validUnder: issuerKey), "flip at \(index) still verifies")
            } catch {
                // A typed error is fine.
            }
        }
    }

    @Test func structuralRulesAreEnforced() throws {
        let pki = try TestPKI()
        let der = pki.leaf.derRepresentation
        // Non-minimal length in the outer SEQUENCE (BER, not DER).
        let lengthBytes = Int(der[1] & 0x7F)
        let bodyLength = der.count - 2 - lengthBytes
        let nonMinimal =
            [
                0x30, 0x84, UInt8(bodyLength >> 24), UInt8((bodyLength >> 16) & 0xFF), UInt8((bodyLength >> 8) & 0xFF),
                UInt8(bodyLength & 0xFF),
            ] + der[(2 + lengthBytes)...]
        #expect(throws: X509Error(.invalidLength, "")) { try Certificate(derEncoded: nonMinimal) }

        // An outer signature algorithm different from the inner one.
        let element = try ASN1.parse(der)
        let parts = try element.childElements()
        let mismatched = DERWriter.encode { w in
            w.appendConstructed(.sequence) { w in
                w.appendEncoded(parts[0].encodedBytes)
                w.appendConstructed(.sequence) { $0.appendObjectIdentifier(.ecdsaWithSHA384) }
                w.appendEncoded(parts[2].encodedBytes)
            }
        }
        #expect(throws: X509Error(.invalidValue, "")) { try Certificate(derEncoded: mismatched) }

        // Duplicate extension OIDs and an explicit critical FALSE.
        let tbsFields = try parts[0].childElements()
        func rebuilt(extensions: [[UInt8]]) -> [UInt8] {
            DERWriter.encode { w in
                w.appendConstructed(.sequence) { w in
                    w.appendConstructed(.sequence) { w in
                        for field in tbsFields.dropLast() { w.appendEncoded(field.encodedBytes) }
                        w.appendConstructed(.contextSpecific(3, constructed: true)) { w in
                            w.appendConstructed(.sequence) { w in for e in extensions { w.appendEncoded(e) } }
                        }
                    }
                    w.appendEncoded(parts[1].encodedBytes)
                    w.appendEncoded(parts[2].encodedBytes)
                }
            }
        }
        let marker = DERWriter.encode { w in
            w.appendConstructed(.sequence) { w in
                w.appendObjectIdentifier(.appleTokenSigningLeaf)
                w.appendOctetString([0x05, 0x00])
            }
        }
        let explicitFalse = DERWriter.encode { w in
            w.appendConstructed(.sequence) { w in
                w.appendObjectIdentifier(.appleTokenSigningLeaf)
                w.appendBoolean(false)
                w.appendOctetString([0x05, 0x00])
            }
        }
        #expect(try Certificate(derEncoded: rebuilt(extensions: [marker])).extensions.count == 1)
        #expect(throws: X509Error(.invalidValue, "")) {
            try Certificate(derEncoded: rebuilt(extensions: [marker, marker]))
        }
        #expect(throws: X509Error(.invalidValue, "")) {
            try Certificate(derEncoded: rebuilt(extensions: [explicitFalse]))
        }
        #expect(throws: X509Error(.invalidValue, "")) { try Certificate(derEncoded: rebuilt(extensions: [])) }
    }
}
