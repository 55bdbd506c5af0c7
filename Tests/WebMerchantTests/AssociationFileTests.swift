import CommandTestSupport
import Foundation
import OrchardCrypto
import OrchardX509
import PayServer
import PaymentToken
import Testing
import WebMerchantAPI

/// Domain-association files (docs/web.md): the canonical hex-of-JSON format, the CMS by the token-signing leaf,
/// and the parser's typed refusals.
@Suite("Web merchants: domain-association files")
struct AssociationFileTests {
    static let merchant = "merchant.dev.orchard.demo"
    /// SHA-256("merchant.dev.orchard.demo"), upper-case hex (computed with Python's hashlib).
    static let merchantHash = "D80F0FEB1C0429AD2007F96B7AC06B359D7C00C053F0D4AA92BFD72077D8ADC0"

    /// A token-signing chain whose leaf is a domain-association signing leaf.
    static func pki() throws -> TokenSigningPKI {
        let now = Date()
        return try TokenSigningPKI.generate(
            notValidBefore: now.addingTimeInterval(-86_400), notValidAfter: now.addingTimeInterval(10 * 365 * 86_400)
        ).issuingLeaf(for: .domainAssociationFile, notValidBefore: now.addingTimeInterval(-86_400))
    }

    @Test("Known answer: the merchant hash, the canonical JSON and its upper-case hex")
    func knownAnswer() throws {
        #expect(AssociationFiles.merchantHash(Self.merchant) == Self.merchantHash)
        let file = DomainAssociationFile(
            pspId: Self.merchantHash, createdOn: 1_646_040_487_087, signature: [0x30, 0x80, 0xFF])
        #expect(
            String(decoding: file.signedContent, as: UTF8.self)
                == "{\"createdOn\":1646040487087,\"pspId\":\"\(Self.merchantHash)\",\"version\":1}")
        // The expected text was computed independently (Python: json text .encode().hex().upper()).
        let expected =
            "7B22637265617465644F6E223A313634363034303438373038372C227073704964223A22443830463046454231433034323941"
            + "4432303037463936423741433036423335394437433030433035334630443441413932424644373230373744384144433022"
            + "2C227369676E6174757265223A22333038306666222C2276657273696F6E223A317D"
        #expect(file.fileContents == expected)
        #expect(try DomainAssociationFile(fileContents: Array(expected.utf8)) == file)
        // A trailing line break, as editors add, is accepted.
        #expect(try DomainAssociationFile(fileContents: Array((expected + "\r\n").utf8)) == file)
    }

    @Test("Round trip: issued, parsed back, signature and merchant verified; the CMS signingTime is createdOn")
    func roundTrip() throws {
        let pki = try Self.pki()
        let files = try AssociationFiles(tokenSigning: pki, clock: SystemClock())
        let now = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 * 1000).rounded(.down) / 1000)
        let file = try files.issue(merchantIdentifier: Self.merchant, at: now)
        #expect(file.pspId == Self.merchantHash && file.version == 1)
        #expect(file.createdOn == Int64((now.timeIntervalSince1970 * 1000).rounded(.down)))
        let parsed = try DomainAssociationFile(fileContents: Array(file.fileContents.utf8))
        #expect(parsed == file)
        #expect(files.problem(with: parsed, merchantIdentifier: Self.merchant) == nil)
        let cms = try CMSSignedData(berEncoded: parsed.signature)
        #expect(cms.content == nil)
        #expect(cms.certificates == [pki.leaf, pki.intermediate])
        #expect(cms.signers.first?.signingTime == Date(timeIntervalSince1970: Double(file.createdOn / 1000)))
        // BER with indefinite lengths, as Apple's (lower-case hex in the JSON).
        #expect(String(decoding: parsed.json, as: UTF8.self).contains("\"signature\":\"308006092a864886f70d010702a080"))
    }

    @Test("Another merchant's file, a forged file, an altered createdOn: each refused with its reason")
    func refusals() throws {
        let pki = try Self.pki()
        let files = try AssociationFiles(tokenSigning: pki, clock: SystemClock())
        let file = try files.issue(merchantIdentifier: "merchant.dev.other", at: Date())
        #expect(
            files.problem(with: file, merchantIdentifier: Self.merchant)
                == .otherMerchant(pspId: AssociationFiles.merchantHash("merchant.dev.other")))

        // The same format signed by another token-signing chain.
        let forger = try AssociationFiles(tokenSigning: try Self.pki(), clock: SystemClock())
        let forged = try forger.issue(merchantIdentifier: Self.merchant, at: Date())
        guard case .signature = files.problem(with: forged, merchantIdentifier: Self.merchant) else {
            Issue.record("a forged file was accepted")
            return
        }
        // A genuine signature over other content: createdOn moved by a second.
        let genuine = try files.issue(merchantIdentifier: Self.merchant, at: Date())
        let moved = DomainAssociationFile(
            pspId: genuine.pspId, createdOn: genuine.createdOn + 1000, signature: genuine.signature)
        #expect(files.problem(with: moved, merchantIdentifier: Self.merchant) != nil)
        // Not a CMS at all.
        let garbage = DomainAssociationFile(pspId: genuine.pspId, createdOn: genuine.createdOn, signature: [1, 2, 3])
        #expect(files.problem(with: garbage, merchantIdentifier: Self.merchant) != nil)
    }

    @Test("OpenSSL agrees: `openssl cms -verify` accepts the signature over the signed content, to the token root")
    func opensslVerifies() throws {
        let pki = try Self.pki()
        let files = try AssociationFiles(tokenSigning: pki, clock: SystemClock())
        let file = try files.issue(merchantIdentifier: Self.merchant, at: Date())
        let folder = try TemporaryDirectory()
        let paths = (
            signature: folder.child("signature.der"), content: folder.child("content.json"),
            root: folder.child("root.pem"), altered: folder.child("altered.json")
        )
        try Data(file.signature).write(to: URL(fileURLWithPath: paths.signature))
        try Data(file.signedContent).write(to: URL(fileURLWithPath: paths.content))
        try Data(pki.root.pemRepresentation.utf8).write(to: URL(fileURLWithPath: paths.root))
        try Data(file.signedContent.dropLast() + Array(",}".utf8)).write(to: URL(fileURLWithPath: paths.altered))
        func verify(_ content: String) throws -> ChildProcess.Termination {
            let process = try ChildProcess(
                "/usr/bin/openssl",
                [
                    "cms", "-verify", "-binary", "-inform", "DER", "-in", paths.signature, "-content", content,
                    "-CAfile", paths.root, "-purpose", "any", "-out", "/dev/null",
                ], stdout: .capture, stderr: .capture)
            return process.waitUntilExit()
        }
        #expect(try verify(paths.content) == .exited(0))
        #expect(try verify(paths.altered) != .exited(0))
    }

    @Test("F1: The association-file parser refuses each malformed file with a typed error")
    func parserRefusals() {
        func hex(_ text: String) -> [UInt8] {
            Array(text.utf8.map { String(format: "%02X", $0) }.joined().utf8)
        }
        let hash = Self.merchantHash
        let lower = hash.lowercased()
        let cases: [([UInt8], AssociationFileError.Code)] = [
            (Array(repeating: UInt8(ascii: "A"), count: DomainAssociationFile.maximumFileBytes + 2), .tooLarge),
            ([], .notHex),
            (Array("<html>redirected</html>".utf8), .notHex),
            (Array(hex("{}").map { $0 == UInt8(ascii: "B") ? UInt8(ascii: "b") : $0 }), .notHex),
            (Array("7B7".utf8), .notHex),
            (hex("not json"), .notJSON),
            (hex("{\"a\":{\"b\":1}}"), .notJSON),
            (hex("{\"pspId\":\"\(hash)\",\"pspId\":\"\(hash)\"}"), .notJSON),
            (hex("{\"createdOn\":1,\"pspId\":\"\(hash)\",\"version\":1}"), .wrongMembers),
            (
                hex("{\"createdOn\":1,\"extra\":2,\"pspId\":\"\(hash)\",\"signature\":\"30\",\"version\":1}"),
                .wrongMembers
            ),
            (hex("{\"createdOn\":1,\"pspId\":\"\(hash)\",\"signature\":\"30\",\"version\":2}"), .unsupportedVersion),
            (hex("{\"createdOn\":\"1\",\"pspId\":\"\(hash)\",\"signature\":\"30\",\"version\":1}"), .wrongType),
            (hex("{\"createdOn\":1,\"pspId\":\"\(lower)\",\"signature\":\"30\",\"version\":1}"), .wrongType),
            (hex("{\"createdOn\":1,\"pspId\":\"\(hash)\",\"signature\":\"3G\",\"version\":1}"), .wrongType),
            (hex("{\"version\":1,\"createdOn\":1,\"pspId\":\"\(hash)\",\"signature\":\"30\"}"), .notCanonical),
            (hex("{\"createdOn\": 1,\"pspId\":\"\(hash)\",\"signature\":\"30\",\"version\":1}"), .notCanonical),
        ]
        for (input, code) in cases {
            #expect(throws: AssociationFileError(code, "")) { try DomainAssociationFile(fileContents: input) }
        }
    }
}
