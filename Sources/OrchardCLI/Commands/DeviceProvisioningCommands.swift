import Device
import DeviceControlAPI
import DeviceProcess
import Foundation
import OrchardRuntime
import OrchardServices
import OrchardX509
import PayAPI
import PayClient

/// `orchard device add-card | lost-mode | erase | resume | sync`: a device's dealings with the Pay server
/// (docs/provisioning.md). They follow the process contract: the Pay server and the network are used where they
/// run for DIR, else started in this process for the command.
extension DeviceCommands {
    static let addCard = Command(
        name: "add-card",
        summary: "Add a card to a device's wallet through the Pay server (Check Card, terms, Link and Provision).",
        discussion: """
            The card data is sealed on the device to the token service's key, taken from a certificate the device
            checks against the Orchard root (root-ca.pem in DIR's pki/; a Pay side deployed on its own: the
            network's root it imported); the Pay server relays what it cannot read. A step-up
            needs the issuer's one-time code, read when the issuer asks for it from --one-time-code-file FILE (one
            line, mode 0600 or stricter; `-`: stdin), else $ORCHARD_ONE_TIME_CODE, else stdin (a prompt with echo
            off when stdin is a terminal; stdin that carried the card holds nothing more); --otp CODE is refused.
            Without a terminal the
            terms are accepted by running the command (they are printed in the trace). The personalisation is
            installed into the device's Secure Element through its running process, or on its store directly.
            Each request carries an idempotency key, so a request the client resends after a lost answer gets
            the first decision and never a second token.
            The card number and CVV never go on the command line (argv is visible to `ps` and kept in shell
            history): they are read from --card-file FILE, or from stdin when --card-file is absent or `-` (a
            prompt with echo off when stdin is a terminal). The file or stdin holds either the JSON object
            {"number": "4111111111111111", "cvv": "266"} or two lines: the card number, then the CVV.
            Test cards are listed in the README.
            """,
        options: [
            nameOption, cardFileOption, expiryOption, cardholderOption, oneTimeCodeFileOption, refusedPANOption,
            refusedCVVOption, refusedOTPOption,
        ]
    ) { arguments, context in
        try await addCard(arguments, context)
    }

    static let cardFileOption = Option.optional(
        "card-file", "FILE",
        help: "The card number and CVV (the CVV checked by the issuer, stored nowhere): JSON or two lines; "
            + "`-` or absent: stdin.")
    static let expiryOption = Option.required("expiry", "MM/YY", help: "The card's expiry.")
    /// `--pan` and `--cvv` are refused with a hint rather than taken: argv is visible to every user's `ps` and kept
    /// in shell history. The value is never echoed.
    static let refusedPANOption = refusedSecretOption("pan", "the card number")
    static let refusedCVVOption = refusedSecretOption("cvv", "the CVV")

    private static func refusedSecretOption(_ name: String, _ what: String) -> Option<String?> {
        Option.optional(name, "-", help: "Refused: put \(what) in --card-file or on stdin.") {
            _ throws(CLIError) in
            throw CLIError.usage(
                "--\(name) is refused: \(what) on the command line is visible to `ps` and kept in shell history; "
                    + "give it in --card-file FILE or on stdin (see 'orchard device add-card --help')")
        }
    }
    static let cardholderOption = Option.required("cardholder", "NAME", help: "The cardholder's name.")
    static let oneTimeCodeFileOption = SecretInput.oneTimeCode.fileOption
    /// `--otp CODE`, refused like `--pan`.
    static let refusedOTPOption = SecretInput.oneTimeCode.refusedOption("otp")
    static let asOption = Option.optional("as", "NAME", help: "Another device of the same account to act from.")

    static let lostMode = lifecycleCommand(
        .lostMode, summary: "Lost mode (Find My): suspend every card of the device at the token service.")
    static let erase = lifecycleCommand(
        .erase, summary: "Erase remotely: delete every card of the device at the token service and on the device.")
    static let resume = Command(
        name: "resume",
        summary: "Leave lost mode with the device passcode (a 0600 file, $ORCHARD_PASSCODE or stdin): the cards work "
            + "again.",
        discussion: """
            Reads the passcode from --passcode-file FILE (one line, mode 0600 or stricter), else $ORCHARD_PASSCODE, else
            one line of standard input (asked for with echo off when stdin is a terminal). The device's own Secure
            Enclave checks it (wrong ones count, with the usual waits) and signs a fresh challenge of the Pay server,
            which checks the signature with the Secure Enclave key the device registered: the device's certificate
            alone, or another device of the account, never leaves lost mode. The Secure Enclave is reached through the
            device's running process, else its store. --as names the device whose client identity talks to the Pay
            server (default the device itself). Example: `echo 123456 | orchard device resume --name phone`.
            """,
        options: [nameOption, asOption, passcodeFileOption]
    ) { arguments, context in
        try await resume(arguments, context)
    }

    static let sync = Command(
        name: "sync",
        summary: "Apply the token-status notifications the Pay server holds for the device (suspend, resume, delete).",
        options: [nameOption]
    ) { arguments, context in
        try await syncNotifications(arguments, context)
    }

    private static func lifecycleCommand(_ action: PayAPI.LifecycleAction, summary: String) -> Command {
        Command(
            name: action.rawValue, summary: summary,
            discussion: """
                Acts through the Pay server as the device's account owner (with the client identity of the device
                named by --as, default the device itself), so it works while the device is offline or its process
                stopped; the device applies the change when it next reaches the Pay server (`orchard device run`
                does at start and every few seconds, `orchard device sync` at once).
                """,
            options: [nameOption, asOption]
        ) { arguments, context in
            try await lifecycle(action, arguments, context)
        }
    }

    // MARK: Bodies (synchronous-looking helpers: see TokenCommands on typed throws in async closures)

    static func addCard(_ arguments: ParsedArguments, _ context: CommandContext) async throws {
        let deployment = DeploymentDirectory(path: context.dataDirectory.path)
        let name = arguments[nameOption]
        let card: CardEntry
        let cardFile = arguments[cardFileOption]
        let codeFile = arguments[oneTimeCodeFileOption]
        if codeFile == "-", cardFile == nil || cardFile == "-" {
            throw CLIError.usage("the card and the one-time code cannot both come from stdin: put one in a file")
        }
        let secret = try CardSecretInput.read(file: cardFile, context: context)
        do throws(PayClientError) {
            card = try CardEntry(
                number: secret.number, expiry: arguments[expiryOption],
                verificationValue: secret.verificationValue, cardholderName: arguments[cardholderOption])
        } catch {
            throw CLIError.usage(error.message)
        }
        let identity = try Device.identity(of: name, in: deployment)
        let interactive = context.isInteractive
        let key = AddCardFlow.newIdempotencyKey()
        let outcome = try await PaySession.with(device: name, in: deployment, context: context) { session in
            let flow = AddCardFlow(
                client: session.client, root: session.root, deviceID: name,
                secureElementCertificate: identity.certificate, enclavePublicKey: identity.enclavePublicKey)
            return try await flow.run(
                card: card, idempotencyKey: key,
                oneTimeCode: { decision in
                    context.trace(
                        "the issuer sent a one-time code by \(decision.stepUpMethod ?? "?") to "
                            + "\(decision.stepUpDestination ?? "?")")
                    // The card was checked already: a missing code fails the command (exit 1), no usage error.
                    do throws(CLIError) {
                        return SecretInput.text(try SecretInput.oneTimeCode.read(file: codeFile, context))
                    } catch {
                        throw CLIError.failure(error.message)
                    }
                },
                acceptTerms: { terms in
                    context.trace("terms \(terms.termsID): \(terms.text)")
                    guard interactive else { return true }
                    context.trace("accept these terms? [y/N] ")
                    return ["y", "yes"].contains(readLine(strippingNewline: true)?.lowercased() ?? "")
                },
                install: { envelope, display in
                    try await installCard(envelope, display: display, device: name, in: deployment)
                },
                trace: { context.trace($0) })
        }
        switch outcome {
        case .declined(let reason):
            throw CLIError.failure("the card was declined: \(reason)")
        case .added(let walletCardID, let tokenReference, let display, let deviceAccountSuffix):
            try context.outputJSON(
                AddedCard(
                    device: name, cardID: walletCardID, tokenReference: tokenReference, network: display.network,
                    type: display.type, suffix: display.suffix, description: display.description,
                    deviceAccountSuffix: deviceAccountSuffix))
        }
    }

    /// Installs a personalisation envelope on the device (its running process, or its store).
    static func installCard(
        _ envelope: [UInt8], display: CardDisplay, device name: String, in deployment: DeploymentDirectory
    ) async throws -> String {
        let request = AddCard(
            envelope: Data(envelope), type: display.type, suffix: display.suffix, displayName: display.description)
        return try await send(request, to: name, in: deployment).id
    }

    static func lifecycle(
        _ action: PayAPI.LifecycleAction, _ arguments: ParsedArguments, _ context: CommandContext
    ) async throws {
        let deployment = DeploymentDirectory(path: context.dataDirectory.path)
        let name = arguments[nameOption]
        let result = try await PaySession.with(device: arguments[asOption] ?? name, in: deployment, context: context) {
            try await performLifecycle(action, device: name, client: $0.client)
        }
        context.trace(
            "Pay server → token service: \(action.rawValue) for device \(name): "
                + result.cards.map { "•••• \($0.card.suffix) \($0.state)" }.joined(separator: ", "))
        // A device process that runs applies the change now; a stopped one at its next start.
        if ControlSocketClient.isRunning(at: Device.controlSocketPath(of: name, in: deployment)) {
            _ = try await PaySession.with(device: name, in: deployment, context: context) {
                try await applyNotifications(device: name, in: deployment, client: $0.client)
            }
        }
        try context.outputJSON(result)
    }

    static func resume(_ arguments: ParsedArguments, _ context: CommandContext) async throws {
        let deployment = DeploymentDirectory(path: context.dataDirectory.path)
        let name = arguments[nameOption]
        let passcode = SecretInput.text(
            try SecretInput.passcode.read(file: arguments[passcodeFileOption], context, prompt: "passcode of \(name): ")
        )
        let result = try await PaySession.with(device: arguments[asOption] ?? name, in: deployment, context: context) {
            session in
            try await session.client.resume(device: name) { challenge in
                let answer = try await DeviceCommands.send(
                    AttestPasscode(passcode: passcode, challenge: Data(challenge)), to: name, in: deployment)
                return Array(answer.signature)
            }
        }
        context.trace(
            "device \(name): the Secure Enclave attested the passcode; Pay server → token service: resume: "
                + result.cards.map { "•••• \($0.card.suffix) \($0.state)" }.joined(separator: ", "))
        if ControlSocketClient.isRunning(at: Device.controlSocketPath(of: name, in: deployment)) {
            _ = try await PaySession.with(device: name, in: deployment, context: context) {
                try await applyNotifications(device: name, in: deployment, client: $0.client)
            }
        }
        try context.outputJSON(result)
    }

    static func performLifecycle(
        _ action: PayAPI.LifecycleAction, device: String, client: PayServerClient
    ) async throws -> LifecycleResult {
        try await client.lifecycle(device: device, action: action)
    }

    static func syncNotifications(_ arguments: ParsedArguments, _ context: CommandContext) async throws {
        let deployment = DeploymentDirectory(path: context.dataDirectory.path)
        let name = arguments[nameOption]
        let applied = try await PaySession.with(device: name, in: deployment, context: context) {
            try await applyNotifications(device: name, in: deployment, client: $0.client)
        }
        for notification in applied {
            context.trace("token \(notification.tokenReference): \(notification.event) → \(notification.state)")
        }
        try context.outputJSON(applied)
    }

    static func applyNotifications(
        device name: String, in deployment: DeploymentDirectory, client: PayServerClient
    ) async throws -> [TokenNotification] {
        try await NotificationSync.run(
            client: client,
            apply: { reference, change in
                do {
                    _ = try await send(
                        ApplyTokenStatus(tokenReference: reference, state: change.rawValue), to: name, in: deployment)
                } catch let error as CLIError where error.message.hasPrefix("notFound") {
                    // Not a card of this device (removed meanwhile): nothing to apply.
                }
            },
            lostMode: { lost in _ = try await send(ApplyLostMode(lostMode: lost), to: name, in: deployment) })
    }

    struct AddedCard: Encodable {
        let device: String
        let cardID: String
        let tokenReference: String
        let network: String
        let type: String
        let suffix: String
        let description: String
        let deviceAccountSuffix: String
    }
}

/// A device's connection to the Pay server for one command: the services found or started
/// (`ServiceConnections`), and a client with the device's identity trusting only the Orchard root.
struct PaySession {
    let client: PayServerClient
    /// The root the token service's provisioning certificate must chain to: the deployment's, or the network
    /// party's imported one (a Pay side deployed on its own).
    let root: Certificate
    let connections: ServiceConnections

    static func open(
        device name: String, in deployment: DeploymentDirectory, context: CommandContext
    ) async throws
        -> PaySession
    {
        let connections = try await DeploymentCommands.connect([.network, .pay], of: deployment, context: context)
        do {
            return PaySession(
                client: try client(device: name, in: deployment, connections: connections),
                root: try Certificate(
                    pemEncoded: try deployment.rootCertificate(ofParty: DeploymentParty.network.rawValue)),
                connections: connections)
        } catch {
            await connections.close()
            throw error
        }
    }

    func close() async { await connections.close() }

    /// A client of the connected Pay server with device `name`'s identity, trusting only the Orchard root; it fails
    /// over to the Pay server's further running instances (`serve pay --instance N`).
    static func client(
        device name: String, in deployment: DeploymentDirectory, connections: ServiceConnections
    ) throws -> PayServerClient {
        try PayServerClient(
            baseURLs: try connections.baseURLs(of: .pay, in: deployment),
            trustedRootPEM: try connections.rootCertificatePEM(for: .pay),
            identity: try Device.clientIdentity(of: name, in: deployment))
    }

    /// Runs `body` with a session, closed afterwards whatever happens.
    static func with<T>(
        device name: String, in deployment: DeploymentDirectory, context: CommandContext,
        _ body: (PaySession) async throws -> T
    ) async throws -> T {
        let session = try await open(device: name, in: deployment, context: context)
        do {
            let result = try await body(session)
            await session.close()
            return result
        } catch {
            await session.close()
            throw error
        }
    }
}
