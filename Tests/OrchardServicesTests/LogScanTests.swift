import CommandTestSupport
import Foundation
import Testing

/// The log scan every end-to-end test runs (CommandTestSupport's LogScan), proved able to fail: a positive control
/// for each kind of secret, and the look-alikes real logs are full of that it must let pass.
@Suite("V2: the log scan finds what must never be logged")
struct LogScanTests {
    static let visa = "4111111111111111"
    static let dpan = "4895370012345678"  // not Luhn-valid: found only as a value the test handled

    func kinds(_ text: String, secrets: LogScan.Secrets = LogScan.Secrets()) -> [String] {
        LogScan.findings(in: text, secrets: secrets).map(\.kind)
    }

    @Test("V2: positive controls: a card number, a DPAN, a CVV, a cryptogram, key bytes, a full address")
    func positiveControls() {
        #expect(kinds(#"{"msg":"charging","pan":"\#(Self.visa)"}"#) == ["card number"])
        #expect(kinds("amex 378282246310005 and mastercard 5555555555554444") == ["card number", "card number"])
        #expect(kinds(#"{"dpan":"\#(Self.dpan)"}"#, secrets: .init(texts: [Self.dpan])) == ["a value the test handled"])
        #expect(kinds("dpan 4895 3700 1234 5678", secrets: .init(texts: [Self.dpan])) == ["a value the test handled"])
        #expect(kinds(#"{"cvv":"123"}"#) == ["CVV"])
        #expect(kinds("security_code=0412") == ["CVV"])
        #expect(kinds(#"{"onlinePaymentCryptogram":"AOFhBCkAAQAAAAAAAAAAAAAAAAA="}"#) == ["cryptogram"])
        #expect(kinds(#"arqc: 9F2608A1B2C3D4E5F60718"#) == ["cryptogram"])
        let key: [UInt8] = Array(0..<32)
        #expect(
            kinds("sealed with " + key.map { String(format: "%02x", $0) }.joined(), secrets: .init(bytes: [key]))
                == ["bytes the test handled"])
        #expect(kinds(#"{"privateKey":"30770201010420a1b2c3d4e5f60718293a4b5c6d7e8f90"}"#) == ["key bytes"])
        #expect(kinds("-----BEGIN EC PRIVATE KEY-----") == ["key bytes"])
        #expect(kinds(#"{"shipping":"1 Infinite Loop, Cupertino"}"#) == ["full address"])
        #expect(kinds("ship to 77 Billing Street") == ["full address"])
    }

    @Test("V2: look-alikes pass: masked numbers, UUIDs, timestamps, hashes, public keys, counts")
    func lookAlikesPass() {
        let clean = [
            #"{"pan":"411111******1111","dpan":"489537******5678"}"#,
            #"{"request_id":"0cc6a28e-3737-4543-8318-82a76a8c522e"}"#,
            #"{"time":"2026-12-01T16:03:58.123Z","epoch_ms":1764604438123}"#,
            "sha256 9a0364b9e99bb480dd25e1f0284c8555282412345678901234567890abcdef",
            #"{"publicKey":"04a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"}"#,
            #"{"cryptogram":"******","cryptogramValid":true,"atc":42,"amount":4111}"#,
            "4111111111111112 fails the Luhn check",
            "stored 1234567890123 rows",
            #"{"locality":"Cupertino","postalCode":"95014"}"#,
        ]
        for line in clean { #expect(kinds(line).isEmpty, "\(line)") }
    }

    @Test("V2: a deployment's log files are scanned, and a planted card number in any of them is found")
    func deploymentLogsAreScanned() throws {
        let directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.path + "/logs", withIntermediateDirectories: true)
        let clean = #"{"level":"debug","msg":"authorized","pan":"411111******1111"}"# + "\n"
        for party in ["network", "pay", "merchant", "terminal"] {
            try Data(clean.utf8).write(to: URL(fileURLWithPath: directory.path + "/logs/\(party).log"))
        }
        #expect(LogScan.findings(inLogsOf: directory.path).isEmpty)
        #expect(LogScan.logFiles(of: directory.path).count == 4)
        let planted = clean + #"{"level":"debug","msg":"oops","pan":"\#(Self.visa)"}"# + "\n"
        try Data(planted.utf8).write(to: URL(fileURLWithPath: directory.path + "/logs/pay.log"))
        let findings = LogScan.findings(inLogsOf: directory.path)
        #expect(findings.map(\.file) == ["logs/pay.log"])
        // The report itself does not repeat the number.
        #expect(findings.allSatisfy { !$0.description.contains(Self.visa) })
        // The directory's own scan (when it goes away) must not report the planted line.
        try FileManager.default.removeItem(atPath: directory.path + "/logs")
    }
}
