import CardBasics
import Device
import Foundation
import OrchardRuntime
import OrchardServices
import OrchardX509
import PayAPI
import PayClient
import SecureElement
import Wallet

/// The demo's provisioning section (ARCHITECTURE §2, Provisioning): the factory makes a phone (Face ID) and a
/// watch of the demo account; the issuer's approve test card goes onto both through the Pay server, which relays
/// what it cannot read; each device gets its own device account number and keys.
enum DemoProvisioning {
    /// One provisioned card, as the demo reports it (numbers masked).
    struct Row: Encodable {
        let device: String
        let kind: String
        let card: String
        let deviceAccountNumber: String
        let tokenReference: String
        let walletCardID: String
    }

    static let testCard = (pan: "4111111111111111", expiry: "12/34", cvv: "266", cardholder: "Alice Appleseed")
    static let devices: [(name: String, kind: DeviceKind, biometry: Biometry)] = [
        ("demo-phone", .phone, .face), ("demo-watch", .watch, .none),
    ]

    /// Provisions the test card onto the demo devices (made if missing; a device that already holds an active
    /// card keeps it). `connections` reach the running network and Pay server.
    static func run(
        deployment: DeploymentDirectory, connections: ServiceConnections, trace: @escaping @Sendable (String) -> Void,
        only: Set<String>? = nil, specs: [(name: String, kind: DeviceKind, biometry: Biometry)] = devices
    ) async throws -> (rows: [Row], devices: [String: Device]) {
        // The token service's provisioning certificate chains to the network's root: the deployment's own, or the
        // network party's imported one when the devices live in a Pay side deployed on its own.
        let root = try Certificate(
            pemEncoded: try deployment.rootCertificate(ofParty: DeploymentParty.network.rawValue))
        let account = "demo"
        var rows: [Row] = []
        var opened: [String: Device] = [:]
        for spec in specs where only?.contains(spec.name) ?? true {
            let profile = try DeviceProfile(kind: spec.kind, biometry: spec.biometry, account: account)
            let fresh = !Device.names(in: deployment).contains(spec.name)
            if fresh {
                _ = try Device.create(in: deployment, name: spec.name, profile: profile)
                trace(
                    "factory: \(spec.name) (\(spec.kind.rawValue), \(spec.biometry.rawValue)) of account \(account): "
                        + "Secure Element and Secure Enclave keys paired; SE key certified by the device CA")
            }
            let device = try await Device.open(in: deployment, name: spec.name)
            opened[spec.name] = device
            if fresh {
                try await device.secureEnclave.setPasscode(SecureBytes(Array("123456".utf8)), current: nil)
                trace("user: set the passcode of \(spec.name)")
            }
            if let card = await device.wallet.allCards.first(where: { $0.state == .active }) {
                trace("\(spec.name) already holds •••• \(card.suffix) (DPAN •••• \(card.deviceAccountSuffix))")
                continue
            }
            let client = try PaySession.client(device: spec.name, in: deployment, connections: connections)
            let flow = AddCardFlow(
                client: client, root: root, deviceID: spec.name,
                secureElementCertificate: try Device.identity(of: spec.name, in: deployment).certificate,
                enclavePublicKey: try Device.identity(of: spec.name, in: deployment).enclavePublicKey)
            let outcome = try await flow.run(
                card: try CardEntry(
                    number: testCard.pan, expiry: testCard.expiry, verificationValue: testCard.cvv,
                    cardholderName: testCard.cardholder),
                idempotencyKey: AddCardFlow.newIdempotencyKey(prefix: "demo-"), oneTimeCode: { _ in nil },
                acceptTerms: { _ in true },
                install: { envelope, display in
                    try await device.installCard(
                        envelope: envelope,
                        display: CardDisplayInput(
                            type: CardType(rawValue: display.type) ?? .credit, suffix: display.suffix,
                            displayName: display.description)
                    ).id
                },
                trace: { trace("  " + $0) })
            guard case .added(let walletCardID, let reference, let card, let dpanSuffix) = outcome else {
                throw CLIError.failure("the demo card was declined for \(spec.name)")
            }
            rows.append(
                Row(
                    device: spec.name, kind: spec.kind.rawValue, card: "•••• " + card.suffix,
                    deviceAccountNumber: "•••• " + dpanSuffix, tokenReference: reference, walletCardID: walletCardID))
        }
        if rows.count == 2 {
            trace(
                "the same card, two devices: device account numbers \(rows[0].deviceAccountNumber) and "
                    + "\(rows[1].deviceAccountNumber), each with its own keys; the card number stayed with the issuer "
                    + "and (encrypted) the token service")
        }
        return (rows, opened)
    }
}
