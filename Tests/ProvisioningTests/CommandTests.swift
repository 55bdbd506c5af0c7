import CommandTestSupport
import Foundation
import MerchantKit
import OrchardCrypto
import OrchardX509
import PaymentToken
import Testing

/// The commands, as a user runs them: `orchard init`, `device create`, `device add-card` (each starting the
/// services it needs for its own duration), `device lost-mode` while the device process is stopped, then
/// `device sync` and `device cards`.
@Suite("orchard device add-card, lost-mode, resume, sync", .serialized)
struct ProvisioningCommandTests {
    @Test("add-card (approve; step-up: no code one error line, code from env or 0600 file), lost mode, sync, resume")
    func commands() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("orchard-cli-\(UUID().uuidString)")
            .path
        defer {
            LogScan.expectCleanLogs(of: path)  // V2
            try? FileManager.default.removeItem(atPath: path)
        }
        #expect(try await orchard(["init", "--data-dir", path]).status == 0)
        let created = try await orchard(
            [
                "device", "create", "--data-dir", path, "--name", "phone", "--kind", "phone", "--biometry", "face",
                "--passcode-file", "-",
            ], stdin: "123456\n")
        #expect(created.status == 0, "\(created.stderr)")
        // The card number and CVV come from a file (JSON) or stdin (two lines), never argv.
        let cardFile = path + "-card.json"
        defer { try? FileManager.default.removeItem(atPath: cardFile) }
        #expect(
            FileManager.default.createFile(
                atPath: cardFile, contents: Data(#"{"number": "4111111111111111", "cvv": "266"}"#.utf8),
                attributes: [.posixPermissions: 0o600]))
        let added = try await orchard([
            "device", "add-card", "--data-dir", path, "--name", "phone", "--card-file", cardFile, "--expiry",
            "12/34", "--cardholder", "Alice Doe",
        ])
        #expect(added.status == 0, "\(added.stderr)")
        let card = try JSONSerialization.jsonObject(with: Data(added.stdout.utf8)) as? [String: Any]
        #expect(card?["suffix"] as? String == "1111" && card?["network"] as? String == "visa")
        #expect(!added.stdout.contains("4111111111111111") && !added.stderr.contains("4111111111111111"))
        // The CVV never appears as a value of its own (random hex such as a token reference may hold "266").
        let words = added.stderr.split { !$0.isLetter && !$0.isNumber }
        #expect(!words.contains("266"))

        let stepUpLines = "4000000000003220\n641\n"
        let stepUp = try await orchard(
            [
                "device", "add-card", "--data-dir", path, "--name", "phone", "--expiry", "12/34", "--cardholder",
                "Alice Doe",
            ], stdin: stepUpLines)
        #expect(stepUp.status == 1 && stepUp.stdout.isEmpty)
        #expect(
            stepUp.stderr.split(separator: "\n").last?.hasPrefix("error: no one-time code given") == true
                && stepUp.stderr.contains("--one-time-code-file FILE")
                && stepUp.stderr.contains("ORCHARD_ONE_TIME_CODE"), "\(stepUp.stderr)")
        // The one-time code from the environment (the card on stdin), then from a 0600 file.
        let withCode = try await orchard(
            [
                "device", "add-card", "--data-dir", path, "--name", "phone", "--expiry", "12/34", "--cardholder",
                "Alice Doe",
            ], environment: ["ORCHARD_ONE_TIME_CODE": "123456"], stdin: stepUpLines)
        #expect(withCode.status == 0 && withCode.stdout.contains("\"3220\""), "\(withCode.stderr)")
        let codeFile = path + "-code"
        defer { try? FileManager.default.removeItem(atPath: codeFile) }
        #expect(
            FileManager.default.createFile(
                atPath: codeFile, contents: Data("123456\n".utf8), attributes: [.posixPermissions: 0o600]))
        let stepUpFile = path + "-step-up.json"
        defer { try? FileManager.default.removeItem(atPath: stepUpFile) }
        #expect(
            FileManager.default.createFile(
                atPath: stepUpFile, contents: Data(#"{"number": "4000000000003220", "cvv": "641"}"#.utf8),
                attributes: [.posixPermissions: 0o600]))
        // (On another device: the first one has this card now.)
        let other = try await orchard(
            ["device", "create", "--data-dir", path, "--name", "tablet", "--kind", "phone", "--biometry", "face"],
            environment: ["ORCHARD_PASSCODE": "123456"])
        #expect(other.status == 0, "\(other.stderr)")
        let fromFile = try await orchard([
            "device", "add-card", "--data-dir", path, "--name", "tablet", "--card-file", stepUpFile, "--expiry",
            "12/34", "--cardholder", "Alice Doe", "--one-time-code-file", codeFile,
        ])
        #expect(fromFile.status == 0, "\(fromFile.stderr)")
        for output in [withCode, fromFile] {
            #expect(!(output.stdout + output.stderr).contains("123456") && !output.stderr.contains("4000000000003220"))
        }

        let lost = try await orchard(["device", "lost-mode", "--data-dir", path, "--name", "phone"])
        #expect(lost.status == 0 && lost.stdout.contains("\"suspended\""), "\(lost.stderr)")
        let sync = try await orchard(["device", "sync", "--data-dir", path, "--name", "phone"])
        #expect(sync.status == 0 && sync.stdout.contains("\"suspended\""), "\(sync.stderr)")
        let cards = try await orchard(["device", "cards", "--data-dir", path, "--name", "phone"])
        #expect(cards.stdout.contains("\"state\" : \"suspended\""), "\(cards.stdout)")

        // Leaving lost mode takes the passcode (on stdin), checked and attested by the phone's Secure Enclave.
        let noPasscode = try await orchard(["device", "resume", "--data-dir", path, "--name", "phone"])
        #expect(noPasscode.status != 0 && noPasscode.stderr.contains("passcode"), "\(noPasscode.stderr)")
        let wrong = try await orchard(["device", "resume", "--data-dir", path, "--name", "phone"], stdin: "654321\n")
        #expect(wrong.status == 1 && wrong.stderr.contains("passcode"), "\(wrong.stderr)")
        let resumed = try await orchard(["device", "resume", "--data-dir", path, "--name", "phone"], stdin: "123456\n")
        #expect(resumed.status == 0 && resumed.stdout.contains("\"active\""), "\(resumed.stderr)")
        #expect(!(resumed.stdout + resumed.stderr).contains("123456"))
        _ = try await orchard(["device", "sync", "--data-dir", path, "--name", "phone"])
        let after = try await orchard(["device", "cards", "--data-dir", path, "--name", "phone"])
        #expect(after.stdout.contains("\"state\" : \"active\""), "\(after.stdout)")
    }
}

/// `device add-card` takes the card number and CVV from a file or stdin only.
@Suite("orchard device add-card: card entry off the command line")
struct CardEntryCommandTests {
    @Test("S6: --pan and --cvv refused with a hint, never echoed; empty stdin or a malformed card file refused")
    func panAndCVVOnTheCommandLineAreRefused() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("orchard-entry-\(UUID().uuidString)")
            .path
        let common = [
            "device", "add-card", "--data-dir", path, "--name", "phone", "--expiry", "12/34", "--cardholder", "A",
        ]
        // The paths' random UUIDs may hold "266" themselves: the CVV is looked for in what is left without them.
        func withoutPaths(_ text: String) -> String { text.replacingOccurrences(of: path, with: "DIR") }
        for refused in [["--pan", "4111111111111111"], ["--cvv", "266"], ["--pan=4111111111111111"]] {
            let output = try await orchard(common + refused)
            #expect(output.status == 2 && output.stdout.isEmpty)
            #expect(output.stderr.contains("is refused") && output.stderr.contains("--card-file"), "\(output.stderr)")
            #expect(!output.stderr.contains("4111111111111111") && !withoutPaths(output.stderr).contains("266"))
        }
        let empty = try await orchard(common)
        #expect(empty.status == 2 && empty.stderr.contains("no card number in stdin"), "\(empty.stderr)")
        let malformed = path + "-card.json"
        defer { try? FileManager.default.removeItem(atPath: malformed) }
        for contents in [
            #"{"number": "4111111111111111"}"#, #"{"number": "4111111111111111", "cvv": "1", "cvv": "266"}"#,
            "4111111111111111\n",
        ] {
            try Data(contents.utf8).write(to: URL(fileURLWithPath: malformed))
            let output = try await orchard(common + ["--card-file", malformed])
            #expect(output.status == 2 && output.stderr.contains("is not a card"), "\(output.stderr)")
            #expect(!output.stderr.contains("4111111111111111") && !withoutPaths(output.stderr).contains("266"))
        }
        let help = try await orchard(["device", "add-card", "--help"])
        #expect(help.stdout.contains("--card-file FILE") && help.stdout.contains("two lines"), "\(help.stdout)")
    }
}

/// `orchard app buy` as a user runs it on a fresh deployment: it makes demo-phone with the approve card, buys, and
/// with --out leaves an Apple-format token that a verifier given only those files decrypts.
@Suite("orchard app buy", .serialized)
struct AppBuyCommandTests {
    @Test(
        "A fresh deployment: approved; --out files verify; --application-data binds; tampered data refused"
    )
    func buy() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("orchard-app-\(UUID().uuidString)")
            .path
        defer {
            LogScan.expectCleanLogs(of: path)  // V2
            try? FileManager.default.removeItem(atPath: path)
        }
        #expect(try await orchard(["init", "--data-dir", path]).status == 0)
        let out = path + "/out"
        let bought = try await orchard([
            "app", "buy", "--data-dir", path, "--merchant", "merchant.dev.orchard.demo", "--item", "Coffee",
            "--amount", "9.99", "--out", out,
        ])
        #expect(bought.status == 0, "\(bought.stderr)")
        #expect(bought.stderr.contains("making demo-phone"))
        let result = try JSONSerialization.jsonObject(with: Data(bought.stdout.utf8)) as? [String: Any]
        #expect(result?["outcome"] as? String == "approved" && result?["responseCode"] as? String == "00")
        #expect(!bought.stdout.contains("4111111111111111") && !bought.stderr.contains("4111111111111111"))

        // Any Apple-format verifier: the token, the processing certificate and key, the root.
        let token = try PaymentToken(jsonBytes: Array(try Data(contentsOf: URL(fileURLWithPath: out + "/token.json"))))
        let keyPEM = try String(contentsOfFile: out + "/merchant.key", encoding: .utf8)
        let identity = try MerchantIdentity(
            certificatePEM: try String(contentsOfFile: out + "/merchant.pem", encoding: .utf8),
            privateKeyPEM: keyPEM)
        let root = try Certificate(pemEncoded: try String(contentsOfFile: out + "/root.pem", encoding: .utf8))
        let decrypted = try PaymentTokenDecryptor(identities: [identity], trustRoots: [root]).decrypt(token)
        #expect(decrypted.payment.transactionAmount == 999 && decrypted.payment.currencyCode == "840")

        // The app's own applicationData: the order keeps it, the token's header carries its SHA-256, approved.
        let appData = Array("{\"basket\":\"b-42\",\"loyalty\":\"gold\"}".utf8)
        let boundOut = path + "/bound"
        let bound = try await orchard([
            "app", "buy", "--data-dir", path, "--item", "Tea", "--amount", "4.50", "--application-data",
            Data(appData).base64EncodedString(), "--out", boundOut,
        ])
        #expect(bound.status == 0, "\(bound.stderr)")
        let boundResult = try JSONSerialization.jsonObject(with: Data(bound.stdout.utf8)) as? [String: Any]
        #expect(boundResult?["outcome"] as? String == "approved")
        #expect(boundResult?["applicationData"] as? String == Data(appData).base64EncodedString())
        let boundToken = try PaymentToken(
            jsonBytes: Array(try Data(contentsOf: URL(fileURLWithPath: boundOut + "/token.json"))))
        #expect(boundToken.paymentData.header.applicationData == SHA256.hash(appData))

        // applicationData that is not canonical base64: the merchant's typed refusal, before any sheet.
        let invalid = try await orchard([
            "app", "buy", "--data-dir", path, "--item", "Tea", "--amount", "4.50", "--application-data", "YXB=",
        ])
        #expect(invalid.status == 1 && invalid.stderr.contains("invalidApplicationData"), "\(invalid.stderr)")

        // The demonstration of a refusal: the payment request carries other applicationData than the order's; the
        // merchant refuses the token; nothing is charged.
        let tampered = try await orchard([
            "app", "buy", "--data-dir", path, "--item", "Coffee", "--amount", "9.99", "--tamper-application-data",
            Data("another order".utf8).base64EncodedString(),
        ])
        #expect(tampered.status == 1 && tampered.stderr.contains("orderMismatch"), "\(tampered.stderr)")
        #expect(tampered.stderr.contains("DEMONSTRATION"))
    }
}
