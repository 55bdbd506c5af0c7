import Foundation
import OrchardCrypto
import OrchardFixtures
import OrchardX509
import Testing

@testable import OrchardCLI

@Suite("orchard token")
struct TokenCommandTests {
    static var fixtures: String { (try? Fixtures.path("apple-pay")) ?? "" }

    @Test func decryptRealTokenAtItsSigningTime() async throws {
        let f = Self.fixtures
        let capture = Capture()
        let code = await capture.run([
            "token", "decrypt", "\(f)/gala-2023/token.json", "--cert", "\(f)/gala-2023/certificate.pem", "--key",
            "\(f)/gala-2023/private_key.pem", "--now", "2021-09-01T19:05:00Z",
        ])
        #expect(code == 0, "\(capture.stderr)")
        let object = try JSONSerialization.jsonObject(with: Data(capture.stdout.utf8)) as? [String: Any]
        #expect(object?["applicationPrimaryAccountNumber"] as? String == "5353756319181169")
        #expect(object?["transactionAmount"] as? Int == 100)
        #expect(object?.keys.count == 7)
        #expect(capture.stderr.isEmpty)
    }

    @Test func decryptJSONIsOneObjectForScripts() async throws {
        let f = Self.fixtures
        let arguments = [
            "token", "decrypt", "\(f)/gala-2023/token.json", "--cert", "\(f)/gala-2023/certificate.pem", "--key",
            "\(f)/gala-2023/private_key.pem", "--now", "2021-09-01T19:05:00Z",
        ]
        let plain = Capture()
        #expect(await plain.run(arguments) == 0)
        let json = Capture()
        #expect(await json.run(arguments + ["--json"]) == 0, "\(json.stderr)")
        #expect(json.stderr.isEmpty)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(Set(object.keys) == ["version", "transactionId", "signingTime", "paymentData"])
        #expect(object["version"] as? String == "EC_v1")
        #expect(object["signingTime"] as? String == "2021-09-01T19:03:06Z")
        let transactionId = try #require(object["transactionId"] as? String)
        #expect(transactionId.count == 64 && transactionId.allSatisfy(\.isHexDigit))
        // "paymentData" is the default output's object, byte for byte.
        #expect(json.stdout.hasSuffix("\"paymentData\":" + plain.stdout.dropLast() + "}\n"))

        // Refused: exit 1, nothing on stdout, the MerchantKitError code first on the one error line.
        let refused = Capture()
        #expect(
            await refused.run([
                "token", "decrypt", "\(f)/gala-2015/token.json", "--cert", "\(f)/gala-2023/certificate.pem", "--key",
                "\(f)/gala-2023/private_key.pem", "--signing-time", "--json",
            ]) == 1)
        #expect(refused.stdout.isEmpty)
        #expect(refused.stderr.hasPrefix("error: unknownPublicKeyHash: "))
        // Usage (an out-of-range option): exit 2 before anything is read.
        let usage = Capture()
        #expect(await usage.run(arguments + ["--json", "--window", "0"]) == 2)
        #expect(usage.stdout.isEmpty)
    }

    @Test func staleTokenIsOneErrorLine() async {
        let f = Self.fixtures
        let capture = Capture()
        let code = await capture.run([
            "token", "decrypt", "\(f)/gala-2015/token.json", "--cert", "\(f)/gala-2015/certificate.pem", "--key",
            "\(f)/gala-2015/private_key.pem",
        ])
        #expect(code == 1)
        #expect(capture.stdout.isEmpty)
        #expect(capture.stderr.hasPrefix("error: signingTimeTooOld"))
        #expect(capture.stderr.split(separator: "\n").count == 1)
        #expect(!capture.stderr.contains("4109370251004320"))
    }

    @Test func wrongKeyIsRefused() async {
        let f = Self.fixtures
        let capture = Capture()
        let code = await capture.run([
            "token", "decrypt", "\(f)/gala-2015/token.json", "--cert", "\(f)/gala-2023/certificate.pem", "--key",
            "\(f)/gala-2023/private_key.pem", "--signing-time",
        ])
        #expect(code == 1)
        #expect(capture.stderr.hasPrefix("error: unknownPublicKeyHash"))
    }

    @Test func makeThenDecryptWithApplicationData() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("orchard-token-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        func write(_ name: String, _ text: String) throws -> String {
            let path = dir.appendingPathComponent(name).path
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }
        let start = Date() - 86_400
        let end = Date() + 86_400 * 365
        let rootKey = CertificatePrivateKey(try P256.Signing.PrivateKey())
        let root = try Certificate.issue(
            subject: DistinguishedName([.commonName("Root")]), publicKey: rootKey.publicKey,
            issuer: .selfSigned(rootKey),
            notValidBefore: start, notValidAfter: end,
            extensions: [.basicConstraints(isCA: true), .keyUsage([.keyCertSign])])
        let intKey = CertificatePrivateKey(try P256.Signing.PrivateKey())
        let intermediate = try Certificate.issue(
            subject: DistinguishedName([.commonName("Integration")]), publicKey: intKey.publicKey,
            issuer: .certificate(root, key: rootKey), notValidBefore: start, notValidAfter: end,
            extensions: [
                .basicConstraints(isCA: true), .keyUsage([.keyCertSign]), .appleApplicationIntegrationCAMarker,
            ])
        let leafKey = P256.Signing.PrivateKey.self
        let leafPrivate = try leafKey.init()
        let leaf = try Certificate.issue(
            subject: DistinguishedName([.commonName("Signer")]),
            publicKey: CertificatePrivateKey(leafPrivate).publicKey,
            issuer: .certificate(intermediate, key: intKey), notValidBefore: start, notValidAfter: end,
            extensions: [.appleTokenSigningLeafMarker])
        let merchantKey = try P256.Signing.PrivateKey()
        let merchant = try Certificate.issue(
            subject: DistinguishedName([.userID("merchant.test")]),
            publicKey: CertificatePrivateKey(merchantKey).publicKey,
            issuer: .certificate(root, key: rootKey), notValidBefore: start, notValidAfter: end,
            extensions: [.appleMerchantIdentifier("merchant.test")])
        let payment = """
            {"applicationPrimaryAccountNumber":"4895370012345671","applicationExpirationDate":"291231",\
            "currencyCode":"978","transactionAmount":250,"paymentDataType":"3DSecure",\
            "paymentData":{"onlinePaymentCryptogram":"AAAAAAAAAAAAAAAAAAAAAAAAAAA="}}
            """
        let paths = (
            root: try write("root.pem", root.pemRepresentation),
            int: try write("int.pem", intermediate.pemRepresentation),
            leaf: try write("leaf.pem", leaf.pemRepresentation),
            leafKey: try write("leaf.key", try leafPrivate.pemRepresentation),
            merchant: try write("merchant.pem", merchant.pemRepresentation),
            merchantKey: try write("merchant.key", try merchantKey.pemRepresentation),
            data: try write("data.json", payment)
        )
        let make = Capture()
        #expect(
            await make.run([
                "token", "make", "--cert", paths.merchant, "--signer-cert", paths.leaf, "--signer-key", paths.leafKey,
                "--intermediate", paths.int, "--payment-data", paths.data, "--application-data", "b3JkZXItNDI=",
            ]) == 0, "\(make.stderr)")
        let tokenPath = try write("token.json", make.stdout)
        let decrypt = Capture()
        #expect(
            await decrypt.run([
                "token", "decrypt", tokenPath, "--cert", paths.merchant, "--key", paths.merchantKey, "--root",
                paths.root,
                "--application-data", "b3JkZXItNDI=",
            ]) == 0, "\(decrypt.stderr)")
        #expect(decrypt.stdout == payment + "\n")
        let mismatch = Capture()
        #expect(
            await mismatch.run([
                "token", "decrypt", tokenPath, "--cert", paths.merchant, "--key", paths.merchantKey, "--root",
                paths.root,
                "--application-data", "b3JkZXItNDM=",
            ]) == 1)
        #expect(mismatch.stderr.hasPrefix("error: orderMismatch"))
        let missing = Capture()
        #expect(
            await missing.run([
                "token", "decrypt", tokenPath, "--cert", paths.merchant, "--key", paths.merchantKey, "--root",
                paths.root,
            ]) == 1)
        let inspect = Capture()
        #expect(await inspect.run(["token", "inspect", tokenPath]) == 0)
        #expect(!inspect.stdout.contains("4895370012345671"))
    }
}
