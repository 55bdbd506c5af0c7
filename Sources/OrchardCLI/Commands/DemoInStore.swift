import CardBasics
import Device
import DeviceProcess
import Foundation
import NFCLink
import OrchardCrypto
import OrchardRuntime
import OrchardServices
import SecureElement
import Terminal

/// The demo's in-store section (ARCHITECTURE §2, In store): terminal T0001 of the demo merchant charges the phone
/// (Face ID) and then the watch (its double-click, on the wrist and unlocked). Each device opens its NFC antenna
/// in this process, but every APDU crosses the link's socket; the authorization goes over HTTPS with the
/// terminal's client certificate to the acquirer → token service → issuer.
enum DemoInStore {
    /// One payment of the demo's summary (and of `DIR/demo-summary.json`).
    struct Row: Codable, Sendable {
        let channel: String
        let device: String
        let card: String
        let amount: String
        let result: String
        let responseCode: String
    }

    static let payments: [(device: String, amount: String, auth: String)] = [
        ("demo-phone", "12.34", "face-id"), ("demo-watch", "4.50", "double-click"),
    ]

    static func run(
        deployment: DeploymentDirectory, connections: ServiceConnections, devices: [String: Device],
        trace: @escaping @Sendable (String) -> Void
    ) async throws -> [Row] {
        let store = try TerminalDatabase(deployment: deployment)
        let settings: TerminalSettings
        if let existing = try await store.terminal("T0001") {
            settings = existing
        } else {
            settings = try TerminalSettings(terminalID: "T0001")
            try await store.saveTerminal(settings)
        }
        if let issued = try TerminalCommands.issueClientIdentity(settings, deployment) {
            trace("terminal T0001 of \(settings.merchantName): client certificate pki/\(issued).pem (role acquiring)")
        }
        let identity = TerminalCommands.clientIdentityName(settings.terminalID)
        let policy = TerminalPolicy(readyTimeout: .seconds(10), attemptTimeout: .seconds(10))
        // The network connected to, then every further instance running (`serve network --instance N`).
        var acquirerURLs = [try connections.baseURL(of: .network)]
        for record in deployment.runningInstances(of: .network) where !acquirerURLs.contains(record.baseURL) {
            acquirerURLs.append(record.baseURL)
        }
        let gateway = try AcquirerHTTPSGateway(
            baseURLs: acquirerURLs, trustedRootsPEM: connections.rootCertificatePEM,
            clientCertificateChainPEM: try deployment.readCertificate(named: identity),
            clientPrivateKeyPEM: try deployment.readPrivateKey(named: identity), requestTimeout: policy.attemptTimeout)
        let terminal = PaymentTerminal(
            settings: settings, store: store, gateway: gateway, policy: policy,
            logger: try TerminalLogFile.logger(for: deployment))
        var rows: [Row] = []
        for payment in payments {
            guard let device = devices[payment.device] else { continue }
            if device.profile.kind == .watch {
                try? await device.secureEnclave.putOnWrist()
                _ = try await device.unlock(.passcode(SecureBytes(Array("123456".utf8))))
                trace("user: puts \(payment.device) on the wrist and unlocks it with the passcode")
            }
            let amount = try Money(parsing: payment.amount, currency: try Currency(settings.currency))
            guard
                let antenna = try NFCFieldSession.startAntenna(
                    device: device, deployment: deployment,
                    autoAuthentication: try AutoAuthentication(parsing: payment.auth),
                    events: { event in trace("  \(payment.device): \(event.event)") })
            else { continue }
            trace(
                "terminal T0001: \(amount) — \(payment.device) held to the reader; the user authenticates with "
                    + "\(payment.auth)")
            let result: ChargeResult
            do {
                result = try await terminal.charge(amount, antenna: antenna.path)
                antenna.stop()
            } catch {
                antenna.stop()
                throw error
            }
            trace("  \(result.description)")
            rows.append(
                Row(
                    channel: "in-store", device: payment.device, card: result.maskedPAN ?? "-",
                    amount: "\(payment.amount) \(settings.currency)",
                    result: result.isApproved ? "approved" : "declined",
                    responseCode: result.responseCode))
        }
        await store.close()
        return rows
    }
}
