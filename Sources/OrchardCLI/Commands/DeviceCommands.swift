import Device
import Foundation
import OrchardCrypto
import OrchardRuntime
import SecureElement
import Wallet

/// `orchard device ...`: the user devices of a deployment (phones, iPads, watches, Macs) with their Secure
/// Element, Secure Enclave and wallet.
enum DeviceCommands {
    static let command = Command(
        name: "device",
        summary: "Create and inspect user devices (Secure Element, Secure Enclave, wallet).",
        subcommands: [create, list, cards]
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
            .single("account", "NAME", help: "The account it belongs to (default: default)."),
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
                kind: kind, biometry: biometry, account: arguments.value("account") ?? "default")
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
        let cards = try Device.walletCards(of: try arguments.require("name"), in: deployment)
        try context.outputJSON(cards.map(CardSummary.init))
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
