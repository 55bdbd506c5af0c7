import EMV
import Foundation
import OrchardBenchmarks
import OrchardCrypto

/// `orchard emv ...`: EMV tools for payment engineers. Each command prints intermediate values and key
/// check values first and its result as one upper-case hex string on the last line of stdout. Inputs are
/// checked for form (hex length, digit count), not for Luhn: published vectors use PANs that fail it.
enum EMVCommands {
    static let command = Command(
        name: "emv",
        summary: "EMV contactless tools: key derivation, cryptograms, TLV, and a simulated transaction.",
        subcommands: [deriveMK, sessionKey, mac, arqc, arpc, tlv, simulate, bench]
    )

    // MARK: keys

    static let deriveMK = Command(
        name: "derive-mk",
        summary: "Derive a card master key from an issuer master key (EMV option A or B).",
        discussion: "Without --option: A for PANs of up to 16 digits, B above (EMV defines B as A up to 16 digits).",
        options: [
            keyOption("imk", help: "Issuer master key, 16 bytes (32 hex digits)."),
            panOption(help: "PAN, 12 to 19 digits."),
            psnOption(help: "PAN sequence number, one byte as 2 digits (e.g. 00)."), derivationOption,
        ]
    ) { arguments, context in
        let imk = arguments[keyOption("imk")]
        let pan = arguments[panOption()]
        let psn = arguments[psnOption()]
        let option = arguments[derivationOption]
        let resolved = option.resolved(panLength: pan.count)
        let y = try EMVKeyDerivation.masterKeyDerivationData(pan: pan, panSequenceNumber: psn, option: option)
        let mk = try EMVKeyDerivation.masterKey(
            issuerMasterKey: imk, pan: pan, panSequenceNumber: psn, option: option)
        context.output("option: \(resolved)")
        context.output("Y: \(y.hex)")
        context.output("Y xor FF: \(y.map { $0 ^ 0xFF }.hex)")
        context.output("IMK KCV: \(try EMVKeyDerivation.keyCheckValue(imk).hex)")
        context.output("MK KCV: \(try EMVKeyDerivation.keyCheckValue(mk).hex)")
        context.output(mk.bytes.unsafeCopyOfBytes().hex)
    }

    static let derivationOption = Option.withDefault(
        "option", "a|b", default: EMVKeyDerivation.MasterKeyOption.automatic, defaultText: "by the PAN's length",
        help: "Derivation option."
    ) { text throws(CLIError) in
        switch text.lowercased() {
        case "a": return .optionA
        case "b": return .optionB
        default: throw CLIError.failure("--option is a or b")
        }
    }

    static let sessionKey = Command(
        name: "session-key",
        summary: "Derive a session key: the EMV common session key, or Mastercard's (ATC and UN).",
        discussion: "The method defaults to mastercard when --un is given, common otherwise.",
        options: [
            keyOption("mk", help: "Card master key (MK-AC), 16 bytes."),
            hexOption("atc", bytes: 2, help: "Application transaction counter, 2 bytes (4 hex digits)."),
            sessionUNOption, methodOption,
        ]
    ) { arguments, context in
        let mk = arguments[keyOption("mk")]
        let atcBytes = arguments[hexOption("atc", bytes: 2)]
        let atc = UInt16(atcBytes[0]) << 8 | UInt16(atcBytes[1])
        let un = arguments[sessionUNOption]
        let method = arguments[methodOption]?.lowercased() ?? (un == nil ? "common" : "mastercard")
        let r: [UInt8]
        let sk: SymmetricKey
        switch method {
        case "common":
            guard un == nil else { throw CLIError.failure("the common session key takes no --un") }
            r = atcBytes + [0, 0, 0, 0, 0, 0]
            sk = try EMVKeyDerivation.commonSessionKey(masterKey: mk, atc: atc)
        case "mastercard":
            guard let un else { throw CLIError.failure("the mastercard method needs --un (4 bytes)") }
            r = atcBytes + [0, 0] + un
            sk = try EMVKeyDerivation.mastercardSessionKey(masterKey: mk, atc: atc, unpredictableNumber: un)
        default:
            throw CLIError.failure("--method is common or mastercard")
        }
        let (f1, f2) = EMVKeyDerivation.sessionKeyDiversification(r: r)
        context.output("method: \(method)")
        context.output("R: \(r.hex)")
        context.output("F1: \(f1.hex)")
        context.output("F2: \(f2.hex)")
        context.output("MK KCV: \(try EMVKeyDerivation.keyCheckValue(mk).hex)")
        context.output("SK KCV: \(try EMVKeyDerivation.keyCheckValue(sk).hex)")
        context.output(sk.bytes.unsafeCopyOfBytes().hex)
    }

    static let sessionUNOption = optionalHex(
        "un", bytes: 4, help: "Unpredictable number, 4 bytes (Mastercard method only).")
    static let methodOption = Option.optional("method", "common|mastercard", help: "Derivation method.")

    // MARK: MACs and cryptograms

    static let mac = Command(
        name: "mac",
        summary: "ISO/IEC 9797-1 MAC algorithm 3 (retail MAC) with a 16-byte key.",
        options: [
            keyOption("key", help: "MAC key K1 ‖ K2, 16 bytes."),
            hexOption("data", help: "The data (any number of bytes)."),
            padOption(help: "ISO/IEC 9797-1 padding method."),
        ]
    ) { arguments, context in
        try runMAC(arguments, context, keyName: "key")
    }

    static let arqc = Command(
        name: "arqc",
        summary: "An application cryptogram: MAC algorithm 3 under a session key over the MAC input.",
        discussion: "The data is the MAC input in the CVN's order (e.g. CVN 18: PDOL values, AIP, ATC, IAD).",
        options: [
            keyOption("sk", help: "Session key (or MK for CVN 10), 16 bytes."),
            hexOption("data", help: "The unpadded MAC input."),
            padOption(help: "Padding method: 1 for Visa CVN 10, 2 otherwise."),
        ]
    ) { arguments, context in
        try runMAC(arguments, context, keyName: "sk")
    }

    static func runMAC(_ arguments: ParsedArguments, _ context: CommandContext, keyName: String) throws {
        let key = arguments[keyOption(keyName)]
        let data = arguments[hexOption("data")]
        let padding = arguments[padOption()]
        context.output("padded: \(RetailMAC.pad(data, padding).hex)")
        context.output("key KCV: \(try EMVKeyDerivation.keyCheckValue(key).hex)")
        context.output(try ApplicationCryptogram.mac(key: key, data: data, padding: padding).hex)
    }

    /// `--pad 1|2`, ISO/IEC 9797-1 padding method 1 or 2 (default).
    static func padOption(help: String = "") -> Option<RetailMAC.Padding> {
        .withDefault("pad", "1|2", default: .method2, defaultText: "2", help: help) { text throws(CLIError) in
            switch text {
            case "1": return .method1
            case "2": return .method2
            default: throw CLIError.failure("--pad is 1 or 2")
            }
        }
    }

    static let arpc = Command(
        name: "arpc",
        summary: "An authorization response cryptogram: method 1 with --arc, method 2 with --csu [--prop].",
        options: [
            keyOption("sk", help: "The ARPC key (session key, or MK for CVN 10 and Mastercard CVN 16), 16 bytes."),
            hexOption("arqc", bytes: 8, help: "The ARQC, 8 bytes."), arcOption, csuOption, propOption,
        ]
    ) { arguments, context in
        let sk = arguments[keyOption("sk")]
        let arqc = arguments[hexOption("arqc", bytes: 8)]
        switch (arguments[arcOption], arguments[csuOption]) {
        case (.some(let arc), nil):
            guard arguments[propOption] == nil else { throw CLIError.failure("--prop belongs to method 2 (--csu)") }
            let arpc = try ApplicationCryptogram.arpcMethod1(key: sk, arqc: arqc, responseCode: arc)
            context.output("method: 1")
            context.output("tag 91: \((arpc + arc).hex)")
            context.output(arpc.hex)
        case (nil, .some(let csu)):
            let prop = arguments[propOption] ?? []
            let arpc = try ApplicationCryptogram.arpcMethod2(
                key: sk, arqc: arqc, cardStatusUpdate: csu, proprietaryData: prop)
            context.output("method: 2")
            context.output("tag 91: \((arpc + csu + prop).hex)")
            context.output(arpc.hex)
        default:
            throw CLIError.failure("give either --arc (method 1) or --csu (method 2)")
        }
    }

    static let arcOption = optionalHex(
        "arc", bytes: 2, help: "Method 1: authorization response code, 2 bytes (e.g. 3030).")
    static let csuOption = optionalHex("csu", bytes: 4, help: "Method 2: card status update, 4 bytes.")
    static let propOption = optionalHex(
        "prop", maximumBytes: 8, help: "Method 2: proprietary authentication data, 0 to 8 bytes.")

    // MARK: TLV

    static let tlv = Command(
        name: "tlv",
        summary: "Decode BER-TLV into an indented tree with tag names; the last line is the re-encoding.",
        positionals: ["HEX"]
    ) { arguments, context in
        guard let text = arguments.positionals.first else { throw CLIError.usage("give the TLV bytes as hex") }
        guard let bytes = [UInt8](hex: text) else {
            throw CLIError.failure("the TLV is not an even number of hex digits")
        }
        let objects = try TLV.decode(bytes)
        guard !objects.isEmpty else { throw CLIError.failure("no data objects in the input") }
        context.output(objects.treeDescription())
        context.output(objects.encoded.hex)
    }

    // MARK: simulate

    static let simulate = Command(
        name: "simulate",
        summary: "Run a contactless transaction between the card applet and the terminal kernel, then verify it.",
        discussion: """
            The card's master key is derived from --imk, --pan and --psn; --atc is the ATC the card uses for this \
            transaction. Prints one APDU per line (C-APDU, then R-APDU with its status word), the verifier's \
            result, and the cryptogram on the last line.
            """,
        options: [
            keyOption("imk", help: "Issuer master key, 16 bytes."), panOption(help: "The (D)PAN, 12 to 19 digits."),
            psnOption(help: "PAN sequence number, 2 digits."),
            hexOption("atc", bytes: 2, help: "The ATC of this transaction, 2 bytes (0001 to FFFF)."), amountOption,
            numericCodeOption("currency", help: "ISO 4217 numeric currency, 3 or 4 digits (e.g. 840 or 0840)."),
            numericCodeOption("country", help: "ISO 3166 numeric terminal country, 3 or 4 digits."), dateOption,
            hexOption("un", bytes: 4, help: "Terminal unpredictable number, 4 bytes."), kernelOption, expiryOption,
            cdcvmOption, noAuthorizationOption,
        ]
    ) { arguments, context in
        let imk = arguments[keyOption("imk")]
        let pan = arguments[panOption()]
        let psn = arguments[psnOption()]
        let atcBytes = arguments[hexOption("atc", bytes: 2)]
        let atc = UInt16(atcBytes[0]) << 8 | UInt16(atcBytes[1])
        guard atc > 0 else { throw CLIError.failure("--atc is 0001 to FFFF (a card never uses ATC 0000)") }
        let amount = arguments[amountOption]
        let currency = arguments[numericCodeOption("currency")]
        let country = arguments[numericCodeOption("country")]
        let date = arguments[dateOption]
        let un = arguments[hexOption("un", bytes: 4)]
        let scheme = arguments[kernelOption]
        let method = arguments[cdcvmOption]

        let masterKey = try EMVKeyDerivation.masterKey(issuerMasterKey: imk, pan: pan, panSequenceNumber: psn)
        let profile: CardApplicationProfile
        do {
            profile = try CardApplicationProfile(
                scheme: scheme, pan: pan, expiry: arguments[expiryOption], panSequenceNumber: psn,
                masterKey: masterKey)
        } catch let error as EMVError {
            throw CLIError.failure(error.message)
        }
        let card = try ContactlessCard(applications: [
            CardApplication(profile: profile, atcStore: InMemoryATCStore(lastUsed: atc - 1))
        ])
        let link = InProcessCardLink(card: card)
        if !arguments[noAuthorizationOption] { await link.authorize(CardholderAuthorization(cdcvm: method)) }
        var configuration = TerminalConfiguration(countryCode: country, currencyCode: currency)
        configuration.preferredAID = scheme.aid
        let outcome = try await TerminalKernel(configuration: configuration).run(
            TransactionParameters(amount: amount, date: date, unpredictableNumber: un), card: link)
        for exchange in outcome.transcript {
            context.output("C-APDU \(exchange.command.hex)")
            context.output("R-APDU \(exchange.response.hex)")
        }
        context.output("kernel: \(outcome)")
        guard outcome.status == .onlineRequest, let read = outcome.card else {
            throw CLIError.failure("no online request: \(outcome.status)\(outcome.reason.map { " (\($0))" } ?? "")")
        }
        context.output("field 55: \(read.field55Bytes.hex)")
        let verification = try CryptogramVerifier().verify(
            ChipAuthorizationData(read), issuerMasterKey: imk, lastSeenATC: atc - 1)
        context.output("verifier: \(verification)")
        guard case .valid(let verified) = verification else {
            throw CLIError.failure("the verifier rejected the cryptogram")
        }
        context.output(
            "issuer authentication data (91): "
                + (try verified.issuerAuthenticationData(
                    responseCode: [0x30, 0x30], cardStatusUpdate: [0, 0x80, 0, 0])).hex)
        context.output(read.cryptogram.hex)
    }

    static let amountOption = Option.required(
        "amount", "MINOR", help: "Amount in minor units (e.g. 15000 for 150.00)."
    ) { text throws(CLIError) in
        guard (1...12).contains(text.count), text.allSatisfy(\.isASCIIDigit), let amount = UInt64(text) else {
            throw CLIError.failure("--amount is 1 to 12 digits of minor units")
        }
        return amount
    }
    static let dateOption = Option.required("date", "YYMMDD", help: "Transaction date.") { text throws(CLIError) in
        do throws(EMVError) {
            return try TransactionDate(yymmdd: text)
        } catch {
            throw CLIError.failure("--date: \(error.message)")
        }
    }
    static let kernelOption = Option.withDefault(
        "kernel", PaymentScheme.all.map(\.name).joined(separator: "|"), default: PaymentScheme.visa,
        defaultText: PaymentScheme.visa.name,
        help: PaymentScheme.all.map { "\($0.displayName)-style (Kernel \($0.kernel.number))" }.joined(separator: " or ")
            + "."
    ) { text throws(CLIError) in
        guard let scheme = PaymentScheme(name: text.lowercased()) else {
            throw CLIError.failure("--kernel is " + PaymentScheme.all.map(\.name).joined(separator: " or "))
        }
        return scheme
    }
    static let expiryOption = Option.text("expiry", "YYMM", default: "2812", help: "Card expiry.")
    static let cdcvmOption = Option.withDefault(
        "cdcvm", "METHOD", default: CDCVMResult(performed: true, method: .face), defaultText: "face",
        help: "face, fingerprint, passcode, watch or none."
    ) { text throws(CLIError) in
        switch text.lowercased() {
        case "face": return CDCVMResult(performed: true, method: .face)
        case "fingerprint", "touch": return CDCVMResult(performed: true, method: .fingerprint)
        case "passcode": return CDCVMResult(performed: true, method: .passcode)
        case "watch": return CDCVMResult(performed: true, method: .wristDetection)
        case "none": return CDCVMResult(performed: false, method: .none)
        default: throw CLIError.failure("--cdcvm is face, fingerprint, passcode, watch or none")
        }
    }
    static let noAuthorizationOption = Option.flag(
        "no-authorization", help: "The host does not authorize the card: it releases nothing.")

    // MARK: bench

    static let bench = Command(
        name: "bench",
        summary: "Cryptogram verifications per second on one core, and the card's processing time per transaction.",
        discussion: "Run from a release build: swift build -c release && .build/release/orchard emv bench",
        options: [benchSecondsOption]
    ) { arguments, context in
        let figures = try await EMVBenchmark.run(seconds: arguments[benchSecondsOption])
        for figure in figures {
            context.output(
                "\(figure.name): \(Int(figure.verificationsFromIMKPerSecond)) verifications/s from the IMK, "
                    + "\(Int(figure.verificationsFromCardKeyPerSecond))/s from the card key; card "
                    + "\(String(format: "%.1f", figure.cardMicrosecondsPerTransaction)) µs per transaction "
                    + "(\(figure.apdusPerTransaction) APDUs)")
        }
        let slowest = figures.map(\.verificationsFromIMKPerSecond).min() ?? 0
        let met = slowest >= EMVBenchmark.targetVerificationsPerSecond
        context.output("target 20,000 verifications/s on one core: \(met ? "met" : "NOT met")")
    }

    static let benchSecondsOption = Option.withDefault(
        "seconds", "N", default: 3.0, defaultText: "3", help: "Seconds per figure."
    ) { text throws(CLIError) in
        guard let seconds = Double(text), seconds >= 0.05, seconds <= 600 else {
            throw CLIError.failure("--seconds is a number from 0.05 to 600")
        }
        return seconds
    }

    // MARK: input checks (bad input is a failure, exit 1, as these tools have always answered)

    /// Bytes in hex, `count` of them if given, required.
    static func hexOption(_ name: String, bytes count: Int? = nil, help: String = "") -> Option<[UInt8]> {
        .required(name, "HEX", help: help) { text throws(CLIError) in try hexBytes(text, name, count: count) }
    }

    /// Bytes in hex, `count` of them (or at most `maximumBytes`), nil when not given.
    static func optionalHex(
        _ name: String, bytes count: Int? = nil, maximumBytes: Int? = nil, help: String
    ) -> Option<[UInt8]?> {
        .optional(name, "HEX", help: help) { text throws(CLIError) in
            let bytes = try hexBytes(text, name, count: count)
            if let maximumBytes, bytes.count > maximumBytes {
                throw CLIError.failure("--\(name) is at most \(maximumBytes) bytes")
            }
            return bytes
        }
    }

    static func hexBytes(_ text: String, _ name: String, count: Int?) throws(CLIError) -> [UInt8] {
        guard let bytes = [UInt8](hex: text) else {
            throw CLIError.failure("--\(name) is not an even number of hex digits")
        }
        if let count, bytes.count != count {
            throw CLIError.failure("--\(name) is \(count) bytes (\(count * 2) hex digits), not \(bytes.count)")
        }
        return bytes
    }

    /// A 16-byte key in hex, required.
    static func keyOption(_ name: String, help: String = "") -> Option<SymmetricKey> {
        .required(name, "HEX", help: help) { text throws(CLIError) in
            SymmetricKey(data: try hexBytes(text, name, count: 16))
        }
    }

    static func panOption(help: String = "") -> Option<String> {
        .required("pan", "DIGITS", help: help) { pan throws(CLIError) in
            guard (12...19).contains(pan.count), pan.allSatisfy(\.isASCIIDigit) else {
                throw CLIError.failure("--pan is 12 to 19 decimal digits")
            }
            return pan
        }
    }

    static func psnOption(help: String = "") -> Option<Int> {
        .required("psn", "HEX", help: help) { text throws(CLIError) in
            guard text.count == 2, text.allSatisfy(\.isASCIIDigit), let psn = Int(text) else {
                throw CLIError.failure("--psn is one byte of two decimal digits, 00 to 99 (n2, e.g. 01)")
            }
            return psn
        }
    }

    static func numericCodeOption(_ name: String, help: String = "") -> Option<Int> {
        .required(name, "NUM", help: help) { text throws(CLIError) in
            guard (3...4).contains(text.count), text.allSatisfy(\.isASCIIDigit), let value = Int(text), value <= 999
            else {
                throw CLIError.failure("--\(name) is an ISO numeric code of 3 or 4 digits (e.g. 840 or 0840)")
            }
            return value
        }
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
