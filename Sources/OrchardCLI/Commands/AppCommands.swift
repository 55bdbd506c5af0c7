import AppPayments
import DemoApp
import Device
import DeviceControlAPI
import DeviceProcess
import Foundation
import MerchantAPI
import MerchantServer
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import OrchardX509
import PayClient
import PayServer
import PaymentToken
import SecureElement
import Wallet

/// `orchard app buy`: the demo app (``DemoApp``) buys from the demo merchant with Apple Pay (ARCHITECTURE §2, In an
/// app): order at the merchant's server, payment request, the device's payment sheet, token, charge.
enum AppCommands {
    static let command = Command(
        name: "app",
        summary: "Act as an app on a device: buy from the demo merchant with an in-app payment.",
        subcommands: [buy]
    )

    static let buy = Command(
        name: "buy",
        summary: "Buy an item in an app: order at the merchant, payment sheet, token, charge.",
        discussion: """
            Uses the services running for DIR (network, pay, merchant) and starts the missing ones for the command. The
            app is the demo app (dev.orchard.demo-app) unless --app; the device is --device, else the deployment's
            default device (demo-phone, else the first device that can pay in an app and holds an active card, else
            the first that can pay); with no device at all, a phone demo-phone is made and the issuer's approve test
            card provisioned to it (the trace says so). The sheet
            accepts what it proposes and authenticates with the device's own method (a watch: its double-click, after
            its passcode, read from --passcode-file FILE, $ORCHARD_PASSCODE or stdin, puts it on the wrist unlocked).
            When the device's process runs (`orchard device run`), the sheet is presented there, over its control
            socket: it waits for the user (`orchard device sheet ...`) unless that process was started with --auto-auth.
            With --application-data the app sends its own applicationData (base64, 1 byte to 64 KiB) with the order: the
            merchant keeps it, the payment request carries it, the token's header carries its SHA-256, and the merchant
            charges only a token that does (without it, the merchant makes the order's own, {"orderID":"…"}).
            --tamper-application-data is a demonstration of a refusal: the payment request carries those bytes instead
            of the order's, so the merchant refuses the token (orderMismatch), charges nothing, and the command fails.
            With --out DIR2: token.json (the PKPaymentToken as the merchant received it), merchant.pem and merchant.key
            (the processing certificate and its key) and root.pem (the root of the token-signing chain), for any
            Apple-format verifier.
            """,
        options: [
            merchantOption, itemOption, amountOption, currencyOption, appOption, deviceOption, passcodeFileOption,
            refusedPasscodeOption,
            applicationDataOption, tamperedApplicationDataOption, outOption,
        ]
    ) { arguments, context in
        try await AppBuy.run(arguments, context)
    }

    static let merchantOption = Option.optional(
        "merchant", "ID", help: "The merchant ID (default: the deployment's demo merchant).")
    static let itemOption = Option.required("item", "NAME", help: "What is bought.")
    static let amountOption = Option.required("amount", "DECIMAL", help: "The price, e.g. 9.99.")
    static let currencyOption = Option.text("currency", "CODE", default: "USD", help: "ISO 4217 code.")
    static let appOption = Option.text("app", "ID", default: DemoApp.identifier, help: "The app identifier.")
    static let deviceOption = Option.optional("device", "NAME", help: "The device the app runs on.")
    static let passcodeFileOption = Option.optional(
        "passcode-file", "FILE",
        help: "A watch's passcode, to put it on the wrist unlocked: read from FILE (mode 0600 or stricter, one line; "
            + "`-`: stdin), else from $ORCHARD_PASSCODE, else (a watch whose process is not running) from stdin.")
    static let refusedPasscodeOption = SecretInput.passcode.refusedOption("passcode")
    static let applicationDataOption = Option.optional(
        "application-data", "BASE64",
        help: "The app's applicationData for the order (base64); the payment is bound to it.")
    static let tamperedApplicationDataOption: Option<Data?> = .optional(
        "tamper-application-data", "BASE64",
        help: "Demonstrates a refusal: the payment request carries these bytes, not the order's."
    ) { text throws(CLIError) in
        guard let bytes = StrictEncoding.base64Decode(text) else {
            throw CLIError.usage("--tamper-application-data is canonical base64")
        }
        return Data(bytes)
    }
    static let outOption = Option.optional(
        "out", "DIR2", help: "Write token.json, merchant.pem, merchant.key and root.pem there.")
}

/// The wiring of `orchard app buy` and of the demo's in-app payment: the services and the device the demo app
/// (``DemoApp``) buys with, and what is printed or written.
enum AppBuy {
    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws {
        let deployment = DeploymentDirectory(path: context.dataDirectory.path)
        guard (try? deployment.state()) == .deployment else {
            throw CLIError.failure("\(deployment.path) is not a deployment: run `orchard init --data-dir DIR` first")
        }
        // --application-data goes to the merchant as given: the merchant says what is wrong with it.
        let order = MerchantAPI.CreateOrder(
            item: arguments[AppCommands.itemOption], amount: arguments[AppCommands.amountOption],
            currency: arguments[AppCommands.currencyOption],
            applicationDataBase64: arguments[AppCommands.applicationDataOption])
        let application = arguments[AppCommands.appOption]
        let tampered = arguments[AppCommands.tamperedApplicationDataOption]
        let merchant = arguments[AppCommands.merchantOption]
        let out = arguments[AppCommands.outOption]
        let connections = try await DeploymentCommands.connect(
            [.network, .pay, .merchant], of: deployment, context: context)
        do {
            let result: DemoApp.Purchase
            switch try await payingDevice(
                deployment: deployment, connections: connections, name: arguments[AppCommands.deviceOption],
                passcode: { required throws(CLIError) in
                    let file = arguments[AppCommands.passcodeFileOption]
                    let prompt = "passcode of the watch: "
                    return required
                        ? try SecretInput.passcode.read(file: file, context, prompt: prompt)
                        : try SecretInput.passcode.readIfGiven(file: file, context, prompt: prompt)
                }, trace: { context.trace($0) })
            {
            case .inProcess(let device):
                result = try await buy(
                    deployment: deployment, connections: connections, order: order, application: application,
                    device: device, tamperedApplicationData: tampered, merchant: merchant, out: out,
                    trace: { context.trace($0) })
            case .running(let name):
                let socket = Device.controlSocketPath(of: name, in: deployment)
                context.trace("app → device process of \(name): the payment sheet is presented over \(socket)")
                result = try await buy(
                    deployment: deployment, connections: connections, order: order, application: application,
                    host: ControlSocketSheetHost(socketPath: socket, deviceName: name, trace: { context.trace($0) }),
                    deviceName: name, tamperedApplicationData: tampered, merchant: merchant, out: out,
                    trace: { context.trace($0) })
            }
            await connections.close()
            try context.outputJSON(result)
        } catch {
            await connections.close()
            throw error
        }
    }

    /// Buys with the payment sheet of `device`, opened in this process.
    static func buy(
        deployment: DeploymentDirectory, connections: ServiceConnections, order: MerchantAPI.CreateOrder,
        application: String, device: Device, tamperedApplicationData: Data? = nil, merchant: String?, out: String?,
        trace: @escaping @Sendable (String) -> Void
    ) async throws -> DemoApp.Purchase {
        let sheet = DevicePaymentSheet(
            device: device,
            client: try PaySession.client(device: device.name, in: deployment, connections: connections),
            root: try Certificate(pemEncoded: connections.rootCertificatePEM),
            user: AcceptingSheetUser(contact: PaymentSheetService.demoContact), trace: trace)
        return try await buy(
            deployment: deployment, connections: connections, order: order, application: application, host: sheet,
            deviceName: device.name, tamperedApplicationData: tamperedApplicationData, merchant: merchant, out: out,
            trace: trace)
    }

    /// Buys with the payment sheet `host` shows (in this process, or in the device's running process); with `out`,
    /// writes the token the merchant received and what verifies it there, even when the merchant refused it.
    static func buy(
        deployment: DeploymentDirectory, connections: ServiceConnections, order: MerchantAPI.CreateOrder,
        application: String, host: any PaymentSheetHost, deviceName: String, tamperedApplicationData: Data? = nil,
        merchant: String?, out: String?, trace: @escaping @Sendable (String) -> Void
    ) async throws -> DemoApp.Purchase {
        let client = try connections.client()
        defer { client.shutdown() }
        let app = try DemoApp(
            client: client, merchantBaseURLs: try connections.baseURLs(of: .merchant, in: deployment),
            application: application,
            trace: trace)
        let purchase: DemoApp.Purchase
        let token: Data?
        do {
            (purchase, token) = try await app.buy(
                order, host: host, deviceName: deviceName, merchantIdentifier: merchant,
                tamperedApplicationData: tamperedApplicationData)
        } catch let failure as DemoApp.Failure {
            if let out, let token = failure.token {
                try writeArtifacts(token: token, deployment: deployment, to: out, trace: trace)
            }
            throw CLIError.failure(failure.message)
        }
        if let out, let token { try writeArtifacts(token: token, deployment: deployment, to: out, trace: trace) }
        return purchase
    }

    /// The device the app runs on: opened in this process, or, while its process runs, reached through it.
    enum PayingDevice {
        case inProcess(Device)
        case running(String)
    }

    /// `--device`, else demo-phone, else the first device that can pay in an app and holds an active card (else the
    /// first that can pay); with none, demo-phone is made and the approve test card provisioned to it. A device whose process runs is used through that process.
    static func payingDevice(
        deployment: DeploymentDirectory, connections: ServiceConnections, name: String?,
        passcode: (_ required: Bool) throws(CLIError) -> SecureBytes?, trace: @escaping @Sendable (String) -> Void
    ) async throws -> PayingDevice {
        let names = Device.names(in: deployment)
        var chosen = name
        if chosen == nil {
            if names.contains("demo-phone") {
                chosen = "demo-phone"
            } else {
                // try?: a device whose files cannot be read is not a candidate.
                let payers = names.filter {
                    (try? Device.identity(of: $0, in: deployment))?.profile.authorizesPayments == true
                }
                // One with an active card first: a device that can pay but holds no card cannot buy.
                // try?: a wallet that cannot be read counts as holding no card.
                chosen =
                    payers.first { name in
                        ((try? Device.walletCards(of: name, in: deployment)) ?? []).contains { $0.state == .active }
                    } ?? payers.first
            }
        }
        if let chosen {
            guard names.contains(chosen) else { throw CLIError.failure("no device \(chosen) in \(deployment.path)") }
            if ControlSocketClient.isRunning(at: Device.controlSocketPath(of: chosen, in: deployment)) {
                // Its Secure Element is in use there: the sheet is presented to that process.
                if (try? Device.identity(of: chosen, in: deployment))?.profile.kind == .watch,
                    let passcode = try passcode(false)
                {
                    _ = try? await DeviceCommands.send(SetWrist(on: true), to: chosen, in: deployment)
                    _ = try await DeviceCommands.send(
                        Unlock(AuthenticationEvidenceBody(method: "passcode", passcode: SecretInput.text(passcode))),
                        to: chosen, in: deployment)
                }
                return .running(chosen)
            }
            let device = try await Device.open(in: deployment, name: chosen)
            if device.profile.kind == .watch {
                guard let passcode = try passcode(true) else {
                    throw CLIError.usage("a watch pays once its passcode puts it on the wrist unlocked")
                }
                try? await device.secureEnclave.putOnWrist()
                _ = try await device.unlock(.passcode(passcode))
            }
            return .inProcess(device)
        }
        trace("no device in the deployment: making demo-phone and adding the issuer's approve test card")
        let (_, devices) = try await DemoProvisioning.run(
            deployment: deployment, connections: connections, trace: trace, only: ["demo-phone"])
        guard let device = devices["demo-phone"] else { throw CLIError.failure("demo-phone could not be made") }
        return .inProcess(device)
    }

    /// token.json, merchant.pem, merchant.key, root.pem.
    static func writeArtifacts(
        token: Data, deployment: DeploymentDirectory, to out: String, trace: @Sendable (String) -> Void
    ) throws {
        try SecureFile.createDirectory(out, mode: 0o700)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let pretty = try encoder.encode(EncodableJSON(try StrictJSONParser.parse(Array(token), limits: .paymentToken)))
        try SecureFile.write(Array(pretty), to: out + "/token.json", mode: 0o644)
        let certificate = try deployment.readCertificate(named: MerchantService.Files.processing)
        try SecureFile.write(Array(certificate.utf8), to: out + "/merchant.pem", mode: 0o644)
        try SecureFile.writeSecret(
            try deployment.readPrivateKey(named: MerchantService.Files.processing), to: out + "/merchant.key")
        let root = try deployment.readCertificate(named: PayService.Files.tokenRoot)
        try SecureFile.write(Array(root.utf8), to: out + "/root.pem", mode: 0o644)
        trace("wrote \(out)/token.json, merchant.pem, merchant.key (0600) and root.pem")
    }
}

/// A parsed JSON value re-encoded as it is (for pretty-printing a token the Pay server made).
private struct EncodableJSON: Encodable {
    let value: JSONValue
    init(_ value: JSONValue) { self.value = value }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch value {
        case .object(let members):
            try container.encode(Dictionary(members.map { ($0.0, EncodableJSON($0.1)) }, uniquingKeysWith: { $1 }))
        case .array(let items): try container.encode(items.map(EncodableJSON.init))
        case .string(let text): try container.encode(text)
        case .number(let text): try container.encode(Decimal(string: text) ?? 0)
        case .bool(let flag): try container.encode(flag)
        case .null: try container.encodeNil()
        }
    }
}
