import CardBasics
import Foundation
import NFCLink
import OrchardCrypto
import OrchardLogging
import OrchardRuntime
import OrchardServices
import Terminal

/// `orchard terminal ...`: the point-of-sale terminal of a deployment (settings, STAN and journal in
/// DIR/terminal.sqlite, log in DIR/logs/terminal.log), charging phones and watches over the NFC link.
enum TerminalCommands {
    static let command = Command(
        name: "terminal",
        summary: "A contactless point-of-sale terminal: set it up, charge a phone or watch, read its journal.",
        subcommands: [setup, show, charge, journal, recover]
    )

    static let terminalOption = OptionSpec.single(
        "terminal", "ID", help: "The terminal (default: the only one; `charge` makes T0001 if there is none).")

    static let setup = Command(
        name: "setup",
        summary: "Create a terminal or change its settings.",
        discussion: """
            Settings not given keep their value (for a new terminal: merchant merchant.dev.orchard.demo, country 840,
            USD, Visa then Mastercard, TTQ 36C04000, no limits). Limits are amounts in the terminal's currency.
            Without --acquirer-url the terminal uses the deployment's running acquirer (DIR/run) and trusts the
            deployment's root CA (DIR/pki/root-ca.pem).
            """,
        options: [
            terminalOption,
            .single("merchant", "ID", help: "The merchant's account at the acquirer."),
            .single("merchant-name", "NAME", help: "The name the reader announces in its polling."),
            .single("country", "NNN", help: "ISO 3166 numeric country code (840 for the US)."),
            .single("currency", "CODE", help: "The default currency (ISO 4217: USD, EUR, JPY, ...)."),
            .repeatable("network", "NAME", help: "An accepted network, most preferred first: visa, masterCard."),
            .single("ttq", "HEX", help: "Terminal Transaction Qualifiers, 4 bytes in hex."),
            .single("contactless-limit", "AMOUNT", help: "Amounts above this are not taken contactless."),
            .single("cvm-limit", "AMOUNT", help: "Amounts at or above this need a cardholder verification."),
            .single("acquirer-url", "URL", help: "The acquirer's https:// base URL."),
            .single("acquirer-roots", "FILE", help: "PEM roots the acquirer's certificate must chain to."),
        ]
    ) { arguments, context in
        let deployment = DeploymentDirectory(path: context.dataDirectory.path)
        let store = try TerminalDatabase(deployment: deployment)
        var id = "T0001"
        if let given = arguments.value("terminal") {
            id = given
        } else if let first = try await store.terminals().first {
            id = first.terminalID
        }
        let existing = try await store.terminal(id)
        var settings = try existing ?? usage { try TerminalSettings(terminalID: id) }
        try usage {
            if let value = arguments.value("merchant") { settings.merchantID = value }
            if let value = arguments.value("merchant-name") { settings.merchantName = value }
            if let value = arguments.value("country") {
                guard let country = Int(value) else { throw TerminalError(.invalidArgument, "--country is a number") }
                settings.countryCode = country
            }
            if let value = arguments.value("currency") { settings.currency = try Currency(value).code }
            if !arguments.values("network").isEmpty { settings.acceptedNetworks = arguments.values("network") }
            if let value = arguments.value("ttq") {
                guard let ttq = Hex.decode(value) else { throw TerminalError(.invalidArgument, "--ttq is hex") }
                settings.terminalTransactionQualifiers = ttq
            }
            let currency = try Currency(settings.currency)
            if let value = arguments.value("contactless-limit") {
                settings.contactlessLimit = try Money(parsing: value, currency: currency).minorUnits
            }
            if let value = arguments.value("cvm-limit") {
                settings.cvmRequiredLimit = try Money(parsing: value, currency: currency).minorUnits
            }
            if let value = arguments.value("acquirer-url") { settings.acquirerURL = value }
            if let value = arguments.value("acquirer-roots") { settings.acquirerRootsPath = value }
            try settings.validate()
        }
        try await store.saveTerminal(settings)
        await store.close()
        context.trace("terminal \(settings.terminalID) saved in \(store.path)")
        if let issued = try issueClientIdentity(settings, deployment) {
            context.trace("terminal \(settings.terminalID): client certificate pki/\(issued).pem (role acquiring)")
        }
        try context.outputJSON(settings)
    }

    static let show = Command(
        name: "show", summary: "Print a terminal's settings (or all terminals).", options: [terminalOption]
    ) { arguments, context in
        let store = try TerminalDatabase(deployment: DeploymentDirectory(path: context.dataDirectory.path))
        if let id = arguments.value("terminal") {
            guard let settings = try await store.terminal(id) else {
                throw CLIError.failure("no terminal \(id) in \(store.path)")
            }
            try context.outputJSON(settings)
        } else {
            try context.outputJSON(try await store.terminals())
        }
    }

    static let charge = Command(
        name: "charge",
        summary: "Charge an amount to the phone or watch held to the terminal; prints approved or declined.",
        discussion: """
            The reader switches its field on at the device's antenna (DIR/devices/NAME/nfc.sock, opened by
            `orchard device run`), waits up to --wait seconds for the user to authenticate on the device, runs the
            contactless transaction and sends the authorization to the acquirer with the terminal ID and a new STAN
            as idempotency key; without an answer it retries with the same STAN, then sends a reversal. The result
            line is `approved|declined CODE AMOUNT [network masked-DPAN] [approval CODE][: reason]`; the exit
            status is 0 either way (--json prints the result as JSON).
            """,
        options: [
            terminalOption,
            .single("amount", "DECIMAL", help: "The amount, e.g. 12.34 (at most the currency's decimals)."),
            .single("currency", "CODE", help: "ISO 4217 code (default: the terminal's currency)."),
            .single("device", "NAME", help: "The device held to the reader (default: the only one in range)."),
            .single("wait", "SECONDS", help: "How long to wait for the user to authenticate (default 30)."),
            .single("attempts", "N", help: "Authorization attempts before a reversal (default 3)."),
            .single("timeout", "SECONDS", help: "How long one authorization attempt may take (default 10)."),
            .flag("json", help: "Print the result as JSON."),
        ]
    ) { arguments, context in
        let deployment = DeploymentDirectory(path: context.dataDirectory.path)
        let store = try TerminalDatabase(deployment: deployment)
        let settings = try await terminal(arguments, store, createIfNone: true)
        let lock = try TerminalLock(terminalID: settings.terminalID, in: deployment)
        defer { withExtendedLifetime(lock) {} }
        let currency = try usage { try Currency(arguments.value("currency") ?? settings.currency) }
        let amount = try usage { try Money(parsing: try arguments.require("amount"), currency: currency) }
        let antenna = try antennaPath(arguments, deployment)
        let wait = try arguments.integer("wait", default: 30, in: 0...600)
        let policy = TerminalPolicy(
            readyTimeout: .seconds(wait),
            authorizationAttempts: try arguments.integer("attempts", default: 3, in: 1...10),
            attemptTimeout: .seconds(try arguments.integer("timeout", default: 10, in: 1...120)))
        let logger = try TerminalLogFile.logger(for: deployment)
        let terminal = PaymentTerminal(
            settings: settings, store: store, gateway: try gateway(settings, deployment, policy: policy),
            policy: policy,
            logger: logger)
        context.trace("terminal \(settings.terminalID): charging \(amount); hold the device to the reader")
        let result = try await terminal.charge(amount, antenna: antenna)
        await store.close()
        if arguments.flag("json") {
            try context.outputJSON(result)
        } else {
            context.output(result.description)
        }
    }

    static let journal = Command(
        name: "journal",
        summary: "Print a terminal's last transactions (card numbers masked), newest first.",
        options: [terminalOption, .single("limit", "N", help: "How many (default 20).")]
    ) { arguments, context in
        let store = try TerminalDatabase(deployment: DeploymentDirectory(path: context.dataDirectory.path))
        let settings = try await terminal(arguments, store, createIfNone: false)
        let limit = try arguments.integer("limit", default: 20, in: 1...10_000)
        try context.outputJSON(
            try await store.transactions(terminalID: settings.terminalID, limit: limit).map(JournalLine.init))
    }

    static let recover = Command(
        name: "recover",
        summary: "Send the reversals an interrupted terminal left pending; mark interrupted taps.",
        options: [terminalOption]
    ) { arguments, context in
        let deployment = DeploymentDirectory(path: context.dataDirectory.path)
        let store = try TerminalDatabase(deployment: deployment)
        let settings = try await terminal(arguments, store, createIfNone: false)
        let lock = try TerminalLock(terminalID: settings.terminalID, in: deployment)
        defer { withExtendedLifetime(lock) {} }
        let terminal = PaymentTerminal(
            settings: settings, store: store, gateway: try gateway(settings, deployment, policy: TerminalPolicy()),
            logger: try TerminalLogFile.logger(for: deployment))
        try context.outputJSON(try await terminal.recover().map(JournalLine.init))
    }

    // MARK: Helpers

    /// The terminal `--terminal` names, else the only one; `charge` sets up T0001 in an empty store.
    static func terminal(
        _ arguments: ParsedArguments, _ store: TerminalDatabase, createIfNone: Bool
    ) async throws
        -> TerminalSettings
    {
        if let id = arguments.value("terminal") {
            guard let settings = try await store.terminal(id) else {
                throw CLIError.failure("no terminal \(id): run `orchard terminal setup --terminal \(id)`")
            }
            return settings
        }
        let all = try await store.terminals()
        switch all.count {
        case 1: return all[0]
        case 0:
            guard createIfNone else { throw CLIError.failure("no terminal yet: run `orchard terminal setup`") }
            let settings = try TerminalSettings(terminalID: "T0001")
            try await store.saveTerminal(settings)
            return settings
        default:
            throw CLIError.usage(
                "several terminals: say which with --terminal (\(all.map(\.terminalID).joined(separator: ", ")))")
        }
    }

    /// The antenna of `--device`, else of the only device in range.
    static func antennaPath(_ arguments: ParsedArguments, _ deployment: DeploymentDirectory) throws -> String {
        if let name = arguments.value("device") { return NFCAntenna.path(forDevice: name, in: deployment) }
        let inRange = NFCAntenna.devicesInRange(of: deployment)
        switch inRange.count {
        case 1: return NFCAntenna.path(forDevice: inRange[0], in: deployment)
        case 0: throw CLIError.failure("no phone or watch is near the reader: start one with `orchard device run`")
        default:
            throw CLIError.usage(
                "several devices are in range: say which with --device (\(inRange.joined(separator: ", ")))")
        }
    }

    /// The acquirer connection: the configured URL, else the deployment's running acquirer; trusting the
    /// configured roots, else the deployment's root CA. Without either, every request fails as unreachable.
    static func gateway(
        _ settings: TerminalSettings, _ deployment: DeploymentDirectory, policy: TerminalPolicy
    ) throws -> any AuthorizationGateway {
        var url = settings.acquirerURL
        if url == nil {
            for name in ["acquirer", "network"] {
                if let service = try? ServiceName(name), let record = try? deployment.runningService(service) {
                    url = record.baseURL
                    break
                }
            }
        }
        guard let url else { return UnconfiguredGateway() }
        let rootsPath = settings.acquirerRootsPath ?? (try? deployment.certificatePath(named: "root-ca")) ?? ""
        guard let roots = FileManager.default.contents(atPath: rootsPath) else {
            throw CLIError.failure("cannot read the acquirer's trusted roots at \(rootsPath)")
        }
        // The terminal's client certificate, when `setup` issued one in this deployment.
        var chain: String?
        var key: SecureBytes?
        let identity = clientIdentityName(settings.terminalID)
        if let path = try? deployment.certificatePath(named: identity),
            let pem = FileManager.default.contents(atPath: path)
        {
            chain = String(decoding: pem, as: UTF8.self)
            key = try deployment.readPrivateKey(named: identity)
        }
        return try AcquirerHTTPSGateway(
            baseURL: url, trustedRootsPEM: String(decoding: roots, as: UTF8.self), clientCertificateChainPEM: chain,
            clientPrivateKeyPEM: key, requestTimeout: policy.attemptTimeout)
    }

    /// `pki/terminal-<id>-client`: the terminal's TLS client identity for the acquirer.
    static func clientIdentityName(_ terminalID: String) -> String { "terminal-\(terminalID.lowercased())-client" }

    /// In a deployment with a root CA, issues the terminal's client certificate (role `acquiring`, CN the
    /// terminal ID) the network's acquiring route requires, unless it exists. Returns its name when issued.
    static func issueClientIdentity(_ settings: TerminalSettings, _ deployment: DeploymentDirectory) throws -> String? {
        let name = clientIdentityName(settings.terminalID)
        let rootKey = try deployment.privateKeyPath(named: PKIFiles.rootCA)
        guard FileManager.default.fileExists(atPath: rootKey),
            !FileManager.default.fileExists(atPath: try deployment.certificatePath(named: name))
        else { return nil }
        let root = try CertificateAuthority.load(named: PKIFiles.rootCA, from: deployment)
        try ServiceAccess.issueClientIdentity(
            named: name, role: .acquiring, commonName: settings.terminalID, by: root, to: deployment,
            clock: SystemClock(), random: SystemRandom())
        return name
    }

    /// Runs `body`, turning a terminal's refusal of an option into a usage error.
    static func usage<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as TerminalError {
            throw CLIError.usage(error.message)
        } catch let error as CardBasicsError {
            throw CLIError.usage(error.message)
        }
    }
}

/// A journal line as the commands print it: times in ISO 8601, the card number masked (as stored).
struct JournalLine: Encodable {
    let stan: String
    let state: String
    let startedAt: String
    let updatedAt: String
    let amount: String
    let deviceKind: String?
    let maskedPan: String?
    let scheme: String?
    let atc: Int?
    let responseCode: String?
    let approvalCode: String?
    let reason: String?
    let attempts: Int

    init(_ record: TransactionRecord) {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        stan = record.systemTraceAuditNumber
        state = record.state.rawValue
        startedAt = formatter.string(from: record.startedAt)
        updatedAt = formatter.string(from: record.updatedAt)
        let currency = try? Currency(record.currency)
        amount =
            currency.flatMap { try? Money(minorUnits: record.amountMinorUnits, currency: $0) }?.description
            ?? "\(record.amountMinorUnits) \(record.currency)"
        deviceKind = record.deviceKind
        maskedPan = record.maskedPAN
        scheme = record.scheme
        atc = record.applicationTransactionCounter
        responseCode = record.responseCode
        approvalCode = record.approvalCode
        reason = record.reason
        attempts = record.attempts
    }
}

/// The acquirer connection of a terminal that has none: every request is undeliverable.
struct UnconfiguredGateway: AuthorizationGateway {
    func authorize(_ request: AuthorizationRequest) async throws -> AuthorizationResponse {
        throw TerminalError(
            .gatewayUnreachable, "no acquirer is configured: `orchard terminal setup --acquirer-url URL` or start one")
    }

    func reverse(_ request: ReversalRequest) async throws -> ReversalResponse {
        throw TerminalError(.gatewayUnreachable, "no acquirer is configured")
    }
}
