import Foundation
import MerchantKit
import OrchardCrypto
import OrchardX509
import PaymentToken

/// `orchard token ...`: inspect, verify, decrypt and make Apple Pay payment tokens.
enum TokenCommands {
    static let command = Command(
        name: "token",
        summary: "Inspect, verify, decrypt and make Apple Pay payment tokens (EC_v1, RSA_v1).",
        subcommands: [decrypt, verify, inspect, make]
    )

    static let rootOption = Option.repeatable(
        "root", "ROOT.pem", help: "A trusted root certificate (default: Apple Root CA - G3).")
    static let nowOption: Option<Date?> = .optional(
        "now", "ISO8601", help: "Evaluate as if it were this time (e.g. 2021-09-01T19:05:00Z).", parse: isoDate)
    static let signingTimeOption = Option.flag(
        "signing-time", help: "Evaluate at the token's own signing time (old tokens whose chain expired).")
    static let windowOption = Option.integer(
        "window", "SECONDS", default: 300, range: 1...86_400, help: "Freshness window for the signing time.")
    static let evaluationOptions: [any CommandOption] = [rootOption, nowOption, signingTimeOption, windowOption]

    static let certOption = Option.required("cert", "CERT.pem", help: "The merchant payment processing certificate.")
    static let keyOption = Option.required(
        "key", "KEY.pem", help: "Its private key (SEC1 or PKCS#8; RSA PKCS#1 or PKCS#8).")
    static let decryptApplicationDataOption = applicationDataOption(
        help: "The applicationData the merchant sent (base64).")
    static let traceOption = Option.flag("trace", help: "Print signer, chain and signing time on stderr.")
    static let jsonOption = Option.flag(
        "json", help: "Print one object for scripts: version, transactionId, signingTime and paymentData.")

    /// `--application-data BASE64`, its bytes.
    static func applicationDataOption(help: String) -> Option<[UInt8]?> {
        .optional("application-data", "BASE64", help: help) { text throws(CLIError) in
            guard let bytes = StrictEncoding.base64Decode(text) else {
                throw CLIError.usage("--application-data must be standard base64")
            }
            return bytes
        }
    }

    /// An ISO 8601 time such as 2021-09-01T19:05:00Z.
    @Sendable static func isoDate(_ text: String) throws(CLIError) -> Date {
        guard let date = ISO8601DateFormatter().date(from: text) else {
            throw CLIError.usage("--now takes an ISO 8601 time such as 2021-09-01T19:05:00Z")
        }
        return date
    }

    static let decrypt = Command(
        name: "decrypt",
        summary: "Verify a token and print exactly its decrypted payment data.",
        discussion: """
            Checks the signature, Apple's chain and markers, the signing time, then decrypts with the merchant's
            processing certificate and key. With --application-data the header hash must match it (and a
            header hash without it is refused). --trace prints signer, chain and signing time on stderr.

            stdout is the decrypted payment data object exactly as Apple encrypted it, DPAN and cryptogram in
            full (what a processor needs; stderr never holds them). With --json it is one object instead:
            {"version":"EC_v1","transactionId":HEX,"signingTime":ISO8601,"paymentData":{...}}, the same
            payment data under "paymentData".

            Exit status: 0 decrypted; 1 refused or failed, with nothing on stdout and one line "error: <reason>"
            on stderr, which starts with the MerchantKitError code when the token was refused ("error:
            signingTimeTooOld: ...", unknownPublicKeyHash, orderMismatch, ...); 2 usage error.
            """,
        options: evaluationOptions + [certOption, keyOption, decryptApplicationDataOption, traceOption, jsonOption],
        positionals: ["TOKEN.json"]
    ) { arguments, context in
        try runDecrypt(arguments, context)
    }

    // A synchronous body: Swift 6.3 crashes in release builds when some typed-throws calls sit directly in
    // an async closure (coroutine splitting), so each command's work is a plain function.
    private static func runDecrypt(_ arguments: ParsedArguments, _ context: CommandContext) throws {
        let token = try loadToken(arguments)
        let identity = try MerchantIdentity(
            certificatePEM: try readText(arguments[certOption]), privateKeyPEM: try readText(arguments[keyOption]))
        let decryptor = try PaymentTokenDecryptor(
            identities: [identity], trustRoots: try roots(arguments), freshnessWindow: window(arguments),
            clock: try clock(arguments), evaluation: arguments[signingTimeOption] ? .insecureAtSigningTime : .clock)
        var order: ExpectedOrder?
        if let bytes = arguments[decryptApplicationDataOption] {
            order = ExpectedOrder(applicationData: bytes, amount: nil, currencyCode: nil)
        } else if token.paymentData.header.applicationData != nil {
            throw CLIError.failure(
                "the token carries an applicationData hash: pass the order's data with --application-data")
        }
        let result = try decryptor.decrypt(token, order: order)
        if arguments[traceOption] {
            context.trace(
                "signature: valid, signed at \(iso(result.signature.signingTime)) by \(result.signature.signer.subject)"
            )
            for certificate in result.signature.chain { context.trace("  chain: \(certificate.subject)") }
            context.trace("\(result.version.rawValue), transactionId \(result.transactionId)")
        }
        guard arguments[jsonOption] else {
            context.output(result.payment.plaintextJSON)
            return
        }
        // Built as PaymentToken's JSONValue, not re-encoded: the payment data keeps its key order and number text.
        context.output(
            JSONValue.object([
                ("version", .string(result.version.rawValue)),
                ("transactionId", .string(result.transactionId)),
                ("signingTime", .string(iso(result.signature.signingTime))),
                ("paymentData", result.payment.json),
            ]).serialized)
    }

    static let verify = Command(
        name: "verify",
        summary: "Check a token's signature, chain and signing time; print signer, signing time and chain.",
        options: evaluationOptions,
        positionals: ["TOKEN.json"]
    ) { arguments, context in
        try runVerify(arguments, context)
    }

    private static func runVerify(_ arguments: ParsedArguments, _ context: CommandContext) throws {
        let token = try loadToken(arguments)
        let verifier = try PaymentTokenVerifier(
            trustRoots: try roots(arguments), freshnessWindow: window(arguments), clock: try clock(arguments),
            evaluation: arguments[signingTimeOption] ? .insecureAtSigningTime : .clock)
        let info = try verifier.verifySignature(token).get()
        try context.outputJSON([
            "valid": JSONValueEncodable.bool(true),
            "signingTime": .string(iso(info.signingTime)),
            "signer": .string(info.signer.subject.description),
            "chain": .array(
                info.chain.map { certificate in
                    .object([
                        "subject": .string(certificate.subject.description),
                        "notValidBefore": .string(iso(certificate.notValidBefore)),
                        "notValidAfter": .string(iso(certificate.notValidAfter)),
                    ])
                }),
            "version": .string(token.paymentData.version.rawValue),
            "transactionId": .string(token.paymentData.header.transactionIdHex),
        ])
    }

    static let make = Command(
        name: "make",
        summary: "Make an Apple-format token (EC_v1, or RSA_v1 for an RSA certificate) signed like Apple's.",
        options: [
            makeCertOption, signerCertOption, signerKeyOption, intermediateOption, paymentDataOption,
            makeApplicationDataOption, signingNowOption, bareOption,
        ]
    ) { arguments, context in
        try runMake(arguments, context)
    }

    static let makeCertOption = Option.required(
        "cert", "MERCHANT.pem", help: "The merchant payment processing certificate to encrypt to.")
    static let signerCertOption = Option.required(
        "signer-cert", "LEAF.pem", help: "The token-signing leaf (marker 1.2.840.113635.100.6.29).")
    static let signerKeyOption = Option.required("signer-key", "LEAF_KEY.pem", help: "The leaf's private key.")
    static let intermediateOption = Option.required(
        "intermediate", "INT.pem", help: "The intermediate CA (marker 1.2.840.113635.100.6.2.14).")
    static let paymentDataOption = Option.required(
        "payment-data", "DATA.json", help: "The payment data object to encrypt, exactly as given.")
    static let makeApplicationDataOption = applicationDataOption(
        help: "applicationData: its SHA-256 goes into the header.")
    static let signingNowOption: Option<Date?> = .optional(
        "now", "ISO8601", help: "The signing time (default: now).", parse: isoDate)
    static let bareOption = Option.flag("bare", help: "Print only paymentData instead of the PKPaymentToken wrapper.")

    private static func runMake(_ arguments: ParsedArguments, _ context: CommandContext) throws {
        let merchant = try Certificate(pemEncoded: try readText(arguments[makeCertOption]))
        let leaf = try Certificate(pemEncoded: try readText(arguments[signerCertOption]))
        let intermediate = try Certificate(pemEncoded: try readText(arguments[intermediateOption]))
        let keyPEM = try readText(arguments[signerKeyOption])
        let key: CertificatePrivateKey
        if let ec = try? P256.Signing.PrivateKey(pemRepresentation: keyPEM) {
            key = CertificatePrivateKey(ec)
        } else {
            key = CertificatePrivateKey(try RSA.PrivateKey(pemRepresentation: keyPEM))
        }
        let payment = try StrictJSONParser.parse(
            try readFile(arguments[paymentDataOption]), limits: JSONLimits(maxBytes: 32 * 1024, maxDepth: 8))
        _ = try DecryptedPaymentData(json: payment)  // refuse what no verifier would accept
        let clock: any WallClock = arguments[signingNowOption].map { ManualClock(now: $0) } ?? SystemClock()
        let signer = try CMSTokenSigner(leaf: leaf, key: key, intermediate: intermediate, clock: clock)
        let paymentData = try PaymentTokenEncoder(signer: signer).makePaymentData(
            payment: payment, recipient: try MerchantProcessingPublicKey(processingCertificate: merchant),
            applicationData: arguments[makeApplicationDataOption])
        if arguments[bareOption] {
            context.output(paymentData.json.serialized)
        } else {
            let method = PaymentMethod(displayName: "Card", network: "Orchard", type: "credit")
            let token = PaymentToken(
                paymentData: paymentData, paymentMethod: method,
                transactionIdentifier: paymentData.header.transactionIdHex.uppercased())
            context.output(token.json.serialized)
        }
    }

    static func roots(_ arguments: ParsedArguments) throws -> [Certificate] {
        let paths = arguments[rootOption]
        if paths.isEmpty { return [AppleRootCertificates.rootCAG3] }
        return try paths.flatMap { try Certificate.certificates(fromPEM: try readText($0)) }
    }

    static func window(_ arguments: ParsedArguments) -> TimeInterval { TimeInterval(arguments[windowOption]) }

    /// The clock of an evaluation: `--now`, else the system's.
    static func clock(_ arguments: ParsedArguments) throws -> any WallClock {
        if arguments[signingTimeOption], arguments[nowOption] != nil {
            throw CLIError.usage("--now and --signing-time exclude each other")
        }
        guard let date = arguments[nowOption] else { return SystemClock() }
        return ManualClock(now: date)
    }

    static func iso(_ date: Date) -> String { ISO8601DateFormatter().string(from: date) }

    static let inspect = Command(
        name: "inspect",
        summary: "Print a token's structure (no secrets: sizes, hashes and identifiers only).",
        positionals: ["TOKEN.json"]
    ) { arguments, context in
        try runInspect(arguments, context)
    }

    private static func runInspect(_ arguments: ParsedArguments, _ context: CommandContext) throws {
        let token = try loadToken(arguments)
        let paymentData = token.paymentData
        let header = paymentData.header
        var report: [String: JSONValueEncodable] = [
            "version": .string(paymentData.version.rawValue),
            "shape": .string(
                token.paymentMethod == nil && token.transactionIdentifier == nil ? "paymentData" : "PKPaymentToken"),
            "dataBytes": .int(paymentData.data.count),
            "signatureBytes": .int(paymentData.signature.count),
            "signatureEncoding": .string(
                paymentData.signature.starts(with: [0x30, 0x80]) ? "BER (indefinite length)" : "DER"),
            "publicKeyHash": .string(StrictEncoding.base64Encode(header.publicKeyHash)),
            "transactionId": .string(header.transactionIdHex),
            "applicationDataHash": header.applicationData.map { .string(StrictEncoding.hexEncode($0)) } ?? .null,
        ]
        switch header.keyMaterial {
        case .ephemeralPublicKey(let spki): report["ephemeralPublicKeyBytes"] = .int(spki.count)
        case .wrappedKey(let wrapped): report["wrappedKeyBytes"] = .int(wrapped.count)
        }
        if let method = token.paymentMethod {
            report["paymentMethod"] = .object([
                "displayName": .string(method.displayName), "network": .string(method.network),
                "type": .string(method.type),
            ])
        }
        try context.outputJSON(report)
    }

    /// Reads and strictly parses the token file named by the first positional argument.
    static func loadToken(_ arguments: ParsedArguments) throws -> PaymentToken {
        guard let path = arguments.positionals.first else { throw CLIError.usage("missing TOKEN.json") }
        return try PaymentToken(jsonBytes: try readFile(path))
    }
}

/// Reads a whole text file.
func readText(_ path: String) throws -> String {
    String(decoding: try readFile(path), as: UTF8.self)
}

/// Reads a whole file, with a one-line error naming it.
func readFile(_ path: String) throws -> [UInt8] {
    guard let data = FileManager.default.contents(atPath: path) else {
        throw CLIError.failure("cannot read \(path)")
    }
    return Array(data)
}

/// A small JSON value for command output (sorted keys come from the encoder).
indirect enum JSONValueEncodable: Encodable {
    case string(String)
    case int(Int)
    case bool(Bool)
    case object([String: JSONValueEncodable])
    case array([JSONValueEncodable])
    case null

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let s): try container.encode(s)
        case .int(let n): try container.encode(n)
        case .bool(let b): try container.encode(b)
        case .object(let o): try container.encode(o)
        case .array(let a): try container.encode(a)
        case .null: try container.encodeNil()
        }
    }
}
