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
            doubleClick, field, apdu, passcode, reset, settings, addCard, lostMode, erase, resume, sync, approve,
            move, nearby, handoff, DeviceSheetCommands.command,
        ]
    )

    static let nameOption = Option.required("name", "NAME", help: "The device name (lowercase letters, digits, '-').")
    static let kindOption: Option<DeviceKind> = .choice("kind", help: "The kind of device.")
    static let biometryOption: Option<Biometry> = .choice("biometry", help: "Its biometric sensor (a watch has none).")
    static let accountOption = Option.text(
        "account", "NAME", default: "demo", help: "The account it belongs to (the one `init` makes).")
    /// The passcode a command acts with: `--passcode-file FILE`, `ORCHARD_PASSCODE` or stdin (``SecretInput``).
    static let passcodeFileOption = SecretInput.passcode.fileOption
    /// `--passcode CODE`, refused: argv is visible to every user's `ps`.
    static let refusedPasscodeOption = SecretInput.passcode.refusedOption("passcode")
    static let createPasscodeFileOption = SecretInput.passcode.optionalFileOption(
        "Set a passcode (4 to 64 characters)")

    static let create = Command(
        name: "create",
        summary: "Play the factory: make a device's paired Secure Element and Secure Enclave keys, its certificate "
            + "and storage key.",
        discussion: """
            Writes DIR/device-NAME.sqlite, DIR/devices/NAME/storage.key (0600) and DIR/devices/NAME/device.pem (the
            Secure Element key certified by the deployment's device CA, pki/device-ca, made if missing). With
            --passcode-file FILE (`-`: one line on stdin) or $ORCHARD_PASSCODE the device's passcode is set, as a
            user does when setting up a device; --passcode CODE is refused (argv is visible to `ps`).
            Example: `echo 123456 | orchard device create --name phone --kind phone --biometry face --passcode-file -`.
            """,
        options: [
            nameOption, kindOption, biometryOption, accountOption, createPasscodeFileOption, refusedPasscodeOption,
        ]
    ) { arguments, context in
        let name = arguments[nameOption]
        let profile: DeviceProfile
        do throws(SecureElementError) {
            profile = try DeviceProfile(
                kind: arguments[kindOption], biometry: arguments[biometryOption], account: arguments[accountOption])
        } catch {
            throw CLIError.usage(error.message)
        }
        let deployment = DeploymentDirectory(path: context.dataDirectory.path)
        let passcode = try SecretInput.passcode.readIfGiven(
            file: arguments[createPasscodeFileOption], context, prompt: "passcode of \(name): ")
        let identity = try Device.create(in: deployment, name: name, profile: profile)
        if let passcode {
            let device = try await Device.open(in: deployment, name: name)
            try await device.secureEnclave.setPasscode(passcode, current: nil)
        }
        context.trace("created \(profile) as \(name) in \(deployment.path)")
        try context.outputJSON(
            DeviceSummary(identity, deployment: deployment, passcode: passcode != nil))
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
        let name = arguments[nameOption]
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
            (docs/in-app.md). Browsers on the device reach its browser agent at https://agent.orchard.test
            (`orchard browser setup`, docs/web.md).
            `--auto-auth passcode` reads the passcode once at start from --passcode-file FILE, $ORCHARD_PASSCODE
            or one line on stdin; `passcode:CODE` is refused (argv is visible to `ps`).
            """,
        options: [
            nameOption, autoAuthOption, passcodeFileOption, sheetTimeoutOption, syncIntervalOption, agentPortOption,
            handlerTimeoutOption, proximityWindowOption,
        ]
    ) { arguments, context in
        let deployment = DeploymentDirectory(path: context.dataDirectory.path)
        let name = arguments[nameOption]
        var configuration: DeviceProcessConfiguration
        var automatic: AutoAuthentication?
        if let steps = arguments[autoAuthOption] {
            let passcode =
                AutoAuthentication.needsPasscode(steps)
                ? try SecretInput.passcode.read(
                    file: arguments[passcodeFileOption], context, prompt: "passcode of \(name): ") : nil
            do throws(DeviceError) {
                automatic = try AutoAuthentication(parsing: steps, passcode: passcode)
            } catch {
                throw CLIError.usage(error.message)
            }
        }
        do throws(DeviceError) {
            configuration = try DeviceProcessConfiguration(
                deployment: deployment, name: name, autoAuthentication: automatic,
                sheetTimeout: arguments[sheetTimeoutOption], syncInterval: arguments[syncIntervalOption],
                proximityWindow: arguments[proximityWindowOption])
        } catch {
            throw CLIError.usage(error.message)
        }
        // The browser agent (docs/web.md): https://agent.orchard.test for browsers on this device. A deployment that
        // cannot give it a certificate or the token-signing root (a host with the device's folder alone) runs
        // without it.
        do {
            configuration.browserAgent = try BrowserCommands.agentConfiguration(
                deployment: deployment, port: arguments[agentPortOption],
                handlerTimeout: arguments[handlerTimeoutOption], context: context)
        } catch {
            context.trace("browser agent not started: \(error)")
        }
        try await DeviceProcessRunner.run(
            configuration: configuration,
            connect: { try await DeviceSheetCommands.payServer(device: name, in: deployment, context: context) },
            output: { context.output($0) }, trace: { context.trace($0) })
    }

    /// The steps as given, checked; a `passcode` step's passcode is read in the command's body.
    static let autoAuthOption: Option<String?> = .optional(
        "auto-auth", "STEPS",
        help: "In a field or on a payment sheet, authenticate at once: face-id, touch-id, passcode (read from "
            + "--passcode-file, $ORCHARD_PASSCODE or stdin), double-click, or a list."
    ) { text throws(CLIError) in
        if text.split(separator: ",").contains(where: { $0.hasPrefix("passcode:") }) {
            throw CLIError.usage(
                SecretInput.passcode.refusal(
                    "--auto-auth passcode:CODE",
                    hint: "say --auto-auth passcode and give the passcode in \(SecretInput.passcode.ways)"))
        }
        do throws(DeviceError) {
            // Only the steps' syntax is checked here, with a stand-in passcode.
            _ = try AutoAuthentication(parsing: text, passcode: SecureBytes([0]))
        } catch {
            throw CLIError.usage(error.message)
        }
        return text
    }
    static let agentPortOption = Option<Int>.integer(
        "agent-port", default: 0, range: 0...65535,
        help: "The browser agent's loopback port (0: a free port, written to DIR/devices/NAME/agent.json).")
    static let handlerTimeoutOption = Option<Duration>(
        "web-handler-timeout", default: .seconds(30), range: 1...3600,
        help: "A web page must complete each Apple Pay event in this time (WebKit's 30-second rule).")
    static let sheetTimeoutOption = Option<Duration>(
        "sheet-timeout", default: .seconds(120), range: 1...3600,
        help: "Cancel a payment sheet not completed in this time.")
    static let syncIntervalOption = Option<Duration>(
        "sync-interval", default: .seconds(5), range: 1...3600,
        help: "Apply the Pay server's token-status notifications this often.")

    static let proximityWindowOption = Option<Duration>(
        "proximity-window", default: .seconds(5), range: 1...3600,
        help: "A device heard on the radio medium is near for this long after its last advertisement.")

    static let move = Command(
        name: "move",
        summary: "Put the device in a room of the simulated radio medium (it hears the devices in the same room).",
        options: [nameOption, roomOption]
    ) { arguments, context in
        try await control(UpdateSettings(DeviceSettingsBody(room: arguments[roomOption])), arguments, context)
    }

    static let roomOption = Option.required(
        "room", "ROOM", help: "The room: 1 to 32 lowercase letters, digits and hyphens (a device starts in home).")

    static let nearby = Command(
        name: "nearby",
        summary: "Show the device's room and the devices of its account it hears (while its process runs).",
        options: [nameOption]
    ) { arguments, context in
        try await control(GetProximity(), arguments, context)
    }

    static let handoff = Command(
        name: "handoff",
        summary: "On a Mac: the phones and watches of its account near it and the cards they offer (Handoff).",
        options: [nameOption]
    ) { arguments, context in
        try await control(DiscoverHandoffDevices(), arguments, context)
    }

    static let status = Command(
        name: "status", summary: "The device's state: lock, methods offered, cards, contactless interface.",
        options: [nameOption]
    ) { arguments, context in
        try await control(GetDeviceStatus(), arguments, context)
    }

    static let cardOption = Option.required("card", "ID", help: "A card identifier (from `orchard device cards`).")

    static let choose = Command(
        name: "choose", summary: "Choose a card by hand for the next payment.", options: [nameOption, cardOption]
    ) { arguments, context in
        let card = arguments[cardOption]
        try await control(ChooseCard(card: card), arguments, context)
    }

    static let setDefault = Command(
        name: "set-default", summary: "Make a card the default card.", options: [nameOption, cardOption]
    ) { arguments, context in
        let card = arguments[cardOption]
        try await control(SetDefaultCard(card: card), arguments, context)
    }

    static let autoSelect = Command(
        name: "auto-select", summary: "Turn automatic selection on or off for a card.",
        options: [nameOption, cardOption, enabledOption]
    ) { arguments, context in
        try await control(
            SetAutomaticSelection(card: arguments[cardOption], enabled: arguments[enabledOption]), arguments, context)
    }

    static let enabledOption = Option.requiredOnOff("enabled", help: "on or off.")

    static let methodOption = Option.required(
        "method", "face-id|touch-id|passcode|double-click", help: "How the user authenticates.")
    static let failOption = Option.flag("fail", help: "The biometric does not match (default: it matches).")
    static let evidenceOptions: [any CommandOption] = [
        methodOption, failOption, passcodeFileOption, refusedPasscodeOption,
    ]

    /// The evidence of `--method`; for `passcode`, the passcode read from --passcode-file, `ORCHARD_PASSCODE` or
    /// stdin.
    static func evidence(
        _ arguments: ParsedArguments, _ context: CommandContext
    ) throws(CLIError) -> AuthenticationEvidenceBody {
        let method = arguments[methodOption]
        let passcode =
            method == "passcode"
            ? try SecretInput.passcode.read(
                file: arguments[passcodeFileOption], context, prompt: "passcode of \(arguments[nameOption]): ")
            : nil
        return AuthenticationEvidenceBody(
            method: method, success: !arguments[failOption], passcode: passcode.map(SecretInput.text))
    }

    static let typeOption = Option.optional(
        "type", "contactless|in-app|web", help: "The transaction type (default contactless).")
    static let authenticationCardOption = Option.optional(
        "card", "ID", help: "The card (default: the one the wallet offers).")

    static let authenticate = Command(
        name: "authenticate",
        summary: "Authenticate the user for a payment (a contactless authorization goes to the Secure Element).",
        options: [nameOption] + evidenceOptions + [typeOption, authenticationCardOption]
    ) { arguments, context in
        let request = Authenticate(
            try evidence(arguments, context), type: arguments[typeOption], card: arguments[authenticationCardOption])
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
        try await control(Unlock(try evidence(arguments, context)), arguments, context)
    }

    static let wrist = Command(
        name: "wrist", summary: "Put a watch on the wrist or take it off.",
        options: [nameOption, wristOnOption]
    ) { arguments, context in
        try await control(SetWrist(on: arguments[wristOnOption]), arguments, context)
    }

    static let wristOnOption = Option.requiredOnOff("on", "yes|no", help: "yes: put on; no: take off.")

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
            nameOption, networkOption,
        ],
        positionals: ["on|off"]
    ) { arguments, context in
        switch arguments.positionals.first {
        case "on":
            try await control(FieldOn(networks: arguments[networkOption]), arguments, context)
        case "off":
            try await control(FieldOff(), arguments, context)
        default:
            throw CLIError.usage("say `field on` or `field off`")
        }
    }

    static let networkOption = Option.repeatable(
        "network", "NAME", help: "A network the terminal asks for (field on).")

    static let apdu = Command(
        name: "apdu", summary: "Send one command APDU (hex) from the terminal in the field; prints the answer.",
        options: [nameOption], positionals: ["HEX"]
    ) { arguments, context in
        guard let command = arguments.positionals.first else { throw CLIError.usage("missing the APDU in hex") }
        try await control(SendAPDU(command: command), arguments, context)
    }

    static let passcode = Command(
        name: "passcode", summary: "Set, change or remove the passcode (removing it terminates every card).",
        discussion: """
            Without --change or --remove, sets the passcode of a device that has none: the new passcode from
            --new-passcode-file FILE, else $ORCHARD_NEW_PASSCODE, else one line on stdin. --change also reads the
            current passcode first (--passcode-file FILE, else $ORCHARD_PASSCODE, else stdin: so on stdin two lines,
            the current passcode, then the new one); --remove reads the current passcode only. Files are one line,
            mode 0600 or stricter. --set CODE and --current CODE are refused (argv is visible to `ps`).
            Example: `printf '123456\\n135790\\n' | orchard device passcode --name phone --change`.
            """,
        options: [
            nameOption, changePasscodeOption, removePasscodeOption, passcodeFileOption, newPasscodeFileOption,
            refusedSetPasscodeOption, refusedCurrentPasscodeOption,
        ]
    ) { arguments, context in
        let name = arguments[nameOption]
        let change = arguments[changePasscodeOption]
        let remove = arguments[removePasscodeOption]
        if change && remove { throw CLIError.usage("say --change or --remove, not both") }
        let current =
            change || remove
            ? try SecretInput.passcode.read(
                file: arguments[passcodeFileOption], context, prompt: "current passcode of \(name): ") : nil
        if remove, let current {
            try await control(RemovePasscode(current: SecretInput.text(current)), arguments, context)
            return
        }
        let new = try SecretInput.newPasscode.read(
            file: arguments[newPasscodeFileOption], context, prompt: "new passcode of \(name): ")
        try await control(
            SetPasscode(passcode: SecretInput.text(new), current: current.map(SecretInput.text)), arguments, context)
    }

    static let newPasscodeFileOption = SecretInput.newPasscode.fileOption
    static let changePasscodeOption = Option.flag(
        "change", help: "Change the passcode: the current one is read first, then the new one.")
    static let removePasscodeOption = Option.flag("remove", help: "Turn the passcode off (the current one is read).")
    static let refusedSetPasscodeOption = SecretInput.newPasscode.refusedOption("set")
    static let refusedCurrentPasscodeOption = SecretInput.passcode.refusedOption("current")

    static let reset = Command(
        name: "reset",
        summary: "Discard the Authorization Random: every card is terminated.",
        options: [nameOption, reasonOption]
    ) { arguments, context in
        try await control(ResetAuthorizationRandom(reason: arguments[reasonOption]), arguments, context)
    }

    static let reasonOption = Option.required(
        "reason", "REASON", help: "sign-out, erase, recovery-restore, watch-unpaired or passcode-disabled.")

    static let settings = Command(
        name: "settings", summary: "Show or change the wallet's settings.",
        options: [nameOption, websiteQueriesOption, doubleClickOption, biometricsOption, paymentsOnMacOption]
    ) { arguments, context in
        var change = DeviceSettingsBody()
        change.allowPaymentsOnMac = arguments[paymentsOnMacOption]
        change.allowWebsiteQueries = arguments[websiteQueriesOption]
        change.doubleClickPresentsCards = arguments[doubleClickOption]
        change.biometricsForPayments = arguments[biometricsOption]
        if change == DeviceSettingsBody() {
            try await control(GetSettings(), arguments, context)
        } else {
            try await control(UpdateSettings(change), arguments, context)
        }
    }

    static let websiteQueriesOption = Option.onOff(
        "website-queries", help: "Let websites check for Apple Pay (privacy switch).")
    static let doubleClickOption = Option.onOff("double-click", help: "A double-click presents the default card.")
    static let biometricsOption = Option.onOff("biometrics", help: "Biometrics for payments (off: the passcode only).")
    static let paymentsOnMacOption = Option.onOff(
        "allow-payments-on-mac", help: "A phone or watch offers its cards to the account's Macs near it (Handoff).")

    // MARK: Helpers

    /// Sends `request` to the running device process, or, when none runs, handles it in this process on
    /// the device's store. Prints the answer; a refusal becomes `error: <code>: <message>`.
    static func control(
        _ request: some DeviceControlRequest, _ arguments: ParsedArguments, _ context: CommandContext
    ) async throws {
        let deployment = DeploymentDirectory(path: context.dataDirectory.path)
        try output(try await send(request, to: arguments[nameOption], in: deployment), context)
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
        options: [nameOption, cardOption]
    ) { arguments, context in
        try await sheet(ChoosePaymentSheetCard(card: arguments[cardOption]), arguments, context)
    }

    static let cardOption = Option.required("card", "ID", help: "A card identifier among the sheet's cards.")

    static let contact = Command(
        name: "contact",
        summary: "Give the shipping and/or billing contact (by default every contact the request asks for).",
        options: [
            nameOption,
            roleOption, contactNameOption, emailOption, phoneOption, streetOption, cityOption, stateOption,
            postalCodeOption, countryOption,
        ]
    ) { arguments, context in
        var contact = PaymentContact(
            name: arguments[contactNameOption], emailAddress: arguments[emailOption],
            phoneNumber: arguments[phoneOption])
        let address = [streetOption, cityOption, stateOption, postalCodeOption, countryOption].compactMap {
            arguments[$0]
        }
        if !address.isEmpty {
            guard address.count == 5 else {
                throw CLIError.usage("an address needs --street, --city, --state, --postal-code and --country")
            }
            contact.postalAddress = PostalAddress(
                street: address[0], city: address[1], state: address[2], postalCode: address[3], country: address[4])
        }
        guard contact != PaymentContact() else { throw CLIError.usage("give at least one contact field") }
        var roles: [GivePaymentSheetContact.Role]
        if let role = arguments[roleOption] {
            roles = [role]
        } else {
            let needs = try await send(GetPaymentSheet(), arguments, context).sheet?.needs ?? []
            roles = needs.compactMap {
                $0.hasSuffix("Contact")
                    ? GivePaymentSheetContact.Role(rawValue: String($0.dropLast("Contact".count))) : nil
            }
            if roles.isEmpty { throw CLIError.failure("the sheet needs no contact now: say --role shipping|billing") }
        }
        var last: PaymentSheetActionAnswer?
        for role in roles {
            last = try await send(GivePaymentSheetContact(role: role, contact: contact), arguments, context)
        }
        if let last { try DeviceCommands.output(last, context) }
    }

    static let roleOption: Option<GivePaymentSheetContact.Role?> = .choice(
        "role", help: "Only this contact (default: each one the sheet needs).")
    static let contactNameOption = Option.optional("contact-name", "NAME", help: "The person's name.")
    static let emailOption = Option.optional("email", "ADDRESS", help: "Email address.")
    static let phoneOption = Option.optional("phone", "NUMBER", help: "Phone number.")
    static let streetOption = Option.optional("street", "STREET", help: "Street address.")
    static let cityOption = Option.optional("city", "CITY", help: "City.")
    static let stateOption = Option.optional("state", "STATE", help: "State or region.")
    static let postalCodeOption = Option.optional("postal-code", "CODE", help: "Postal code.")
    static let countryOption = Option.optional("country", "CC", help: "ISO 3166 alpha-2 country code.")

    static let shipping = Command(
        name: "shipping", summary: "Choose a shipping method.",
        options: [nameOption, shippingMethodOption]
    ) { arguments, context in
        try await sheet(
            ChoosePaymentSheetShippingMethod(identifier: arguments[shippingMethodOption]), arguments, context)
    }

    static let shippingMethodOption = Option.required("method", "ID", help: "The shipping method's identifier.")

    static let authenticate = Command(
        name: "authenticate",
        summary: "Authenticate for the sheet's card and total; on success the device pays and the app is told.",
        options: [nameOption] + DeviceCommands.evidenceOptions
    ) { arguments, context in
        try await sheet(
            AuthenticatePaymentSheet(try DeviceCommands.evidence(arguments, context)), arguments, context)
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
        let name = arguments[nameOption]
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
