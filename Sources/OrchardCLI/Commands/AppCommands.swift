import AppPayments
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

/// `orchard app buy`: an app buys from the demo merchant with Apple Pay (ARCHITECTURE §2, In an app). The app
/// asks the merchant's server for an order, builds a PaymentRequest from it, and presents the device's payment
/// sheet; the token goes to the merchant's server, which decrypts it and charges through the acquirer.
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
            Uses the services running for DIR (network, pay, merchant) and starts the missing ones for the
            command. The app is the demo app (dev.orchard.demo-app) unless --app; the device is --device, else the
            deployment's default device (demo-phone, else the first device that can pay in an app); with no device
            at all, a phone demo-phone is made and the issuer's approve test card provisioned to it (the trace says
            so). The sheet accepts what it proposes and authenticates with the device's own method (a watch: its
            double-click, after --passcode puts it on the wrist unlocked). When the device's process runs
            (`orchard device run`), the sheet is presented there, over its control socket: it waits for the user
            (`orchard device sheet ...`) unless that process was started with --auto-auth. With
            --application-data the app sends its own applicationData (base64, 1 byte to 64 KiB) with the order:
            the merchant keeps it, the payment request carries it, the token's header carries its SHA-256, and the
            merchant charges only a token that does (without it, the merchant makes the order's own,
            {"orderID":"…"}). --tamper-application-data is a demonstration of a refusal: the payment request
            carries those bytes instead of the order's, so the merchant refuses the token (orderMismatch), charges
            nothing, and the command fails. With --out DIR2: token.json (the PKPaymentToken as the merchant
            received it), merchant.pem and merchant.key (the processing certificate and its key) and root.pem (the
            root of the token-signing chain), for any Apple-format verifier.
            """,
        options: [
            .single("merchant", "ID", help: "The merchant ID (default: the deployment's demo merchant)."),
            .single("item", "NAME", help: "What is bought."),
            .single("amount", "DECIMAL", help: "The price, e.g. 9.99."),
            .single("currency", "CODE", help: "ISO 4217 code (default USD)."),
            .single("app", "ID", help: "The app identifier (default dev.orchard.demo-app)."),
            .single("device", "NAME", help: "The device the app runs on."),
            .single("passcode", "CODE", help: "A watch's passcode, to put it on the wrist unlocked."),
            .single(
                "application-data", "BASE64",
                help: "The app's applicationData for the order (base64); the payment is bound to it."),
            .single(
                "tamper-application-data", "BASE64",
                help: "Demonstrates a refusal: the payment request carries these bytes, not the order's."),
            .single("out", "DIR2", help: "Write token.json, merchant.pem, merchant.key and root.pem there."),
        ]
    ) { arguments, context in
        try await AppBuy.run(arguments, context)
    }
}

enum AppBuy {
    static let demoApp = "dev.orchard.demo-app"

    struct Result: Encodable {
        let orderID: String
        let merchantIdentifier: String
        let item: String
        let amount: String
        let device: String
        let card: String
        /// The order's applicationData (base64), whose SHA-256 the token's header carries.
        let applicationData: String
        let outcome: String
        let responseCode: String
        let reason: String?
        let transactionIdentifier: String?
    }

    static func run(_ arguments: ParsedArguments, _ context: CommandContext) async throws {
        let deployment = DeploymentDirectory(path: context.dataDirectory.path)
        guard (try? deployment.state()) == .deployment else {
            throw CLIError.failure("\(deployment.path) is not a deployment: run `orchard init --data-dir DIR` first")
        }
        let item = try arguments.require("item")
        let amount = try arguments.require("amount")
        let currency = arguments.value("currency") ?? "USD"
        let application = arguments.value("app") ?? demoApp
        // --application-data goes to the merchant as given: the merchant says what is wrong with it.
        var tampered: Data?
        if let text = arguments.value("tamper-application-data") {
            guard let bytes = StrictEncoding.base64Decode(text) else {
                throw CLIError.usage("--tamper-application-data is canonical base64")
            }
            tampered = Data(bytes)
        }
        let connections = try await DeploymentCommands.connect(
            [.network, .pay, .merchant], of: deployment, context: context)
        do {
            let order = MerchantAPI.CreateOrder(
                item: item, amount: amount, currency: currency,
                applicationDataBase64: arguments.value("application-data"))
            let result: Result
            switch try await payingDevice(
                deployment: deployment, connections: connections, name: arguments.value("device"),
                passcode: arguments.value("passcode"), trace: { context.trace($0) })
            {
            case .inProcess(let device):
                result = try await buy(
                    deployment: deployment, connections: connections, order: order, application: application,
                    device: device, tamperedApplicationData: tampered, merchant: arguments.value("merchant"),
                    out: arguments.value("out"), trace: { context.trace($0) })
            case .running(let name):
                let socket = Device.controlSocketPath(of: name, in: deployment)
                context.trace("app → device process of \(name): the payment sheet is presented over \(socket)")
                result = try await buy(
                    deployment: deployment, connections: connections, order: order, application: application,
                    host: ControlSocketSheetHost(socketPath: socket, deviceName: name, trace: { context.trace($0) }),
                    deviceName: name, tamperedApplicationData: tampered, merchant: arguments.value("merchant"),
                    out: arguments.value("out"), trace: { context.trace($0) })
            }
            await connections.close()
            try context.outputJSON(result)
        } catch {
            await connections.close()
            throw error
        }
    }

    /// A contact the user approved on the sheet, in the merchant's wire form (PassKit's nested form).
    static func contact(_ contact: PaymentContact?) -> MerchantAPI.Contact? {
        contact.map {
            MerchantAPI.Contact(
                name: $0.name.map(MerchantAPI.Contact.Name.init(full:)), emailAddress: $0.emailAddress,
                phoneNumber: $0.phoneNumber,
                postalAddress: $0.postalAddress.map {
                    MerchantAPI.Contact.PostalAddress(
                        street: $0.street, city: $0.city, state: $0.state, postalCode: $0.postalCode,
                        country: $0.country)
                })
        }
    }

    /// `the merchant refused <what> (<status> <code>): <message>`, from the merchant's error body.
    static func refusal(_ what: String, _ response: HTTPResponse) -> String {
        let status = response.status.code
        guard let body = try? JSONDecoder().decode(MerchantAPI.ErrorBody.self, from: response.body) else {
            return "the merchant refused \(what) (\(status)): "
                + String(decoding: response.body.prefix(300), as: UTF8.self)
        }
        return "the merchant refused \(what) (\(status) \(body.error.code)): \(body.error.message)"
    }

    /// The app's delegate: on authorization it sends the token to the merchant's server and reports its answer.
    final class CheckoutDelegate: PaymentAuthorizationControllerDelegate, @unchecked Sendable {
        let client: HTTPClient
        let paymentURL: String
        let trace: @Sendable (String) -> Void
        private let lock = NSLock()
        private var _answer: MerchantAPI.PaymentResult?
        private var _token: Data?
        private var _failure: String?
        var answer: MerchantAPI.PaymentResult? { lock.withLock { _answer } }
        var token: Data? { lock.withLock { _token } }
        var failure: String? { lock.withLock { _failure } }

        init(client: HTTPClient, paymentURL: String, trace: @escaping @Sendable (String) -> Void) {
            self.client = client
            self.paymentURL = paymentURL
            self.trace = trace
        }

        func didSelectShippingContact(_ contact: PaymentContact, request: PaymentRequest) async -> PaymentRequestUpdate
        {
            trace(
                "app: shipping region \(contact.postalAddress?.city ?? "?"), \(contact.postalAddress?.state ?? "?") "
                    + "\(contact.postalAddress?.postalCode ?? "?") \(contact.postalAddress?.country ?? "?") (redacted)")
            return PaymentRequestUpdate(paymentSummaryItems: request.paymentSummaryItems)
        }

        func didAuthorizePayment(_ payment: Payment) async -> PaymentAuthorizationResult {
            lock.withLock { _token = payment.token }
            do {
                let submission = MerchantAPI.PaymentSubmission(
                    token: payment.token, shippingContact: AppBuy.contact(payment.shippingContact),
                    billingContact: AppBuy.contact(payment.billingContact),
                    shippingMethod: payment.shippingMethod.map {
                        MerchantAPI.ShippingMethod(
                            identifier: $0.identifier, label: $0.label, detail: $0.detail, amount: $0.amount)
                    })
                let request = HTTPClientRequest(
                    method: .post, url: paymentURL, headers: ["Content-Type": "application/json"],
                    body: try submission.body())
                let response = try await client.send(request)
                guard response.status == .ok else {
                    let refusal = AppBuy.refusal("the payment", response)
                    lock.withLock { _failure = refusal }
                    return PaymentAuthorizationResult(status: .failure, errors: [refusal])
                }
                let answer = try JSONDecoder().decode(MerchantAPI.PaymentResult.self, from: response.body)
                lock.withLock { _answer = answer }
                return PaymentAuthorizationResult(status: answer.isApproved ? .success : .failure)
            } catch {
                lock.withLock { _failure = "the merchant cannot be reached: \(error)" }
                return PaymentAuthorizationResult(status: .failure, errors: ["\(error)"])
            }
        }
    }

    /// Buys with the payment sheet of `device`, opened in this process.
    static func buy(
        deployment: DeploymentDirectory, connections: ServiceConnections, order: MerchantAPI.CreateOrder,
        application: String, device: Device, tamperedApplicationData: Data? = nil, merchant: String?, out: String?,
        trace: @escaping @Sendable (String) -> Void
    ) async throws -> Result {
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

    /// Buys with the payment sheet `host` shows (in this process, or in the device's running process). The
    /// payment request carries the order's applicationData, or `tamperedApplicationData` to demonstrate the
    /// merchant's refusal of a token made for other data.
    static func buy(
        deployment: DeploymentDirectory, connections: ServiceConnections, order orderRequest: MerchantAPI.CreateOrder,
        application: String, host: any PaymentSheetHost, deviceName: String, tamperedApplicationData: Data? = nil,
        merchant: String?, out: String?, trace: @escaping @Sendable (String) -> Void
    ) async throws -> Result {
        let client = try connections.client()
        defer { client.shutdown() }
        let base = try connections.baseURL(of: .merchant)
        let created = try await client.send(
            try HTTPClientRequest.json(.post, base + MerchantAPI.Route.orders, orderRequest))
        guard created.status == .created else { throw CLIError.failure(refusal("the order", created)) }
        let order = try JSONDecoder().decode(MerchantAPI.OrderCreated.self, from: created.body)
        guard let orderData = StrictEncoding.base64Decode(order.applicationData) else {
            throw CLIError.failure("the merchant's order carries no base64 applicationData")
        }
        if tamperedApplicationData != nil {
            trace("app: DEMONSTRATION: the payment request carries other applicationData than the order's")
        }
        trace(
            "app → merchant server: order \(order.orderID) for \(orderRequest.item), \(order.total) \(order.currency)")
        let request = PaymentRequest(
            merchantIdentifier: merchant ?? order.merchantIdentifier, countryCode: order.countryCode,
            currencyCode: order.currency, supportedNetworks: order.supportedNetworks.map(PaymentNetwork.init),
            merchantCapabilities: MerchantCapabilities(names: order.merchantCapabilities),
            paymentSummaryItems: [
                PaymentSummaryItem(label: orderRequest.item, amount: order.total),
                PaymentSummaryItem(label: "Orchard Demo Store", amount: order.total),
            ],
            applicationData: tamperedApplicationData ?? Data(orderData),
            requiredBillingContactFields: [.name], requiredShippingContactFields: [.name, .postalAddress])
        let delegate = CheckoutDelegate(
            client: client, paymentURL: base + MerchantAPI.Route.payment(order.orderID), trace: trace)
        let controller = PaymentAuthorizationController(
            paymentRequest: request, host: host, applicationIdentifier: application)
        let outcome: PaymentSheetOutcome
        do {
            outcome = try await controller.present(delegate: delegate)
        } catch let error as PaymentSheetError {
            throw CLIError.failure("the payment sheet refused: \(error)")
        }
        guard case .completed = outcome else { throw CLIError.failure("the payment sheet was cancelled") }
        if let out, let token = delegate.token {
            try writeArtifacts(token: token, deployment: deployment, to: out, trace: trace)
        }
        if let failure = delegate.failure { throw CLIError.failure(failure) }
        guard let answer = delegate.answer else { throw CLIError.failure("the merchant gave no answer") }
        trace(
            "merchant server → acquirer → token service → issuer: \(answer.outcome) \(answer.responseCode)"
                + " (\(answer.maskedPAN))")
        return Result(
            orderID: order.orderID, merchantIdentifier: request.merchantIdentifier, item: orderRequest.item,
            amount: "\(order.total) \(order.currency)", device: deviceName, card: answer.maskedPAN,
            applicationData: order.applicationData, outcome: answer.outcome, responseCode: answer.responseCode,
            reason: answer.reason, transactionIdentifier: answer.transactionIdentifier)
    }

    /// The device the app runs on: opened in this process, or, while its process runs, reached through it.
    enum PayingDevice {
        case inProcess(Device)
        case running(String)
    }

    /// `--device`, else demo-phone, else the first device that can pay in an app; with none, demo-phone is made
    /// and the approve test card provisioned to it. A device whose process runs is used through that process.
    static func payingDevice(
        deployment: DeploymentDirectory, connections: ServiceConnections, name: String?, passcode: String?,
        trace: @escaping @Sendable (String) -> Void
    ) async throws -> PayingDevice {
        let names = Device.names(in: deployment)
        var chosen = name
        if chosen == nil {
            if names.contains("demo-phone") {
                chosen = "demo-phone"
            } else {
                for candidate in names {
                    if let identity = try? Device.identity(of: candidate, in: deployment),
                        identity.profile.authorizesPayments
                    {
                        chosen = candidate
                        break
                    }
                }
            }
        }
        if let chosen {
            guard names.contains(chosen) else { throw CLIError.failure("no device \(chosen) in \(deployment.path)") }
            if ControlSocketClient.isRunning(at: Device.controlSocketPath(of: chosen, in: deployment)) {
                // Its Secure Element is in use there: the sheet is presented to that process.
                if let passcode, (try? Device.identity(of: chosen, in: deployment))?.profile.kind == .watch {
                    _ = try? await DeviceCommands.send(SetWrist(on: true), to: chosen, in: deployment)
                    _ = try await DeviceCommands.send(
                        Unlock(AuthenticationEvidenceBody(method: "passcode", passcode: passcode)), to: chosen,
                        in: deployment)
                }
                return .running(chosen)
            }
            let device = try await Device.open(in: deployment, name: chosen)
            if device.profile.kind == .watch {
                guard let passcode else { throw CLIError.usage("a watch pays after --passcode puts it on the wrist") }
                try? await device.secureEnclave.putOnWrist()
                _ = try await device.unlock(.passcode(SecureBytes(Array(passcode.utf8))))
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
