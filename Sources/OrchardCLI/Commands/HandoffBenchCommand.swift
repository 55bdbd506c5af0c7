import AppPayments
import BrowserAgentAPI
import Device
import DeviceControlAPI
import DeviceProcess
import Foundation
import MerchantAPI
import OrchardBenchmarks
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import OrchardX509
import PayClient
import RelayAPI
import WebMerchantAPI

/// `orchard bench handoff` (docs/handoff.md): a Mac without Touch ID pays with the phone near it, every party on
/// loopback in this process; each payment is timed from the Mac's request (`Handoff.pay`) to the token back at the
/// Mac. The phone's user authorizes at once (as `--auto-auth face-id`), so user time is excluded.
enum HandoffBenchCommand {
    static let targetP99Milliseconds = 100.0

    struct Report: Encodable {
        let payments: Int
        let figure: LatencyFigure
    }

    static let command = Command(
        name: "handoff",
        summary: "Handoff: p50/p99 from a Mac's payment request to the token back at the Mac (target p99 ≤ 100 ms).",
        discussion: """
            Initialises a throw-away deployment and starts its services in this process; the issuer's test card is
            provisioned onto the demo phone, a Mac without Touch ID is approved with it, and both run their radio
            and relay loop here (as `orchard demo`'s web-handoff rows). For each payment the store gives a fresh
            merchant session and the Mac discovers the phone's card (neither timed); the time is from the Mac's
            request over the relay to the token back at the Mac: the phone's checks, its sheet authorized at once
            (user time excluded), the nonce, the Secure Element's credential and the Pay server's token.
            """,
        options: [payments]
    ) { arguments, context in
        let report = try await run(payments: arguments[payments], context: context)
        context.trace(LatencyFigure.header)
        context.trace(report.figure.row)
        try context.outputJSON(report)
    }

    static let payments = Option.integer(
        "payments", default: 50, range: 1...10_000, help: "Payments to time.")

    static func run(payments count: Int, context: CommandContext) async throws -> Report {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(
            "orchard-bench-handoff-\(UUID().uuidString)"
        ).path
        let deployment = DeploymentDirectory(path: path)
        defer { try? FileManager.default.removeItem(atPath: path) }
        try await DeploymentCommands.initializeIfEmpty(
            deployment, options: DeploymentInitializer.Options(force: true), context: context)
        let connections = try await DeploymentCommands.connect(
            [.network, .pay, .merchant], of: deployment, context: context)
        var hosts: [HandoffHost] = []
        do {
            let trace: @Sendable (String) -> Void = { _ in }
            let (_, devices) = try await DemoProvisioning.run(
                deployment: deployment, connections: connections, trace: trace, only: ["demo-phone"])
            guard let phone = devices["demo-phone"] else { throw CLIError.failure("the demo phone is missing") }
            let mac = try await DemoWebHandoff.macWithoutTouchID(in: deployment, trace: trace)
            try await DemoWebHandoff.approve(phone, mac, deployment: deployment, connections: connections)
            let root = try Certificate(pemEncoded: connections.rootCertificatePEM)
            let tokenRoot = try DeploymentPKI.readCertificate(named: "token-root", from: deployment)
            for (device, automatic) in [(mac, nil), (phone, "face-id")] {
                let name = device.name
                hosts.append(
                    try HandoffHost(
                        device: device, deployment: deployment,
                        automatic: try automatic.map { try AutoAuthentication(parsing: $0) },
                        sessions: try MerchantSessionCheck(tokenRoot: tokenRoot, clock: SystemClock()),
                        payServer: { try? PaySession.client(device: name, in: deployment, connections: connections) },
                        connect: {
                            PaymentSheetService.PayServerConnection(
                                client: try PaySession.client(device: name, in: deployment, connections: connections),
                                root: root, close: {})
                        }, trace: trace))
            }
            try await DemoWebHandoff.waitUntilNear(hosts, trace: context.trace)
            guard let sitePort = connections.endpoints[.merchant]?.ports["site"] else {
                throw CLIError.failure("the merchant server runs no site for \(WebMerchantAPI.HostNames.store)")
            }
            let browser = try HTTPClient(
                configuration: HTTPClientConfiguration(
                    trustedRootsPEM: connections.rootCertificatePEM, maxAttempts: 1,
                    connectTo: [WebMerchantAPI.HostNames.store: sitePort]))
            defer { browser.shutdown() }
            var samples: [UInt64] = []
            for _ in 0..<count {
                let answer = try await browser.send(
                    try HTTPClientRequest.json(
                        .post, "https://" + WebMerchantAPI.HostNames.store + MerchantAPI.Web.merchantSession,
                        MerchantAPI.MerchantSessionRequest(validationURL: BrowserAgentAPI.validationURL)))
                guard answer.status == .ok else { throw CLIError.failure("the store gave no merchant session") }
                let session = try MerchantSession(json: Array(answer.body))
                // The figure is the payment's latency: discovery, not timed, is asked again when a loaded machine
                // kept the phone's answer past the Mac's 3-second wait.
                var offered = await hosts[0].discover()
                var asked = 1
                while asked < 3, !offered.devices.contains(where: { $0.device == phone.name }) {
                    context.trace("the phone offered no card (\(offered.message ?? "")); asking again")
                    offered = await hosts[0].discover()
                    asked += 1
                }
                guard let card = offered.devices.first(where: { $0.device == phone.name })?.cards.first else {
                    throw CLIError.failure("the phone offers the Mac no card: \(offered.message ?? "")")
                }
                let request = PaymentRequest(
                    merchantIdentifier: session.merchantIdentifier, countryCode: "US", currencyCode: "USD",
                    supportedNetworks: [PaymentNetwork(rawValue: "visa"), PaymentNetwork(rawValue: "masterCard")],
                    merchantCapabilities: MerchantCapabilities(names: ["supports3DS"]),
                    paymentSummaryItems: [PaymentSummaryItem(label: "Orchard Demo Store", amount: "4.50")],
                    applicationData: Data(SystemRandom().bytes(16)))
                let payment = HandoffPayment(
                    device: phone.name, card: card.identifier,
                    merchantSession: String(decoding: answer.body, as: UTF8.self),
                    domain: WebMerchantAPI.HostNames.store, request: PaymentSheetRequestBody(request))
                let start = DispatchTime.now().uptimeNanoseconds
                let paid = await hosts[0].pay(payment)
                let elapsed = DispatchTime.now().uptimeNanoseconds - start
                guard paid.outcome == "authorized", paid.payment != nil else {
                    throw CLIError.failure("the phone did not pay: \(paid.failure ?? paid.outcome)")
                }
                samples.append(elapsed)
            }
            for host in hosts { await host.stop() }
            hosts = []
            await connections.close()
            return Report(
                payments: count,
                figure: try LatencyFigure(
                    name: "handoff request → token at the Mac", nanoseconds: samples,
                    targetP99Milliseconds: targetP99Milliseconds))
        } catch {
            for host in hosts { await host.stop() }
            await connections.close()
            throw error
        }
    }
}
