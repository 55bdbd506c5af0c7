import DemoApp
import Foundation
import MerchantAPI
import OrchardCrypto
import OrchardRuntime
import OrchardServices

/// `orchard demo`: the main job. It grows with every flow; today it runs the cryptographic known answers
/// every later flow rests on, with a readable trace on stderr and the results as JSON on stdout.
enum DemoCommand {
    static let command = Command(
        name: "demo",
        summary: "Run the Orchard demo: everything that exists, end to end, with a readable trace.",
        discussion: """
            Today: the cryptographic known answers (hashes, HMAC, HKDF, AES-GCM, P-256 ECDH and ECDSA,
            RSA-OAEP, Triple DES and the EMV retail MAC); the merchant SDK: Apple-format EC_v1 and RSA_v1 tokens
            signed by an Apple-shaped PKI, verified and decrypted; then a deployment with its network and Pay
            server, where the issuer's test card is provisioned onto a phone and a watch through the Pay server,
            both pay in store at terminal T0001, and the demo app buys in-app on the phone from the merchant's
            server; on the web a Mac buys in the demo store in headless Chromium (Touch ID), and a Mac without
            Touch ID buys there with the phone (Face ID) and with the watch (double-click) near it (Handoff).
            The trace goes to stderr, the results to stdout. With --data-dir, a missing or empty DIR is
            initialised as a deployment first (as `orchard init` does) and kept; without it the demo runs in a
            temporary directory removed at the end. Services already running for DIR are used.
            With --database postgresql://… (and --pgpass FILE, as for `orchard init`) the server parties keep
            their state in that PostgreSQL database, one schema each, instead of SQLite files; without
            --data-dir the demo's fresh deployment replaces those schemas.
            """,
        options: [DeploymentCommands.databaseOption, DeploymentCommands.pgpassOption]
    ) { arguments, context in
        try await run(arguments, context)
    }

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws {
        // The deployment: --data-dir DIR is kept (initialised if empty); otherwise a temporary one, removed.
        let kept = arguments[CommandContext.dataDirectoryOption] != nil
        let path =
            kept
            ? context.dataDirectory.path
            : FileManager.default.temporaryDirectory.appendingPathComponent("orchard-demo-\(UUID().uuidString)").path
        let deployment = DeploymentDirectory(path: path)
        defer { if !kept { try? FileManager.default.removeItem(atPath: path) } }
        context.trace("== deployment ==")
        let options = DeploymentInitializer.Options(
            force: !kept, databases: try DeploymentCommands.databases(arguments[DeploymentCommands.databaseOption]),
            passfile: arguments[DeploymentCommands.pgpassOption])
        try await DeploymentCommands.initializeIfEmpty(deployment, options: options, context: context)
        context.trace("deployment ready at \(path)\(kept ? "" : " (temporary, removed at the end)")")
        context.trace("")
        context.trace("== cryptographic known answers ==")
        let results = KnownAnswers.all.map { answer -> KnownAnswers.Result in
            let result = answer.run()
            context.trace("\(result.passed ? "ok  " : "FAIL") \(answer.name): \(result.detail)")
            return result
        }
        context.trace("\(results.filter(\.passed).count) of \(results.count) known answers match")
        context.trace("")
        context.trace("== merchant SDK: Apple-format tokens ==")
        let merchant = DemoMerchantSDK.run(trace: context.trace)
        context.trace("")

        let connections = try await DeploymentCommands.connect(
            [.network, .pay, .merchant], of: deployment, context: context)
        let provisioned: [DemoProvisioning.Row]
        let payments: [DemoInStore.Row]
        do {
            context.trace(
                "services: "
                    + [ServiceName.network, .pay, .merchant].map { name in
                        "\(name) \(connections.startedInProcess.contains(name) ? "started here" : "running")"
                    }.joined(separator: ", "))
            context.trace("")
            context.trace("== provisioning: the issuer's test card onto a phone and a watch ==")
            let (rows, devices) = try await DemoProvisioning.run(
                deployment: deployment, connections: connections, trace: { context.trace($0) })
            provisioned = rows
            context.trace("")
            context.trace("== in store: the phone and the watch pay at terminal T0001 ==")
            let inStore = try await DemoInStore.run(
                deployment: deployment, connections: connections, devices: devices, trace: { context.trace($0) })
            context.trace("")
            context.trace("== in an app: the demo app buys from the merchant on the phone ==")
            guard let phone = devices["demo-phone"] else { throw CLIError.failure("the demo phone is missing") }
            let bought = try await AppBuy.buy(
                deployment: deployment, connections: connections,
                order: MerchantAPI.CreateOrder(item: "Secret Roast Blend", amount: "9.99", currency: "USD"),
                application: DemoApp.identifier, device: phone, merchant: nil, out: nil,
                trace: { context.trace("  " + $0) })
            context.trace("")
            context.trace(
                "== on the web: a Mac in Chromium (or the phone, without a browser) buys at store.orchard.test ==")
            let web = try await DemoWeb.row(
                deployment: deployment, connections: connections, phone: phone, context: context)
            context.trace("")
            context.trace(
                "== web-handoff: a Mac without Touch ID buys in Chromium; the phone, then the watch, authorizes ==")
            let handoff = try await DemoWebHandoff.rows(
                deployment: deployment, connections: connections, devices: devices, context: context)
            payments =
                inStore + [
                    DemoInStore.Row(
                        channel: "in-app", device: bought.device, card: bought.card, amount: bought.amount,
                        result: bought.outcome, responseCode: bought.responseCode),
                    web,
                ] + handoff
            await connections.close()
        } catch {
            await connections.close()
            throw error
        }

        context.trace("")
        context.trace("== summary ==")
        for line in summaryTable(payments) { context.trace(line) }
        let summary = deployment.path + "/demo-summary.json"
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        try SecureFile.write(Array(try encoder.encode(payments)), to: summary, mode: 0o600)
        if kept { context.trace("summary written to \(summary)") }

        let all = results + merchant.steps
        let failed = all.filter { !$0.passed }.count
        try context.outputJSON(
            DemoReport(
                knownAnswers: results, merchantSDK: merchant, provisioning: provisioned, payments: payments,
                passed: all.count - failed, failed: failed))
        if failed > 0 { throw CLIError.failure("\(failed) demo step(s) failed") }
    }

    /// The payments as a table: channel, device, masked card, amount, result, response code.
    static func summaryTable(_ rows: [DemoInStore.Row]) -> [String] {
        let header = ["channel", "device", "card", "amount", "result", "code"]
        let cells = rows.map { [$0.channel, $0.device, $0.card, $0.amount, $0.result, $0.responseCode] }
        let widths = header.indices.map { column in
            ([header] + cells).map { $0[column].count }.max() ?? 0
        }
        func line(_ values: [String]) -> String {
            let padded = values.enumerated().map { $1.padding(toLength: widths[$0], withPad: " ", startingAt: 0) }
                .joined(separator: "  ")
            return String(padded.reversed().drop(while: { $0 == " " }).reversed())
        }
        return [line(header), widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ")]
            + cells.map(line)
    }

    struct DemoReport: Encodable {
        let knownAnswers: [KnownAnswers.Result]
        let merchantSDK: DemoMerchantSDK.Report
        let provisioning: [DemoProvisioning.Row]
        let payments: [DemoInStore.Row]
        let passed: Int
        let failed: Int
    }
}

/// Published test vectors and round trips, each a small readable check.
enum KnownAnswers {
    struct Result: Encodable {
        let name: String
        let passed: Bool
        let detail: String
    }

    struct Check: Sendable {
        let name: String
        let body: @Sendable () throws -> (Bool, String)

        func run() -> Result {
            do {
                let (passed, detail) = try body()
                return Result(name: name, passed: passed, detail: detail)
            } catch {
                return Result(name: name, passed: false, detail: "threw \(error)")
            }
        }
    }

    static func expect(_ got: [UInt8], _ expected: String, _ what: String) -> (Bool, String) {
        let ok = got.hex == expected.uppercased()
        return (ok, ok ? "\(what) = \(got.hex.prefix(32))…" : "\(what) = \(got.hex), expected \(expected)")
    }

    static let all: [Check] = [
        Check(name: "SHA-256 (FIPS 180-2 \"abc\")") {
            expect(
                SHA256.hash(Array("abc".utf8)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
                "digest")
        },
        Check(name: "HMAC-SHA256 (RFC 4231 case 2)") {
            expect(
                HMAC<SHA256>.authenticationCode(
                    for: Array("what do ya want for nothing?".utf8), using: SymmetricKey(data: Array("Jefe".utf8))),
                "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843", "MAC")
        },
        Check(name: "HKDF-SHA256 (RFC 5869 case 1)") {
            let okm = try HKDF.deriveKey(
                inputKeyMaterial: SymmetricKey(data: [UInt8](repeating: 0x0B, count: 22)),
                salt: [UInt8](hex: "000102030405060708090a0b0c")!, info: [UInt8](hex: "f0f1f2f3f4f5f6f7f8f9")!,
                outputByteCount: 42)
            return expect(
                okm.bytes.unsafeCopyOfBytes(),
                "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865", "OKM")
        },
        Check(name: "AES-256-GCM (GCM spec test case 14)") {
            let box = try AES.GCM.seal(
                [UInt8](repeating: 0, count: 16), using: SymmetricKey(data: [UInt8](repeating: 0, count: 32)),
                iv: [UInt8](repeating: 0, count: 12))
            let (ok, detail) = expect(
                box.ciphertext + box.tag, "cea7403d4d606b6e074ec5d3baf39d18d0d1c8a799996bf0265b98b5d48ab919",
                "ciphertext‖tag")
            var flipped = box
            flipped = AES.GCM.SealedBox(ciphertext: [box.ciphertext[0] ^ 1] + box.ciphertext.dropFirst(), tag: box.tag)
            let rejected =
                (try? AES.GCM.open(
                    flipped, using: SymmetricKey(data: [UInt8](repeating: 0, count: 32)),
                    iv: [UInt8](repeating: 0, count: 12))) == nil
            return (
                ok && rejected, detail + (rejected ? "; a flipped bit is rejected" : "; a flipped bit was ACCEPTED")
            )
        },
        Check(name: "P-256 ECDH (two fresh keys agree, 32-byte secret)") {
            let a = try P256.KeyAgreement.PrivateKey()
            let b = try P256.KeyAgreement.PrivateKey()
            let ab = try a.sharedSecretFromKeyAgreement(with: b.publicKey)
            let ba = try b.sharedSecretFromKeyAgreement(with: a.publicKey)
            return (ab == ba && ab.count == 32, "both sides derive the same \(ab.count)-byte secret")
        },
        Check(name: "P-256 ECDSA-SHA256 (sign, verify, reject a changed message)") {
            let key = try P256.Signing.PrivateKey()
            let message = Array("orchard".utf8)
            let signature = try key.signature(for: message)
            let valid = key.publicKey.isValidSignature(signature, for: message)
            let changed = key.publicKey.isValidSignature(signature, for: Array("orcharD".utf8))
            return (
                valid && !changed,
                "DER signature of \(signature.derRepresentation.count) bytes verifies; a changed message does not"
            )
        },
        Check(name: "RSA-2048 OAEP-SHA256/MGF1-SHA256 (round trip, wrong MGF1 fails)") {
            let key = try RSA.PrivateKey(keySize: 2048)
            let secret = [UInt8](repeating: 0x42, count: 16)
            let wrapped = try key.publicKey.encrypt(secret)
            let back = try key.decrypt(wrapped).unsafeCopyOfBytes()
            let wrongMGF = (try? key.decrypt(wrapped, mgf1Digest: .sha1)) == nil
            return (back == secret && wrongMGF, "a 16-byte key wraps to \(wrapped.count) bytes and back")
        },
        Check(name: "DES (FIPS 46 textbook, as DES-EDE3 with K‖K‖K)") {
            expect(
                try InsecureSingleDES.encryptECB(
                    [UInt8](hex: "0123456789ABCDEF")!, key: SymmetricKey(data: [UInt8](hex: "133457799BBCDFF1")!)),
                "85E813540F0AB405", "ciphertext")
        },
        Check(name: "Two-key TDES (EMV vector V0)") {
            expect(
                try TripleDES.encryptECB(
                    [UInt8](hex: "3132333435363738")!,
                    key: SymmetricKey(data: [UInt8](hex: "0123456789ABCDEFFEDCBA9876543210")!)),
                "41D2FFBA3CDC15FE", "ciphertext")
        },
        Check(name: "ISO 9797-1 MAC algorithm 3, padding method 2 (EMV vector V0)") {
            expect(
                try RetailMAC.mac(
                    [UInt8](hex: "1234567890ABCDEF1234")!,
                    key: SymmetricKey(data: [UInt8](hex: "0123456789ABCDEFFEDCBA9876543210")!), padding: .method2),
                "5B8802AB2F33012E", "MAC")
        },
    ]
}
