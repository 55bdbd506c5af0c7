import AppPayments
import CommandTestSupport
import DeviceControlAPI
import DeviceProcess
import Foundation
import MerchantAPI
import MerchantKit
import MerchantServer
import OrchardCrypto
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import OrchardStore
import OrchardX509
import PayServer
import PaymentToken
import RelayAPI
import Testing
import WebMerchantAPI

extension HandoffProcesses {
    /// The Handoff payment at the Mac's control API: `orchard up` (the store's site among the
    /// services), a Mac without Touch ID, a phone (Face ID, approved by --auto-auth) and a watch (the user drives its
    /// sheet), each with a card; the Mac asks for the payment, the phone or watch verifies the merchant session and its
    /// user authorizes there, the token comes back through the relay and the store takes it.
    @Suite("Handoff payments: a Mac without Touch ID pays with a phone or a watch", .serialized)
    struct HandoffPaymentTests {
        static let store = "https://" + WebMerchantAPI.HostNames.store

        /// The store's site as the Mac's browser reaches it.
        static func browser(_ deployment: DeploymentDirectory) throws -> HTTPClient {
            let site = try #require(deployment.runningInstances(of: .merchant).first?.ports["site"])
            return try HTTPClient(
                configuration: HTTPClientConfiguration(
                    trustedRootsPEM: try deployment.readCertificate(named: PKIFiles.rootCA),
                    maxAttempts: 1, connectTo: [WebMerchantAPI.HostNames.store: site]))
        }

        /// `onvalidatemerchant`: the page asks its server for a merchant session.
        static func merchantSession(_ browser: HTTPClient) async throws -> (json: String, merchant: String) {
            let answer = try await browser.send(
                try HTTPClientRequest.json(
                    .post, store + MerchantAPI.Web.merchantSession,
                    MerchantAPI.MerchantSessionRequest(
                        validationURL: "https://apple-pay-gateway.orchard.test/paymentservices/paymentSession")))
            #expect(answer.status == .ok)
            let session = try MerchantSession(json: Array(answer.body))
            return (String(decoding: answer.body, as: UTF8.self), session.merchantIdentifier)
        }

        static func request(merchant: String, applicationData: Data) -> PaymentSheetRequestBody {
            PaymentSheetRequestBody(
                PaymentRequest(
                    merchantIdentifier: merchant, countryCode: "US", currencyCode: "USD",
                    supportedNetworks: [PaymentNetwork(rawValue: "visa")],
                    merchantCapabilities: MerchantCapabilities(names: ["supports3DS"]),
                    paymentSummaryItems: [
                        PaymentSummaryItem(label: "Tea", amount: "4.50"),
                        PaymentSummaryItem(label: "Orchard Demo Store", amount: "4.50"),
                    ], applicationData: applicationData))
        }

        /// The page's `onpaymentauthorized`: the order with the request's applicationData, then the token.
        static func submit(
            _ payment: PaymentSheetPayment, applicationData: Data, _ browser: HTTPClient
        ) async throws -> MerchantAPI.PaymentResult {
            let created = try await browser.send(
                try HTTPClientRequest.json(
                    .post, store + MerchantAPI.Route.orders,
                    MerchantAPI.CreateOrder(
                        item: "Tea", amount: "4.50", currency: "USD", applicationData: applicationData))
            )
            let order = try JSONDecoder().decode(MerchantAPI.OrderCreated.self, from: created.body)
            let token = try #require(Data(base64Encoded: payment.token))
            let answer = try await browser.send(
                HTTPClientRequest(
                    method: .post, url: store + MerchantAPI.Web.payment(order.orderID),
                    headers: ["Content-Type": "application/json"],
                    body: try MerchantAPI.PaymentSubmission(token: token).body()))
            return try JSONDecoder().decode(MerchantAPI.PaymentResult.self, from: answer.body)
        }

        /// Site Y: another merchant, registered at the Pay server with its own payment processing key and
        /// certificate, as its server decrypts tokens (the token root of the deployment).
        static func otherSite(_ deployment: DeploymentDirectory) async throws -> PaymentTokenDecryptor {
            let other = "merchant.dev.orchard.other"
            let payStore = try PayStore.open(in: deployment)
            let registry = MerchantRegistry(
                store: payStore,
                authority: try CertificateAuthority.load(named: PayService.Files.merchantCA, from: deployment),
                clock: SystemClock(), random: SystemRandom())
            try await registry.registerMerchant(identifier: other, displayName: "Other Store")
            let key = try P256.Signing.PrivateKey()
            let certificates = try await registry.issuePaymentProcessingCertificate(
                for: try CertificateSigningRequest.create(
                    subject: DistinguishedName([
                        .userID(other), .commonName("Orchard Pay Payment Processing:\(other)"),
                    ]),
                    key: CertificatePrivateKey(key)),
                merchantIdentifier: other)
            await payStore.close()
            let identity = try MerchantIdentity(certificate: certificates[0], privateKeyPEM: try key.pemRepresentation)
            let root = try deployment.readCertificate(named: MerchantServer.tokenRootFile)
            return try PaymentTokenDecryptor(identities: [identity], trustRoots: [try Certificate(pemEncoded: root)])
        }

        @Test(
            "H3, H4: The phone (Face ID) and the watch (double-click) complete a Mac's payment; proximity lost before the user authorized refuses; a token for the store is refused at another site"
        )
        func payments() async throws {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent(
                "orchard-handoff-\(UUID().uuidString)"
            )
            .path
            let deployment = DeploymentDirectory(path: path)
            defer {
                LogScan.expectCleanLogs(of: path)  // V2
                try? FileManager.default.removeItem(atPath: path)
            }
            let up = try await HandoffProcesses.pairedAccount(at: path)
            defer { up.terminate() }
            let options = ["--sync-interval", "1", "--proximity-window", "1"]
            let phone = try await DeviceProcessChild(
                dataDirectory: path, name: "phone", options: options + ["--auto-auth", "face-id"])
            let watch = try await DeviceProcessChild(dataDirectory: path, name: "watch", options: options)
            let mac = try await DeviceProcessChild(dataDirectory: path, name: "mac", options: options)
            for (device, others) in [(mac, ["phone", "watch"]), (phone, ["mac"]), (watch, ["mac"])] {
                _ = try await ProximityTests.wait(device, "hears \(others)") { answer in
                    others.allSatisfy { name in answer.nearby.contains { $0.device == name } }
                }
            }
            for step in [["wrist", "--on", "yes"], ["unlock", "--method", "passcode"]] {
                let done = try await orchard(
                    ["device"] + [step[0], "--data-dir", path, "--name", "watch"] + step.dropFirst(),
                    stdin: "123456\n")
                #expect(done.status == 0, "\(done.stderr)")
            }
            let browser = try Self.browser(deployment)
            defer { browser.shutdown() }
            let offered = try await HandoffDiscoveryTests.discover(path).0
            let phoneCard = try #require(offered.devices.first { $0.device == "phone" }?.cards.first?.identifier)
            let watchCard = try #require(offered.devices.first { $0.device == "watch" }?.cards.first?.identifier)

            // The phone: Face ID (--auto-auth), the token back to the Mac, the store takes it.
            var session = try await Self.merchantSession(browser)
            var applicationData = Data(SystemRandom().bytes(16))
            let byPhone = try await ControlSocketClient.send(
                HandoffPayment(
                    device: "phone", card: phoneCard, merchantSession: session.json,
                    domain: WebMerchantAPI.HostNames.store,
                    request: Self.request(merchant: session.merchant, applicationData: applicationData)), to: mac.socket
            ).get()
            #expect(byPhone.outcome == "authorized", "\(byPhone)\n\(phone.output)")
            let paid = try await Self.submit(try #require(byPhone.payment), applicationData: applicationData, browser)
            #expect(paid.outcome == "approved", "\(paid)")

            // H4: the phone's token for the store (site X) presented at another merchant's site (Y) fails as A4: Y's
            // processing key has no matching hash (the token is sealed to the merchant the session named).
            let phonePayment = try #require(byPhone.payment)
            let token = try PaymentToken(jsonBytes: Array(try #require(Data(base64Encoded: phonePayment.token))))
            let siteY = try await Self.otherSite(deployment)
            #expect(throws: MerchantKitError(.unknownPublicKeyHash, "")) { try siteY.decrypt(token) }
            // Nor can the Mac have the phone make one for site Y with site X's session: the phone refuses the session
            // for another domain before any sheet.
            session = try await Self.merchantSession(browser)
            let forY = try await ControlSocketClient.send(
                HandoffPayment(
                    device: "phone", card: phoneCard, merchantSession: session.json, domain: "other.orchard.test",
                    request: Self.request(merchant: session.merchant, applicationData: Data(SystemRandom().bytes(16)))),
                to: mac.socket
            ).get()
            #expect(forY.outcome == "refused" && forY.payment == nil, "\(forY)")
            #expect(forY.failure?.contains("the merchant session is for \(WebMerchantAPI.HostNames.store)") == true)

            // The watch: the user double-clicks on the watch's sheet.
            session = try await Self.merchantSession(browser)
            applicationData = Data(SystemRandom().bytes(16))
            let request = HandoffPayment(
                device: "watch", card: watchCard, merchantSession: session.json, domain: WebMerchantAPI.HostNames.store,
                request: Self.request(merchant: session.merchant, applicationData: applicationData))
            let pending = Task { try await ControlSocketClient.send(request, to: mac.socket).get() }
            _ = try await watch.sheetWaitingForUser()
            let clicked = try await orchard([
                "device", "sheet", "authenticate", "--data-dir", path, "--name", "watch", "--method", "double-click",
            ])
            #expect(clicked.status == 0, "\(clicked.stderr)")
            let byWatch = try await pending.value
            #expect(byWatch.outcome == "authorized", "\(byWatch)\n\(watch.output)")
            let paidByWatch = try await Self.submit(
                try #require(byWatch.payment), applicationData: applicationData, browser)
            #expect(paidByWatch.outcome == "approved", "\(paidByWatch)")

            // Proximity lost between the request and the user's authorization: refused, no token for the Mac.
            session = try await Self.merchantSession(browser)
            let lost = HandoffPayment(
                device: "watch", card: watchCard, merchantSession: session.json, domain: WebMerchantAPI.HostNames.store,
                request: Self.request(merchant: session.merchant, applicationData: Data(SystemRandom().bytes(16))))
            let refusing = Task { try await ControlSocketClient.send(lost, to: mac.socket).get() }
            _ = try await watch.sheetWaitingForUser()
            #expect(
                try await orchard(["device", "move", "--data-dir", path, "--name", "watch", "--room", "away"]).status
                    == 0)
            _ = try await ProximityTests.wait(watch, "the watch no longer hears the Mac") { $0.nearby.isEmpty }
            _ = try await orchard([
                "device", "sheet", "authenticate", "--data-dir", path, "--name", "watch", "--method", "double-click",
            ])
            _ = try await orchard(["device", "sheet", "cancel", "--data-dir", path, "--name", "watch"])
            let refused = try await refusing.value
            #expect(refused.outcome == "refused" && refused.payment == nil, "\(refused)")
            #expect(refused.failure?.contains("no longer near") == true, "\(refused)")

            // Out of proximity at the request: refused at once.
            _ = try await ProximityTests.wait(mac, "the Mac no longer hears the watch") {
                !$0.nearby.contains { $0.device == "watch" }
            }
            let far = try await ControlSocketClient.send(request, to: mac.socket).get()
            #expect(far.outcome == "refused" && far.failure?.hasPrefix("iPhone could not be found") == true, "\(far)")

            for device in [phone, watch, mac] { #expect(try await device.stop() == 0) }
        }
    }
}
