import AccessPolicy
import CardBasics
import Foundation
import NFCLink
import OrchardCrypto
import OrchardLogging
import OrchardRuntime
import OrchardServices
import OrchardX509
import Terminal

/// `orchard terminal ...`: the point-of-sale terminal of a deployment (settings, STAN and journal in
/// DIR/terminal.sqlite, log in DIR/logs/terminal.log), charging phones and watches over the NFC link.
enum TerminalCommands {
    static let command = Command(
        name: "terminal",
        summary: "A contactless point-of-sale terminal: set it up, charge a phone or watch, read its journal.",
        subcommands: [setup, show, charge, journal, recover]
    )

    static let terminalOption = Option.optional(
        "terminal", "ID", help: "The terminal (default: the only one; `charge` makes T0001 if there is none).")

    static let setup = Command(
        name: "setup",
        summary: "Create a terminal or change its settings.",
        discussion: """
            Settings not given keep their value (for a new terminal: merchant merchant.dev.orchard.demo, country 840,
            USD, Visa then Mastercard, TTQ 36C04000, no limits). Limits are amounts in the terminal's currency, and a
            terminal with limits charges only in that currency.
            Without --acquirer-url the terminal uses the deployment's running acquirer (DIR/run) and trusts the
            deployment's root CA (DIR/pki/root/root-ca.pem).
            """,
        options: [
            terminalOption, merchantOption, merchantNameOption, countryOption, setupCurrencyOption, networkOption,
            ttqOption, contactlessLimitOption, cvmLimitOption, acquirerURLOption, acquirerRootsOption,
        ]
    ) { arguments, context in
        let deployment = DeploymentDirectory(path: context.dataDirectory.path)
        let store = try TerminalDatabase(deployment: deployment)
        var id = "T0001"
        if let given = arguments[terminalOption] {
            id = given
        } else if let first = try await store.terminals().first {
            id = first.terminalID
        }
        let existing = try await store.terminal(id)
        var settings = try existing ?? usage { try TerminalSettings(terminalID: id) }
        try usage {
            if let value = arguments[merchantOption] { settings.merchantID = value }
            if let value = arguments[merchantNameOption] { settings.merchantName = value }
            if let country = arguments[countryOption] { settings.countryCode = country }
            if let currency = arguments[setupCurrencyOption] { settings.currency = currency.code }
            if !arguments[networkOption].isEmpty { settings.acceptedNetworks = arguments[networkOption] }
            if let ttq = arguments[ttqOption] { settings.terminalTransactionQualifiers = ttq }
            // Limits are amounts in the terminal's currency, known only once its settings are read.
            let currency = try Currency(settings.currency)
            if let value = arguments[contactlessLimitOption] {
                settings.contactlessLimit = try Money(parsing: value, currency: currency).minorUnits
            }
            if let value = arguments[cvmLimitOption] {
                settings.cvmRequiredLimit = try Money(parsing: value, currency: currency).minorUnits
            }
            if let value = arguments[acquirerURLOption] { settings.acquirerURL = value }
            if let value = arguments[acquirerRootsOption] { settings.acquirerRootsPath = value }
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

    static let merchantOption = Option.optional("merchant", "ID", help: "The merchant's account at the acquirer.")
    static let merchantNameOption = Option.optional(
        "merchant-name", "NAME", help: "The name the reader announces in its polling.")
    static let countryOption: Option<Int?> = .optional(
        "country", "NNN", help: "ISO 3166 numeric country code (840 for the US)."
    ) { text throws(CLIError) in
        guard let country = Int(text) else { throw CLIError.usage("--country is a number") }
        return country
    }
    static let setupCurrencyOption = currencyOption(help: "The default currency (ISO 4217: USD, EUR, JPY, ...).")
    static let networkOption = Option.repeatable(
        "network", "NAME", help: "An accepted network, most preferred first: visa, masterCard.")
    static let ttqOption: Option<[UInt8]?> = .optional(
        "ttq", "HEX", help: "Terminal Transaction Qualifiers, 4 bytes in hex."
    ) { text throws(CLIError) in
        guard let ttq = Hex.decode(text) else { throw CLIError.usage("--ttq is hex") }
        return ttq
    }
    static let contactlessLimitOption = Option.optional(
        "contactless-limit", "AMOUNT", help: "Amounts above this are not taken contactless.")
    static let cvmLimitOption = Option.optional(
        "cvm-limit", "AMOUNT", help: "Amounts at or above this need a cardholder verification.")
    static let acquirerURLOption = Option.optional("acquirer-url", "URL", help: "The acquirer's https:// base URL.")
    static let acquirerRootsOption = Option.optional(
        "acquirer-roots", "FILE", help: "PEM roots the acquirer's certificate must chain to.")

    /// `--currency CODE`, an ISO 4217 code the terminal knows.
    static func currencyOption(help: String) -> Option<Currency?> {
        .optional("currency", "CODE", help: help) { text throws(CLIError) in
            do throws(CardBasicsError) {
                return try Currency(text)
            } catch {
                throw CLIError.usage(error.message)
            }
        }
    }

    static let show = Command(
        name: "show", summary: "Print a terminal's settings (or all terminals).", options: [terminalOption]
    ) { arguments, context in
        let store = try TerminalDatabase(deployment: DeploymentDirectory(path: context.dataDirectory.path))
        if let id = arguments[terminalOption] {
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
            `orchard device run`; --antenna SOCKET for a device kept in another directory), waits up to --wait
            seconds for the user to authenticate on the device, runs the contactless transaction and sends the authorization to the acquirer with the terminal ID and a new STAN
            as idempotency key; without an answer it retries with the same STAN, then sends a reversal. The result
            line is `approved|declined CODE AMOUNT [network masked-DPAN] [approval CODE][: reason]`; the exit
            status is 0 either way (--json prints the result as JSON).
            """,
        options: [
            terminalOption, amountOption, chargeCurrencyOption, deviceOption, antennaOption, waitOption,
            attemptsOption, timeoutOption, jsonOption,
        ]
    ) { arguments, context in
        let deployment = DeploymentDirectory(path: context.dataDirectory.path)
        let store = try TerminalDatabase(deployment: deployment)
        let settings = try await terminal(arguments, store, createIfNone: true)
        let lock = try TerminalLock(terminalID: settings.terminalID, in: deployment)
        defer { withExtendedLifetime(lock) {} }
        let currency = try arguments[chargeCurrencyOption] ?? usage { try Currency(settings.currency) }
        let amount = try usage { try Money(parsing: arguments[amountOption], currency: currency) }
        let antenna = try antennaPath(arguments, deployment)
        let policy = TerminalPolicy(
            readyTimeout: .seconds(arguments[waitOption]), authorizationAttempts: arguments[attemptsOption],
            attemptTimeout: .seconds(arguments[timeoutOption]))
        let logger = try TerminalLogFile.logger(for: deployment)
        let terminal = PaymentTerminal(
            settings: settings, store: store, gateway: try gateway(settings, deployment, policy: policy),
            policy: policy,
            logger: logger)
        context.trace("terminal \(settings.terminalID): charging \(amount); hold the device to the reader")
        let result = try await terminal.charge(amount, antenna: antenna)
        await store.close()
        if arguments[jsonOption] {
            try context.outputJSON(result)
        } else {
            context.output(result.description)
        }
    }

    static let amountOption = Option.required(
        "amount", "DECIMAL", help: "The amount, e.g. 12.34 (at most the currency's decimals).")
    static let chargeCurrencyOption = currencyOption(
        help: "ISO 4217 code (default: the terminal's currency; a terminal with limits charges only in its own).")
    static let deviceOption = Option.optional(
        "device", "NAME", help: "The device held to the reader (default: the only one in range).")
    static let antennaOption = Option.optional(
        "antenna", "SOCKET",
        help: "The NFC antenna socket of a device kept in another directory (the Pay side's, for a merchant deployed "
            + "on its own): DIR2/devices/NAME/nfc.sock.")
    static let waitOption = Option.integer(
        "wait", "SECONDS", default: 30, range: 0...600, help: "How long to wait for the user to authenticate.")
    static let attemptsOption = Option.integer(
        "attempts", default: 3, range: 1...10, help: "Authorization attempts before a reversal.")
    static let timeoutOption = Option.integer(
        "timeout", "SECONDS", default: 10, range: 1...120, help: "How long one authorization attempt may take.")
    static let jsonOption = Option.flag("json", help: "Print the result as JSON.")

    static let journal = Command(
        name: "journal",
        summary: "Print a terminal's last transactions (card numbers masked), newest first.",
        options: [terminalOption, limitOption]
    ) { arguments, context in
        let store = try TerminalDatabase(deployment: DeploymentDirectory(path: context.dataDirectory.path))
        let settings = try await terminal(arguments, store, createIfNone: false)
        let limit = arguments[limitOption]
        try context.outputJSON(
            try await store.transactions(terminalID: settings.terminalID, limit: limit).map(JournalLine.init))
    }

    static let limitOption = Option.integer("limit", default: 20, range: 1...10_000, help: "How many.")

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
        if let id = arguments[terminalOption] {
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
        if let socket = arguments[antennaOption] { return socket }
        if let name = arguments[deviceOption] { return NFCAntenna.path(forDevice: name, in: deployment) }
        let inRange = NFCAntenna.devicesInRange(of: deployment)
        switch inRange.count {
        case 1: return NFCAntenna.path(forDevice: inRange[0], in: deployment)
        case 0: throw CLIError.failure("no phone or watch is near the reader: start one with `orchard device run`")
        default:
            throw CLIError.usage(
                "several devices are in range: say which with --device (\(inRange.joined(separator: ", ")))")
        }
    }

    /// The acquirer connection: the configured URL, else every running instance of the deployment's acquirer
    /// (the network service: `run/network.json`, then `run/network.N.json`), failed over in that order; trusting
    /// the configured roots, else the deployment's root CA. Without either, every request fails as unreachable.
    static func gateway(
        _ settings: TerminalSettings, _ deployment: DeploymentDirectory, policy: TerminalPolicy
    ) throws -> any AuthorizationGateway {
        var urls = settings.acquirerURL.map { [$0] } ?? []
        if urls.isEmpty {
            for name in ["acquirer", "network"] {
                guard let service = try? ServiceName(name) else { continue }
                urls = deployment.runningInstances(of: service).map(\.baseURL)
                if !urls.isEmpty { break }
            }
        }
        // A merchant deployed on its own: the network's address from its imported bundle.
        if urls.isEmpty, let peer = PeerAddresses.read(from: deployment).endpoint(of: .network) {
            urls = [peer.baseURL]
        }
        guard !urls.isEmpty else { return UnconfiguredGateway() }
        let roots: Data
        if let rootsPath = settings.acquirerRootsPath {
            guard let configured = FileManager.default.contents(atPath: rootsPath) else {
                throw CLIError.failure("cannot read the acquirer's trusted roots at \(rootsPath)")
            }
            roots = configured
        } else {
            // The deployment's root, or the network's imported one (and that one only) for a merchant deployed on
            // its own.
            do {
                roots = Data(try PeerAddresses.trustedRootPEM(for: .network, in: deployment).utf8)
            } catch {
                throw CLIError.failure("cannot read the acquirer's trusted roots in \(deployment.pkiPath): \(error)")
            }
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
            baseURLs: urls, trustedRootsPEM: String(decoding: roots, as: UTF8.self), clientCertificateChainPEM: chain,
            clientPrivateKeyPEM: key, requestTimeout: policy.attemptTimeout)
    }

    /// `pki/terminal-<id>-client`: the terminal's TLS client identity for the acquirer.
    static func clientIdentityName(_ terminalID: String) -> String { PartyRequest.Keys.terminalClient(terminalID) }

    /// In a deployment with a root CA, issues the terminal's client certificate (role `acquiring`, CN the
    /// terminal ID, UID `terminal:<ID>@<merchant ID>`) the network's acquiring route requires, unless one naming
    /// this terminal of this merchant exists (a terminal moved to another merchant gets a new one: the acquirer
    /// accepts it only in its merchant's name). Returns its name when issued.
    static func issueClientIdentity(_ settings: TerminalSettings, _ deployment: DeploymentDirectory) throws -> String? {
        let name = clientIdentityName(settings.terminalID)
        let identity = CallerIdentity(
            kind: CallerIdentity.terminal, identifier: settings.terminalID, owner: settings.merchantID)
        let rootKey = try deployment.privateKeyPath(named: PKIFiles.rootCA)
        guard FileManager.default.fileExists(atPath: rootKey) else { return nil }
        // A merchant deployed on its own: the network certifies its terminals (`orchard pki import`), never its
        // own root.
        guard try PartyManifest.read(from: deployment) == nil else { return nil }
        if FileManager.default.fileExists(atPath: try deployment.certificatePath(named: name)),
            try DeploymentPKI.readCertificate(named: name, from: deployment).subject.userID == identity.subjectUserID
        {
            return nil
        }
        let root = try CertificateAuthority.load(named: PKIFiles.rootCA, from: deployment)
        try ServiceAccess.issueClientIdentity(
            named: name, role: .acquiring, commonName: settings.terminalID, identity: identity, by: root,
            to: deployment, clock: SystemClock(), random: SystemRandom())
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
