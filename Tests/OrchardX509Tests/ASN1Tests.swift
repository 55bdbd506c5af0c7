import Foundation
import OrchardCrypto
import OrchardX509
import Testing

@Suite("ASN.1 reader and writer")
struct ASN1Tests {
    // MARK: Tags and lengths

    @Test func highTagNumbersRoundTrip() throws {
        // [201] constructed: 0xBF, then 201 = 0x81 0x49 in base 128.
        let tag = ASN1Tag.contextSpecific(201, constructed: true)
        #expect(tag.encoded == [0xBF, 0x81, 0x49])
        let encoded = DERWriter.encode { $0.appendConstructed(tag) { $0.appendNull() } }
        #expect(encoded == [0xBF, 0x81, 0x49, 0x02, 0x05, 0x00])
        let element = try ASN1.parse(encoded)
        #expect(element.tag == tag)
        var children = try element.children()
        try children.next().null("child")
        #expect(children.isAtEnd)
        // [APPLICATION 31] is the smallest number in the high-tag form.
        let application = ASN1Tag(number: 31, tagClass: .application, isConstructed: false)
        #expect(application.encoded == [0x5F, 0x1F])
        #expect(try ASN1.parse([0x5F, 0x1F, 0x00]).tag == application)
    }

    @Test func malformedHighTagsAreRejected() {
        // Leading 0x80 in the tag number, and the high form for a number below 31.
        #expect(throws: X509Error(.invalidTag, "")) { try ASN1.parse([0x1F, 0x80, 0x01, 0x00]) }
        #expect(throws: X509Error(.invalidTag, "")) { try ASN1.parse([0x1F, 0x05, 0x00]) }
        // More than 8 base-128 digits.
        #expect(throws: X509Error(.invalidTag, "")) {
            try ASN1.parse([0x1F] + Array(repeating: 0xFF, count: 9) + [0x01, 0x00])
        }
    }

    @Test func longLengthsAreWrittenMinimally() throws {
        let short = DERWriter.encode { $0.appendOctetString([UInt8](repeating: 7, count: 127)) }
        #expect(Array(short.prefix(2)) == [0x04, 0x7F])
        let one = DERWriter.encode { $0.appendOctetString([UInt8](repeating: 7, count: 200)) }
        #expect(Array(one.prefix(3)) == [0x04, 0x81, 0xC8])
        let two = DERWriter.encode { w in
            w.appendConstructed(.sequence) { $0.appendOctetString([UInt8](repeating: 7, count: 300)) }
        }
        #expect(Array(two.prefix(8)) == [0x30, 0x82, 0x01, 0x30, 0x04, 0x82, 0x01, 0x2C])
        #expect(try ASN1.parse(two).childElements()[0].octetString("x").count == 300)
    }

    @Test func derRejectsNonMinimalLengthsThatBERAccepts() throws {
        let longFormForSmall: [UInt8] = [0x04, 0x81, 0x01, 0xAA]
        #expect(throws: X509Error(.invalidLength, "")) { try ASN1.parse(longFormForSmall, rules: .der) }
        #expect(try ASN1.parse(longFormForSmall, rules: .ber).contentBytes.elementsEqual([0xAA]))
        let leadingZero: [UInt8] = [0x04, 0x82, 0x00, 0x81] + [UInt8](repeating: 0, count: 0x81)
        #expect(throws: X509Error(.invalidLength, "")) { try ASN1.parse(leadingZero, rules: .der) }
        #expect(try ASN1.parse(leadingZero, rules: .ber).contentBytes.count == 0x81)
    }

    @Test func overlongAndTruncatedLengthsAreTypedErrors() {
        // A 9-byte length field, the reserved 0xFF, a 4 GiB length over the limit, lengths past the end.
        #expect(throws: X509Error(.invalidLength, "")) {
            try ASN1.parse([0x04, 0x89] + [UInt8](repeating: 1, count: 9))
        }
        #expect(throws: X509Error(.invalidLength, "")) { try ASN1.parse([0x04, 0xFF]) }
        #expect(throws: X509Error(.lengthLimitExceeded, "")) { try ASN1.parse([0x04, 0x84, 0xFF, 0xFF, 0xFF, 0xFF]) }
        #expect(throws: X509Error(.truncated, "")) { try ASN1.parse([0x30, 0x05, 0x02, 0x01]) }
        #expect(throws: X509Error(.truncated, "")) { try ASN1.parse([0x30]) }
        #expect(throws: X509Error(.truncated, "")) { try ASN1.parse([0x04, 0x82, 0x01]) }
        #expect(throws: X509Error(.truncated, "")) { try ASN1.parse([]) }
        #expect(throws: X509Error(.trailingData, "")) { try ASN1.parse([0x05, 0x00, 0x00]) }
        let limits = ASN1Limits(maximumDepth: 64, maximumLength: 10)
        #expect(throws: X509Error(.lengthLimitExceeded, "")) {
            try ASN1.parse([0x04, 0x0B] + [UInt8](repeating: 0, count: 11), limits: limits)
        }
    }

    // MARK: Indefinite lengths

    @Test func indefiniteLengthsInBERKeepTheOriginalBytes() throws {
        let input: [UInt8] = [0x30, 0x80, 0x02, 0x01, 0x05, 0x30, 0x80, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00]
        let element = try ASN1.parse(input, rules: .ber)
        #expect(element.isIndefiniteLength)
        #expect(Array(element.encodedBytes) == input)
        #expect(Array(element.contentBytes) == Array(input[2..<11]))
        var children = try element.children()
        #expect(try children.next().integerValue("n") == 5)
        let inner = try children.next()
        #expect(inner.isIndefiniteLength && Array(inner.contentBytes) == [0x05, 0x00])
        #expect(children.isAtEnd)
        try ASN1.validate(input[...], rules: .ber)
    }

    @Test func indefiniteLengthIsRejectedInDERAndOnPrimitives() {
        let input: [UInt8] = [0x30, 0x80, 0x05, 0x00, 0x00, 0x00]
        #expect(throws: X509Error(.indefiniteLengthNotAllowed, "")) { try ASN1.parse(input, rules: .der) }
        #expect(throws: X509Error(.indefiniteLengthNotAllowed, "")) {
            try ASN1.parse([0x04, 0x80, 0x00, 0x00], rules: .ber)
        }
        // Missing end-of-contents, end-of-contents with a length, and end-of-contents at the top level.
        #expect(throws: X509Error(.truncated, "")) { try ASN1.parse([0x30, 0x80, 0x05, 0x00], rules: .ber) }
        #expect(throws: X509Error(.invalidLength, "")) { try ASN1.parse([0x30, 0x80, 0x00, 0x01, 0x00], rules: .ber) }
        #expect(throws: X509Error(.invalidTag, "")) { try ASN1.parse([0x00, 0x00], rules: .ber) }
    }

    @Test("F1: ten thousand levels of DER nesting give a typed error")
    func tenThousandLevelsOfNestingGiveATypedError() throws {
        let depth = 10_000
        // Definite lengths: each level wraps the next; lengths grow, so build from the inside out.
        var definite: [UInt8] = [0x05, 0x00]
        for _ in 0..<depth {
            let length = definite.count
            let header: [UInt8] =
                length < 0x80
                ? [0x30, UInt8(length)]
                : length < 0x100
                    ? [0x30, 0x81, UInt8(length)]
                    : length < 0x10000
                        ? [0x30, 0x82, UInt8(length >> 8), UInt8(length & 0xFF)]
                        : [0x30, 0x83, UInt8(length >> 16), UInt8((length >> 8) & 0xFF), UInt8(length & 0xFF)]
            definite = header + definite
        }
        #expect(throws: X509Error(.nestingTooDeep, "")) { try ASN1.validate(definite[...]) }
        #expect(throws: X509Error.self) { try Certificate(derEncoded: definite) }
        #expect(throws: X509Error.self) { try CertificateSigningRequest(derEncoded: definite) }

        // Indefinite lengths: finding the end of the outer element needs the whole depth.
        let indefinite =
            [UInt8](repeating: 0x30, count: depth).flatMap { [$0, 0x80] } + [UInt8](repeating: 0, count: 2 * depth)
        #expect(throws: X509Error(.nestingTooDeep, "")) { try ASN1.parse(indefinite, rules: .ber) }
        #expect(throws: X509Error(.nestingTooDeep, "")) { try CMSSignedData(berEncoded: indefinite) }
        // Within the limit, the same shape is fine.
        let shallow = [UInt8](repeating: 0x30, count: 20).flatMap { [$0, 0x80] } + [UInt8](repeating: 0, count: 40)
        try ASN1.validate(shallow[...], rules: .ber)
    }

    // MARK: Primitive values

    @Test func integers() throws {
        #expect(try ASN1.parse([0x02, 0x01, 0x80]).integerValue("n") == -128)
        #expect(try ASN1.parse([0x02, 0x02, 0x00, 0x80]).integerValue("n") == 128)
        #expect(try ASN1.parse([0x02, 0x01, 0x00]).integerValue("n") == 0)
        #expect(DERWriter.encode { $0.appendInteger(128) } == [0x02, 0x02, 0x00, 0x80])
        #expect(DERWriter.encode { $0.appendInteger(-129) } == [0x02, 0x02, 0xFF, 0x7F])
        #expect(DERWriter.encode { $0.appendUnsignedInteger([0x00, 0x00, 0xFF]) } == [0x02, 0x02, 0x00, 0xFF])
        #expect(throws: X509Error(.invalidValue, "")) { try ASN1.parse([0x02, 0x02, 0x00, 0x01]).integerValue("n") }
        #expect(throws: X509Error(.invalidValue, "")) { try ASN1.parse([0x02, 0x02, 0xFF, 0x80]).integerValue("n") }
        #expect(throws: X509Error(.invalidValue, "")) { try ASN1.parse([0x02, 0x00]).integerValue("n") }
        #expect(throws: X509Error(.invalidValue, "")) {
            try ASN1.parse([0x02, 0x09, 0x01] + [UInt8](repeating: 0, count: 8)).integerValue("n")
        }
        #expect(throws: X509Error(.unexpectedElement, "")) { try ASN1.parse([0x05, 0x00]).integerValue("n") }
    }

    @Test func objectIdentifiers() throws {
        let rsa = try ASN1ObjectIdentifier("1.2.840.113549")
        #expect(rsa.contentBytes == [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D])
        #expect(rsa.description == "1.2.840.113549")
        let large = try ASN1ObjectIdentifier("2.999.3")
        #expect(large.contentBytes == [0x88, 0x37, 0x03])
        #expect(large.arcs == [2, 999, 3])
        #expect(ASN1ObjectIdentifier.appleTokenSigningLeaf.description == "1.2.840.113635.100.6.29")
        #expect(ASN1ObjectIdentifier.userID.description == "0.9.2342.19200300.100.1.1")
        // A UUID arc (X.667's example, DER as `openssl asn1parse -genstr` writes it): 128 bits round trip; 129 do not.
        let uuid = try ASN1ObjectIdentifier("2.25.329800735698586629295641978511506172918")
        #expect(uuid.contentBytes == bytes("6983f09da7ebcfdee0c7a1a7b2c0948cc8f9d776"))
        #expect(try ASN1.parse([0x06, 0x14] + uuid.contentBytes).objectIdentifier("oid") == uuid)
        #expect(uuid.arcs == [2, 25, 329_800_735_698_586_629_295_641_978_511_506_172_918])
        let widest = try ASN1ObjectIdentifier(arcs: [2, 25, UInt128.max])
        #expect(widest.contentBytes == [0x69, 0x83] + [UInt8](repeating: 0xFF, count: 17) + [0x7F])
        #expect(try ASN1ObjectIdentifier(contentBytes: widest.contentBytes[...]) == widest)
        #expect(throws: X509Error(.invalidValue, "")) {
            try ASN1ObjectIdentifier(contentBytes: ([0x69, 0x84] + [UInt8](repeating: 0x80, count: 17) + [0x00])[...])
        }
        #expect(throws: X509Error(.invalidValue, "")) {
            try ASN1ObjectIdentifier("2.25.340282366920938463463374607431768211456")
        }
        #expect(
            ASN1ObjectIdentifier.orchardMerchantSessionSigningLeaf.description.hasPrefix(
                ASN1ObjectIdentifier.orchard.description + "."))
        let parsed = try ASN1.parse(DERWriter.encode { $0.appendObjectIdentifier(.appleApplicationIntegrationCA) })
        #expect(try parsed.objectIdentifier("oid") == .appleApplicationIntegrationCA)
        for bad in ["1", "3.1", "1.40", "a.b", "1..2", ""] {
            #expect(throws: X509Error(.invalidValue, "")) { try ASN1ObjectIdentifier(bad) }
        }
        #expect(throws: X509Error(.invalidValue, "")) {
            try ASN1.parse([0x06, 0x02, 0x80, 0x01]).objectIdentifier("oid")
        }
        #expect(throws: X509Error(.invalidValue, "")) { try ASN1.parse([0x06, 0x01, 0x81]).objectIdentifier("oid") }
        #expect(throws: X509Error(.invalidValue, "")) { try ASN1.parse([0x06, 0x00]).objectIdentifier("oid") }
    }

    @Test func everyConstantRoundTrips() throws {
        let constants: [ASN1ObjectIdentifier] = [
            .sha256, .sha384, .ecPublicKey, .prime256v1, .secp384r1, .ecdsaWithSHA256, .ecdsaWithSHA384, .rsaEncryption,
            .sha256WithRSAEncryption, .commonName, .surname, .serialNumber, .countryName, .localityName,
            .stateOrProvinceName, .organizationName, .organizationalUnitName, .userID, .domainComponent, .emailAddress,
            .subjectKeyIdentifier, .keyUsage, .subjectAlternativeName, .basicConstraints, .authorityKeyIdentifier,
            .extendedKeyUsage, .serverAuth, .clientAuth, .appleTokenSigningLeaf, .appleApplicationIntegrationCA,
            .appleMerchantIdentifier, .cmsData, .cmsSignedData, .contentTypeAttribute, .messageDigestAttribute,
            .signingTimeAttribute, .extensionRequest, .algorithmProtectionAttribute, .appleMerchantIdentityMarker,
            .orchard, .orchardMerchantSessionSigningLeaf, .orchardDomainAssociationSigningLeaf,
            .orchardCapabilityStatementSigningLeaf,
        ]
        #expect(Set(constants).count == constants.count)
        for oid in constants {
            #expect(try ASN1ObjectIdentifier(oid.description) == oid)
            #expect(try ASN1ObjectIdentifier(arcs: oid.arcs) == oid)
        }
        #expect(ASN1ObjectIdentifier.sha256.contentBytes == bytes("608648016503040201"))
    }

    @Test func booleansNullAndBitStrings() throws {
        #expect(try ASN1.parse([0x01, 0x01, 0xFF]).boolean("b"))
        #expect(try !ASN1.parse([0x01, 0x01, 0x00]).boolean("b"))
        #expect(throws: X509Error(.invalidValue, "")) { try ASN1.parse([0x01, 0x01, 0x01], rules: .der).boolean("b") }
        #expect(try ASN1.parse([0x01, 0x01, 0x01], rules: .ber).boolean("b"))
        #expect(throws: X509Error(.invalidValue, "")) { try ASN1.parse([0x05, 0x01, 0x00]).null("n") }
        let bits = try ASN1.parse([0x03, 0x02, 0x07, 0x80]).bitString("k")
        #expect(bits.unusedBits == 7 && Array(bits.bytes) == [0x80])
        #expect(throws: X509Error(.invalidValue, "")) { try ASN1.parse([0x03, 0x02, 0x07, 0x81]).bitString("k") }
        #expect(throws: X509Error(.invalidValue, "")) { try ASN1.parse([0x03, 0x02, 0x08, 0x00]).bitString("k") }
        #expect(throws: X509Error(.invalidValue, "")) { try ASN1.parse([0x03, 0x01, 0x01]).bitString("k") }
        // KeyUsage named bits, trailing zeros dropped (known answers from OpenSSL-made certificates).
        #expect(DERWriter.encode { $0.appendNamedBits(1) } == [0x03, 0x02, 0x07, 0x80])
        #expect(
            DERWriter.encode { $0.appendNamedBits(UInt64(KeyUsage([.keyCertSign, .cRLSign]).rawValue)) } == [
                0x03, 0x02, 0x01, 0x06,
            ])
        #expect(
            DERWriter.encode { $0.appendNamedBits(UInt64(KeyUsage.decipherOnly.rawValue)) } == [
                0x03, 0x03, 0x07, 0x00, 0x80,
            ])
    }

    @Test func constructedOctetStringsOnlyInBER() throws {
        let input: [UInt8] = [0x24, 0x80, 0x04, 0x02, 0xAA, 0xBB, 0x24, 0x03, 0x04, 0x01, 0xCC, 0x00, 0x00]
        #expect(Array(try ASN1.parse(input, rules: .ber).octetString("s")) == [0xAA, 0xBB, 0xCC])
        let definite: [UInt8] = [0x24, 0x04, 0x04, 0x02, 0xAA, 0xBB]
        #expect(throws: X509Error(.unexpectedElement, "")) { try ASN1.parse(definite, rules: .der).octetString("s") }
        let wrongSegment: [UInt8] = [0x24, 0x03, 0x02, 0x01, 0x01]
        #expect(throws: X509Error(.unexpectedElement, "")) {
            try ASN1.parse(wrongSegment, rules: .ber).octetString("s")
        }
    }

    @Test func strings() throws {
        #expect(try ASN1.parse([0x0C, 0x02, 0xC3, 0xA9]).string("s") == "é")
        #expect(try ASN1.parse([0x13, 0x02, 0x55, 0x53]).string("s") == "US")
        #expect(try ASN1.parse([0x1E, 0x04, 0x00, 0x41, 0x00, 0xE9]).string("s") == "Aé")
        #expect(throws: X509Error(.invalidValue, "")) { try ASN1.parse([0x0C, 0x02, 0xC3, 0x28]).string("s") }
        #expect(throws: X509Error(.invalidValue, "")) { try ASN1.parse([0x13, 0x01, 0x40]).string("s") }
        #expect(throws: X509Error(.invalidValue, "")) { try ASN1.parse([0x16, 0x01, 0x80]).string("s") }
        #expect(throws: X509Error(.unexpectedElement, "")) { try ASN1.parse([0x04, 0x01, 0x41]).string("s") }
        #expect(throws: X509Error(.invalidValue, "")) {
            try DERWriter.encode { (w) throws(X509Error) in try w.appendPrintableString("a@b") }
        }
    }

    @Test func times() throws {
        func parse(_ tag: UInt8, _ text: String) throws(X509Error) -> Date {
            try ASN1.parse([tag, UInt8(text.utf8.count)] + Array(text.utf8)).time("t")
        }
        #expect(try parse(0x17, "491231235959Z") == TestPKI.date(2050, 1, 1) - 1)
        #expect(try parse(0x17, "500101000000Z") == TestPKI.date(1950, 1, 1))
        #expect(try parse(0x17, "240229120000Z") == TestPKI.date(2024, 2, 29) + 12 * 3600)
        #expect(try parse(0x18, "20500101000000Z") == TestPKI.date(2050, 1, 1))
        #expect(try parse(0x18, "19691231235959Z") == Date(timeIntervalSince1970: -1))
        for bad in [
            "991332000000Z", "230229000000Z", "230101240000Z", "2301010000Z", "230101000000+0100", "23010100000aZ",
        ] {
            #expect(throws: X509Error(.invalidValue, "")) { try parse(0x17, bad) }
        }
        #expect(throws: X509Error(.invalidValue, "")) { try parse(0x18, "20500101000000.5Z") }
        // The writer picks UTCTime before 2050 and GeneralizedTime from 2050 (RFC 5280).
        let before = try DERWriter.encode { (w) throws(X509Error) in try w.appendTime(TestPKI.date(2049, 12, 31)) }
        #expect(before == [0x17, 0x0D] + Array("491231000000Z".utf8))
        let after = try DERWriter.encode { (w) throws(X509Error) in try w.appendTime(TestPKI.date(2050, 1, 1)) }
        #expect(after == [0x18, 0x0F] + Array("20500101000000Z".utf8))
        // Round trips over a wide range, including fractional seconds (rounded down).
        for seconds in stride(from: -2_000_000_000.0, to: 4_000_000_000.0, by: 123_456_789.25) {
            let date = Date(timeIntervalSince1970: seconds)
            let encoded = try DERWriter.encode { (w) throws(X509Error) in try w.appendTime(date) }
            #expect(try ASN1.parse(encoded).time("t") == Date(timeIntervalSince1970: seconds.rounded(.down)))
        }
    }

    @Test func setOfIsSortedAndNamesRoundTrip() throws {
        let set = DERWriter.encode {
            $0.appendSetOf(elements: [[0x04, 0x01, 0x02], [0x02, 0x01, 0x05], [0x04, 0x01, 0x01]])
        }
        #expect(set == [0x31, 0x09, 0x02, 0x01, 0x05, 0x04, 0x01, 0x01, 0x04, 0x01, 0x02])
        let name = DistinguishedName([.userID("merchant.com.example"), .commonName("Example"), .country("US")])
        let parsed = try DistinguishedName(derEncoded: name.derRepresentation)
        #expect(parsed == name)
        #expect(parsed.userID == "merchant.com.example")
        #expect(parsed.country == "US")
        #expect(parsed.description == "UID=merchant.com.example, CN=Example, C=US")
        // Country is a PrintableString (tag 0x13), the others UTF8String (0x0C).
        #expect(parsed.relativeNames[2][0].encodedValue.first == 0x13)
        #expect(parsed.relativeNames[0][0].encodedValue.first == 0x0C)
    }

    @Test func readerNavigation() throws {
        let encoded = DERWriter.encode { w in
            w.appendConstructed(.sequence) { w in
                w.appendInteger(1)
                w.appendConstructed(.contextSpecific(0, constructed: true)) { $0.appendBoolean(true) }
            }
        }
        var reader = try ASN1.parse(encoded).children()
        #expect(reader.peekTag() == .integer)
        #expect(try reader.nextIfPresent(.boolean) == nil)
        _ = try reader.next(.integer, "n")
        #expect(throws: X509Error(.unexpectedElement, "")) { try reader.next(.sequence, "x") }
        #expect(throws: X509Error(.unexpectedElement, "")) { try ASN1.parse(encoded).childElements()[0].children() }
    }
}
