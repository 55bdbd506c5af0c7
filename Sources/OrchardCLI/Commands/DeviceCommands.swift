import AppPayments
import CardBasics
import Device
import DeviceControlAPI
import DeviceProcess
import Foundation
import NFCLink
import OrchardCrypto
import OrchardRuntime
import OrchardX509
import PayClient
import SecureElement
import Wallet

/// `orchard device ...`: the user devices of a deployment (phones, iPads, watches, Macs) with their Secure
/// Element, Secure Enclave and wallet.
enum DeviceCommands {
    static let command = Command(
        name: "device",
        summary: "Create and inspect user devices (Secure Element, Secure Enclave, wallet).",
        subcommands: [
            create, list, run, status, cards, choose, setDefault, autoSelect, authenticate, lock, unlock, wrist,
            doubleClick, field, apdu, passcode, reset, settings, addCard, lostMode, erase, resume, sync,
            DeviceSheetCommands.command,
        ]
    )

    static let nameOption = OptionSpec.single("name", "NAME", help: "The device name (lowercase letters, digits, '-').")

    static let create = Command(
        name: "create",
        summary: "Play the factory: make a device's paired Secure Element and Secure Enclave keys, its certificate "
            + "and storage key.",
        discussion: """
            Writes DIR/device-NAME.sqlite, DIR/devices/NAME/storage.key (0600) and DIR/devices/NAME/device.pem (the
            Secure Element key certified by the deployment's device CA, pki/device-ca, made if missing). With
            --passcode the device's passcode is set, as a user does when setting up a device.
            """,
        options: [
            nameOption,
            .single("kind", "phone|ipad|watch|mac", help: "The kind of device."),
            .single("biometry", "face|touch|none", help: "Its biometric sensor (a watch has none)."),
            .single("account", "NAME", help: "The account it belongs to (default: demo, the account `init` makes)."),
            .single("passcode", "CODE", help: "Set this passcode (4 to 64 characters)."),
        ]
    ) { arguments, context in
        let name = try arguments.require("name")
        guard let kind = DeviceKind(rawValue: try arguments.require("kind")) else {
            throw CLIError.usage("--kind is phone, ipad, watch or mac")
        }
        guard let biometry = Biometry(rawValue: try arguments.require("biometry")) else {
            throw CLIError.usage("--biometry is face, touch or none")
        }
        let profile: DeviceProfile
        do throws(SecureElementError) {
            profile = try DeviceProfile(
                kind: kind, biometry: biometry, account: arguments.value("account") ?? "demo")
        } catch {
            throw CLIError.usage(error.message)
        }
        let deployment = DeploymentDirectory(path: context.dataDirectory.path)
        let identity = try Device.create(in: deployment, name: name, profile: profile)
        if let passcode = arguments.value("passcode") {
            let device = try await Device.open(in: deployment, name: name)
            try await device.secureEnclave.setPasscode(SecureBytes(Array(passcode.utf8)), current: nil)
        }
        context.trace("created \(profile) as \(name) in \(deployment.path)")
        try context.outputJSON(
            DeviceSummary(identity, deployment: deployment, passcode: arguments.value("passcode") != nil))
    }

    static let list = Command(
        name: "list",
        summary: "List the devices of the deployment."
    ) { _, context in
        let deployment = DeploymentDirectory(path: context.dataDirectory.path)
        let summaries = try Device.names(in: deployment).map { name in
            DeviceSummary(try Device.identity(of: name, in: deployment), deployment: deployment, passcode: nil)
        }
        try context.outputJSON(summaries)
    }

    static let cards = Command(
        name: "cards",
        summary: "List a device's cards: display data only (network, type, suffixes, state, default).",
        options: [nameOption]
    ) { arguments, context in
        let deployment = DeploymentDirectory(path: context.dataDirectory.path)
        let name = try arguments.require("name")
        if ControlSocketClient.isRunning(at: Device.controlSocketPath(of: name, in: deployment)) {
            try await control(ListCards(), arguments, context)
            return
        }
        let cards = try Device.walletCards(of: name, in: deployment)
        try context.outputJSON(cards.map(CardSummary.init))
    }

    // MARK: The device process and its control API

    static let run = Command(
        name: "run",
        summary: "Run the device process: its control API as HTTP/1.1 JSON on DIR/devices/NAME/control.sock.",
        discussion: """
            Runs until SIGTERM or SIGINT. While it runs, the other `orchard device` commands (and any HTTP client
            on the socket, e.g. `curl --unix-socket DIR/devices/NAME/control.sock http://device/status`) drive it;
            without it they act on the device's store directly, with no state kept between commands (an
            authorization, a field, an unlocked device last one command). The routes are in docs/device.md.
            A phone or a watch also opens its NFC antenna (DIR/devices/NAME/nfc.sock) for terminals; in a
            field the user authenticates through the control API, or at once with --auto-auth (docs/terminal.md).
            Apps on the device (`orchard app buy --device NAME`) present their payment sheet here: the user drives
            it with `orchard device sheet ...`, or --auto-auth approves it (the proposed card, the wallet's recent
            contact or a demo contact, the first shipping method); the device reaches the Pay server for it
            (docs/in-app.md).
            """,
        options: [
            nameOption,
            .single(
                "auto-auth", "STEPS",
                help: "In a field or on a payment sheet, authenticate at once: face-id, touch-id, passcode:CODE, "
                    + "double-click, or a list."),
            .single(
                "sheet-timeout", "SECONDS", help: "Cancel a payment sheet not completed in this time (default 120)."),
            .single(
                "sync-interval", "SECONDS",
                help: "Apply the Pay server's token-status notifications this often (default 5; 0: never)."),
        ]
    ) { arguments, context in
        let deployment = DeploymentDirectory(path: context.dataDirectory.path)
        let name = try arguments.require("name")
        var automatic: AutoAuthentication?
        if let text = arguments.value("auto-auth") {
            do {
                automatic = try AutoAuthentication(parsing: text)
            } catch let error as DeviceError {
                throw CLIError.usage(error.message)
            }
        }
        let device = try await Device.open(in: deployment, name: name)
        let path = Device.controlSocketPath(of: name, in: deployment)
        let antenna = try NFCFieldSession.startAntenna(
            device: device, deployment: deployment, autoAuthentication: automatic,
            events: { event in if let line = try? nfcEventLine(event) { context.output(line) } })
        let sheetTimeout = Int(arguments.value("sheet-timeout") ?? "120") ?? -1
        guard (1...3600).contains(sheetTimeout) else {
            antenna?.stop()
            throw CLIError.usage("--sheet-timeout is 1 to 3600 seconds")
        }
        let sheets = PaymentSheetService(
            device: device, automatic: automatic, timeout: .seconds(sheetTimeout),
            connect: { try await DeviceSheetCommands.payServer(device: name, in: deployment, context: context) },
            events: { event in if let line = try? jsonLine(event) { context.output(line) } },
            trace: { context.trace($0) })
        let server: ControlSocketServer
        do {
            server = try ControlSocketServer(path: path, control: DeviceControl(device: device, sheets: sheets))
        } catch {
            antenna?.stop()
            throw error
        }
        let interval = Int(arguments.value("sync-interval") ?? "5") ?? -1
        guard (0...3600).contains(interval) else { throw CLIError.usage("--sync-interval is 0 to 3600 seconds") }
        let poller =
            interval > 0
            ? NotificationPoller(
                device: device, deployment: deployment, interval: .seconds(interval), trace: { context.trace($0) })
            : nil
        context.trace("device \(name) (\(device.profile)) listening on \(path)")
        context.output(#"{"event":"listening","socket":"\#(path)"}"#)
        if let antenna { context.output(#"{"event":"antenna","socket":"\#(antenna.path)"}"#) }
        let signal = await TerminationSignal.wait()
        context.trace("received \(signal == SIGTERM ? "SIGTERM" : "SIGINT"): stopping")
        poller?.stop()
        antenna?.stop()
        server.stop()
        context.output(#"{"event":"stopped"}"#)
    }

    static let status = Command(
        name: "status", summary: "The device's state: lock, methods offered, cards, contactless interface.",
        options: [nameOption]
    ) { arguments, context in
        try await control(GetDeviceStatus(), arguments, context)
    }

    static let cardOption = OptionSpec.single("card", "ID", help: "A card identifier (from `orchard device cards`).")

    static let choose = Command(
        name: "choose", summary: "Choose a card by hand for the next payment.", options: [nameOption, cardOption]
    ) { arguments, context in
        let card = try arguments.require("card")
        try await control(ChooseCard(card: card), arguments, context)
    }

    static let setDefault = Command(
        name: "set-default", summary: "Make a card the default card.", options: [nameOption, cardOption]
    ) { arguments, context in
        let card = try arguments.require("card")
        try await control(SetDefaultCard(card: card), arguments, context)
    }

    static let autoSelect = Command(
        name: "auto-select", summary: "Turn automatic selection on or off for a card.",
        options: [nameOption, cardOption, .single("enabled", "on|off", help: "on or off.")]
    ) { arguments, context in
        let card = try arguments.require("card")
        let enabled = try onOff(try arguments.require("enabled"), "--enabled")
        try await control(SetAutomaticSelection(card: card, enabled: enabled), arguments, context)
    }

    static let evidenceOptions: [OptionSpec] = [
        .single("method", "face-id|touch-id|passcode|double-click", help: "How the user authenticates."),
        .flag("fail", help: "The biometric does not match (default: it matches)."),
        .single("passcode", "CODE", help: "The passcode, for --method passcode."),
    ]

    static func evidence(_ arguments: ParsedArguments) throws -> AuthenticationEvidenceBody {
        AuthenticationEvidenceBody(
            method: try arguments.require("method"), success: !arguments.flag("fail"),
            passcode: arguments.value("passcode"))
    }

    static let authenticate = Command(
        name: "authenticate",
        summary: "Authenticate the user for a payment (a contactless authorization goes to the Secure Element).",
        options: [nameOption] + evidenceOptions + [
            .single("type", "contactless|in-app|web", help: "The transaction type (default contactless)."),
            .single("card", "ID", help: "The card (default: the one the wallet offers)."),
        ]
    ) { arguments, context in
        let request = Authenticate(
            try evidence(arguments), type: arguments.value("type"), card: arguments.value("card"))
        try await control(request, arguments, context)
    }

    static let lock = Command(name: "lock", summary: "Lock the device.", options: [nameOption]) {
        arguments, context in
        try await control(Lock(), arguments, context)
    }

    static let unlock = Command(
        name: "unlock", summary: "Unlock the device (a watch: with the passcode, on the wrist).",
        options: [nameOption] + evidenceOptions
    ) { arguments, context in
        try await control(Unlock(try evidence(arguments)), arguments, context)
    }

    static let wrist = Command(
        name: "wrist", summary: "Put a watch on the wrist or take it off.",
        options: [nameOption, .single("on", "yes|no", help: "yes: put on; no: take off.")]
    ) { arguments, context in
        let on = try onOff(try arguments.require("on"), "--on")
        try await control(SetWrist(on: on), arguments, context)
    }

    static let doubleClick = Command(
        name: "double-click",
        summary: "Double-click the side button: a watch authorizes its default card, a phone presents it.",
        options: [nameOption]
    ) { arguments, context in
        try await control(DoubleClick(), arguments, context)
    }

    static let field = Command(
        name: "field", summary: "A terminal's NFC field comes on or goes off.",
        options: [
            nameOption, .repeatable("network", "NAME", help: "A network the terminal asks for (field on)."),
        ],
        positionals: ["on|off"]
    ) { arguments, context in
        switch arguments.positionals.first {
        case "on":
            try await control(FieldOn(networks: arguments.values("network")), arguments, context)
        case "off":
            try await control(FieldOff(), arguments, context)
        default:
            throw CLIError.usage("say `field on` or `field off`")
        }
    }

    static let apdu = Command(
        name: "apdu", summary: "Send one command APDU (hex) from the terminal in the field; prints the answer.",
        options: [nameOption], positionals: ["HEX"]
    ) { arguments, context in
        guard let command = arguments.positionals.first else { throw CLIError.usage("missing the APDU in hex") }
        try await control(SendAPDU(command: command), arguments, context)
    }

    static let passcode = Command(
        name: "passcode", summary: "Set, change or remove the passcode (removing it terminates every card).",
        options: [
            nameOption, .single("set", "CODE", help: "The new passcode."),
            .single("current", "CODE", help: "The current passcode."),
            .flag("remove", help: "Turn the passcode off."),
        ]
    ) { arguments, context in
        if arguments.flag("remove") {
            let current = try arguments.require("current")
            try await control(RemovePasscode(current: current), arguments, context)
            return
        }
        let request = SetPasscode(passcode: try arguments.require("set"), current: arguments.value("current"))
        try await control(request, arguments, context)
    }

    static let reset = Command(
        name: "reset",
        summary: "Discard the Authorization Random: every card is terminated.",
        options: [
            nameOption,
            .single(
                "reason", "REASON", help: "sign-out, erase, recovery-restore, watch-unpaired or passcode-disabled."),
        ]
    ) { arguments, context in
        let reason = try arguments.require("reason")
        try await control(ResetAuthorizationRandom(reason: reason), arguments, context)
    }

    static let settings = Command(
        name: "settings", summary: "Show or change the wallet's settings.",
        options: [
            nameOption,
            .single("website-queries", "on|off", help: "Let websites check for Apple Pay (privacy switch)."),
            .single("double-click", "on|off", help: "A double-click presents the default card."),
            .single("biometrics", "on|off", help: "Biometrics for payments (off: the passcode only)."),
        ]
    ) { arguments, context in
        var change = DeviceSettingsBody()
        if let value = arguments.value("website-queries") {
            change.allowWebsiteQueries = try onOff(value, "--website-queries")
        }
        if let value = arguments.value("double-click") {
            change.doubleClickPresentsCards = try onOff(value, "--double-click")
        }
        if let value = arguments.value("biometrics") {
            change.biometricsForPayments = try onOff(value, "--biometrics")
        }
        if change == DeviceSettingsBody() {
            try await control(GetSettings(), arguments, context)
        } else {
            try await control(UpdateSettings(change), arguments, context)
        }
    }

    // MARK: Helpers

    /// Sends `request` to the running device process, or, when none runs, handles it in this process on
    /// the device's store. Prints the answer; a refusal becomes `error: <code>: <message>`.
    static func control(
        _ request: some DeviceControlRequest, _ arguments: ParsedArguments, _ context: CommandContext
    ) async throws {
        let deployment = DeploymentDirectory(path: context.dataDirectory.path)
        try output(try await send(request, to: try arguments.require("name"), in: deployment), context)
    }

    /// Prints a typed answer as the device wrote it (dates in ISO 8601), pretty-printed with sorted keys.
    static func output(_ answer: some Encodable, _ context: CommandContext) throws {
        let encoder = DeviceControlJSON.encoder()
        encoder.outputFormatting.insert(.prettyPrinted)
        context.output(String(decoding: try encoder.encode(answer), as: UTF8.self))
    }

    /// Sends `request` to the running device process of `name`, or handles it on the device's store in this
    /// process when none runs; returns the answer, or throws the device's refusal.
    static func send<Request: DeviceControlRequest>(
        _ request: Request, to name: String, in deployment: DeploymentDirectory
    ) async throws -> Request.Answer {
        let socket = Device.controlSocketPath(of: name, in: deployment)
        var result = await ControlSocketClient.send(request, to: socket)
        // (A Result rather than a typed do/catch: the latter crashes the Swift 6.3 compiler in async code.)
        if case .failure(let error) = result, error.code == .notRunning {
            let device = try await Device.open(in: deployment, name: name)
            result = await DeviceControl(device: device).send(request)
        }
        return try answer(result)
    }

    /// The answer, or the device's refusal as `<code>: <message>`.
    static func answer<Answer>(_ result: Result<Answer, DeviceProcessError>) throws -> Answer {
        switch result {
        case .success(let answer): return answer
        case .failure(let error) where error.code == .refused: throw CLIError.failure(error.message)
        case .failure(let error): throw error
        }
    }

    /// One line of JSON for what the device did in a field.
    static func nfcEventLine(_ event: NFCFieldEvent) throws -> String { try jsonLine(event) }

    /// One line of JSON for the device process's output.
    static func jsonLine(_ event: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(event), as: UTF8.self)
    }

    static func onOff(_ value: String, _ option: String) throws -> Bool {
        switch value {
        case "on", "yes", "true": return true
        case "off", "no", "false": return false
        default: throw CLIError.usage("\(option) is on or off")
        }
    }
}

/// A device as the commands print it.
struct DeviceSummary: Encodable {
    let name: String
    let kind: String
    let biometry: String
    let account: String
    /// ISO 8601.
    let createdAt: String
    let certificateSubject: String
    let certificateIssuer: String
    let store: String
    let passcodeSet: Bool?

    init(_ identity: DeviceIdentity, deployment: DeploymentDirectory, passcode: Bool?) {
        name = identity.name
        kind = identity.profile.kind.rawValue
        biometry = identity.profile.biometry.rawValue
        account = identity.profile.account
        createdAt = ISO8601DateFormatter().string(from: identity.createdAt)
        certificateSubject = identity.certificate.subject.description
        certificateIssuer = identity.certificate.issuer.description
        store = (try? Device.databasePath(of: identity.name, in: deployment)) ?? ""
        passcodeSet = passcode
    }
}

/// A wallet card as the commands print it.
struct CardSummary: Encodable {
    let id: String
    let displayName: String
    let network: String
    let type: String
    let suffix: String
    let deviceAccountSuffix: String
    let state: String
    let automaticSelection: Bool

    init(_ card: WalletCard) {
        id = card.id
        displayName = card.displayName
        network = card.network
        type = card.type.rawValue
        suffix = card.suffix
        deviceAccountSuffix = card.deviceAccountSuffix
        state = card.state.rawValue
        automaticSelection = card.automaticSelection
    }
}

/// `orchard device sheet ...`: the user at the payment sheet an app presented on a running device process
/// (`/payment-sheets/current` of its control API, docs/in-app.md). Each prints the sheet as JSON.
enum DeviceSheetCommands {
    static let command = Command(
        name: "sheet",
        summary: "Look at and act on the payment sheet an app presented on the running device process.",
        subcommands: [show, chooseCard, contact, shipping, authenticate, cancel]
    )

    static let nameOption = DeviceCommands.nameOption

    static let show = Command(
        name: "show",
        summary: "What the sheet shows: merchant, items and total, eligible cards, shipping, what it waits for.",
        options: [nameOption]
    ) { arguments, context in
        try await sheet(GetPaymentSheet(), arguments, context)
    }

    static let chooseCard = Command(
        name: "choose-card", summary: "Pay with another eligible card.",
        options: [nameOption, .single("card", "ID", help: "A card identifier among the sheet's cards.")]
    ) { arguments, context in
        let card = try arguments.require("card")
        try await sheet(ChoosePaymentSheetCard(card: card), arguments, context)
    }

    static let contact = Command(
        name: "contact",
        summary: "Give the shipping and/or billing contact (by default every contact the request asks for).",
        options: [
            nameOption,
            .single("role", "shipping|billing", help: "Only this contact (default: each one the sheet needs)."),
            .single("contact-name", "NAME", help: "The person's name."),
            .single("email", "ADDRESS", help: "Email address."),
            .single("phone", "NUMBER", help: "Phone number."),
            .single("street", "STREET", help: "Street address."),
            .single("city", "CITY", help: "City."),
            .single("state", "STATE", help: "State or region."),
            .single("postal-code", "CODE", help: "Postal code."),
            .single("country", "CC", help: "ISO 3166 alpha-2 country code."),
        ]
    ) { arguments, context in
        var contact = PaymentContact(
            name: arguments.value("contact-name"), emailAddress: arguments.value("email"),
            phoneNumber: arguments.value("phone"))
        let address = ["street", "city", "state", "postal-code", "country"].compactMap { arguments.value($0) }
        if !address.isEmpty {
            guard address.count == 5 else {
                throw CLIError.usage("an address needs --street, --city, --state, --postal-code and --country")
            }
            contact.postalAddress = PostalAddress(
                street: address[0], city: address[1], state: address[2], postalCode: address[3], country: address[4])
        }
        guard contact != PaymentContact() else { throw CLIError.usage("give at least one contact field") }
        var roles: [GivePaymentSheetContact.Role]
        switch arguments.value("role") {
        case "shipping"?: roles = [.shipping]
        case "billing"?: roles = [.billing]
        case nil:
            let needs = try await send(GetPaymentSheet(), arguments, context).sheet?.needs ?? []
            roles = needs.compactMap {
                $0.hasSuffix("Contact")
                    ? GivePaymentSheetContact.Role(rawValue: String($0.dropLast("Contact".count))) : nil
            }
            if roles.isEmpty { throw CLIError.failure("the sheet needs no contact now: say --role shipping|billing") }
        default: throw CLIError.usage("--role is shipping or billing")
        }
        var last: PaymentSheetActionAnswer?
        for role in roles {
            last = try await send(GivePaymentSheetContact(role: role, contact: contact), arguments, context)
        }
        if let last { try DeviceCommands.output(last, context) }
    }

    static let shipping = Command(
        name: "shipping", summary: "Choose a shipping method.",
        options: [nameOption, .single("method", "ID", help: "The shipping method's identifier.")]
    ) { arguments, context in
        let method = try arguments.require("method")
        try await sheet(ChoosePaymentSheetShippingMethod(identifier: method), arguments, context)
    }

    static let authenticate = Command(
        name: "authenticate",
        summary: "Authenticate for the sheet's card and total; on success the device pays and the app is told.",
        options: [nameOption] + DeviceCommands.evidenceOptions
    ) { arguments, context in
        try await sheet(AuthenticatePaymentSheet(try DeviceCommands.evidence(arguments)), arguments, context)
    }

    static let cancel = Command(
        name: "cancel", summary: "Dismiss the sheet: the app's payment is cancelled.", options: [nameOption]
    ) { arguments, context in
        try await sheet(CancelPaymentSheet(), arguments, context)
    }

    // MARK: Helpers

    /// Sends `request` to the running device process and prints its answer.
    static func sheet(
        _ request: some DeviceControlRequest, _ arguments: ParsedArguments, _ context: CommandContext
    ) async throws {
        try DeviceCommands.output(try await send(request, arguments, context), context)
    }

    /// The answer; a refusal becomes `error: <code>: <message>`. The sheet lives only in a running device process,
    /// so there is nothing to do without one.
    static func send<Request: DeviceControlRequest>(
        _ request: Request, _ arguments: ParsedArguments, _ context: CommandContext
    ) async throws -> Request.Answer {
        let deployment = DeploymentDirectory(path: context.dataDirectory.path)
        let name = try arguments.require("name")
        let socket = Device.controlSocketPath(of: name, in: deployment)
        // An authentication returns once the device paid and the app gave its verdict (bounded by the device).
        let result = await ControlSocketClient.send(request, to: socket, timeoutSeconds: 90)
        if case .failure(let error) = result, error.code == .notRunning {
            throw CLIError.failure(
                "the device process of \(name) is not running: payment sheets live there (orchard device run)")
        }
        return try DeviceCommands.answer(result)
    }

    /// The device's connection to the Pay server for one sheet: the services running for DIR, else started in
    /// the device process for the sheet's duration.
    static func payServer(
        device name: String, in deployment: DeploymentDirectory, context: CommandContext
    ) async throws -> PaymentSheetService.PayServerConnection {
        let session = try await PaySession.open(device: name, in: deployment, context: context)
        return PaymentSheetService.PayServerConnection(
            client: session.client, root: session.root, close: { await session.close() })
    }
}
