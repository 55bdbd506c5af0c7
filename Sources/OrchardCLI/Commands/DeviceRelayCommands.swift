import Device
import DeviceControlAPI
import Foundation
import OrchardCrypto
import OrchardRuntime
import PayClient
import RelayAPI
import SecureElement

/// `orchard device approve`: the user approves a device joining the account on a device already in it, so that the
/// devices' relay keys vouch for each other (docs/handoff.md).
extension DeviceCommands {
    static let newOption = Option.required("new", "NAME", help: "The device joining the account.")

    static let approve = Command(
        name: "approve",
        summary: "Approve a device joining the account on a device already in it (relay keys vouched for).",
        discussion: """
            Reads the passcode of the existing device (--name) from --passcode-file FILE, else $ORCHARD_PASSCODE, else a
            line of standard input, then the passcode of the new one (--new) from --new-passcode-file FILE, else
            $ORCHARD_NEW_PASSCODE, else the next line (files: one line, mode 0600 or stricter). Each device shows its
            own relay keys (through its running process, else its store); the existing device's Secure Enclave checks
            its passcode and signs a vouch for the keys the new device showed, and the new device vouches for the
            existing one's the same way. Both devices are registered and their keys published at the Pay server first.
            Senders use only keys a chain of such vouches reaches, so a key the Pay server's directory substitutes is
            refused. Example: `printf '123456\\n654321\\n' | orchard device approve --name phone --new mac`.
            """,
        options: [nameOption, newOption, passcodeFileOption, newPasscodeFileOption]
    ) { arguments, context in
        try await approveDevice(arguments, context)
    }

    struct ApprovedDevice: Encodable {
        let existing: String
        let new: String
        let account: String
        let vouches: [String]
    }

    static func approveDevice(_ arguments: ParsedArguments, _ context: CommandContext) async throws {
        let deployment = DeploymentDirectory(path: context.dataDirectory.path)
        let existing = arguments[nameOption]
        let new = arguments[newOption]
        guard existing != new else { throw CLIError.usage("--name and --new name two different devices") }
        let existingIdentity = try Device.identity(of: existing, in: deployment)
        let newIdentity = try Device.identity(of: new, in: deployment)
        guard existingIdentity.profile.account == newIdentity.profile.account else {
            throw CLIError.usage("\(existing) and \(new) belong to different accounts")
        }
        let existingPasscode = SecretInput.text(
            try SecretInput.passcode.read(
                file: arguments[passcodeFileOption], context, prompt: "passcode of \(existing): "))
        let newPasscode = SecretInput.text(
            try SecretInput.newPasscode.read(
                file: arguments[newPasscodeFileOption], context, prompt: "passcode of \(new): "))
        var vouches: [String] = []
        for (voucher, passcode, identity, subject, subjectIdentity) in [
            (existing, existingPasscode, existingIdentity, new, newIdentity),
            (new, newPasscode, newIdentity, existing, existingIdentity),
        ] {
            // The keys the other device shows itself, not the directory's copy.
            let shown = try await send(GetRelayKeys(), to: subject, in: deployment)
            let own = try await send(GetRelayKeys(), to: voucher, in: deployment)
            let signature = try await send(
                VouchRelayDevice(
                    device: subject, encryptionKey: shown.encryptionKey, signingKey: shown.signingKey,
                    passcode: passcode), to: voucher, in: deployment)
            _ = try await PaySession.with(device: subject, in: deployment, context: context) { session in
                _ = try await session.client.register(
                    secureElementCertificate: subjectIdentity.certificate,
                    enclavePublicKey: subjectIdentity.enclavePublicKey)
                return try await session.client.publishRelayKeys(try relayKeys(shown))
            }
            _ = try await PaySession.with(device: voucher, in: deployment, context: context) { session in
                _ = try await session.client.register(
                    secureElementCertificate: identity.certificate, enclavePublicKey: identity.enclavePublicKey)
                _ = try await session.client.publishRelayKeys(try relayKeys(own))
                return try await session.client.vouchRelayKeys(of: subject, signature: Array(signature.signature))
            }
            context.trace("device \(voucher): the Secure Enclave vouched for the relay keys of \(subject)")
            vouches.append("\(voucher)>\(subject)")
        }
        try context.outputJSON(
            ApprovedDevice(existing: existing, new: new, account: existingIdentity.profile.account, vouches: vouches))
    }

    static func relayKeys(_ answer: RelayKeysAnswer) throws -> RelayPublicKeys {
        do {
            return RelayPublicKeys(
                encryption: try P256.KeyAgreement.PublicKey(x963Representation: answer.encryptionKey),
                signing: try P256.Signing.PublicKey(x963Representation: answer.signingKey))
        } catch {
            throw CLIError.failure("the device's relay keys are not P-256 keys")
        }
    }
}
