import AppPayments
import Device
import Foundation
import OrchardCrypto
import PayAPI
import PayClient
import SecureElement
import Synchronization
import Testing
import TokenService

/// A device in lost mode leaves it only with the user's passcode, attested by its own Secure
/// Enclave with the key it registered; an erased device stays erased until it registers again.
@Suite("S2: Lost mode is left only with the passcode; erased stays erased", .serialized)
struct LostModeTests {
    static let passcode = SecureBytes(Array("123456".utf8))

    /// The refusal's HTTP status and server code, or nil when `body` succeeded.
    func refusal(_ body: () async throws -> Void) async -> (Int?, String?)? {
        do {
            try await body()
            return nil
        } catch let error as PayClientError {
            return (error.httpStatus, error.serverCode)
        } catch {
            return (nil, "\(error)")
        }
    }

    @Test("S2: without the passcode attested by the phone's Secure Enclave, nothing leaves lost mode")
    func resumeNeedsThePasscodeOnTheDevice() async throws {
        let sandbox = try await Sandbox()
        let phone = try await sandbox.makeDevice("phone", kind: .phone, biometry: .face)
        let watch = try await sandbox.makeDevice("watch", kind: .watch, biometry: .none)
        _ = try await sandbox.addCard("4111111111111111", to: phone)
        _ = try await sandbox.addCard("5555555555554444", to: watch)  // registers the watch and its enclave key
        _ = try await sandbox.client("phone").lifecycle(device: "phone", action: .lostMode)
        #expect(try await sandbox.networkTokens(of: "phone").first?.state == .suspended)

        // The phone's own certificate, as it did before: refused.
        let bare = await refusal { _ = try await sandbox.client("phone").lifecycle(device: "phone", action: .resume) }
        #expect(bare?.0 == 403 && bare?.1 == "notPermitted")
        // Another device's Secure Enclave (same account, same passcode) signing the phone's challenge: refused.
        let otherEnclave = await refusal {
            _ = try await sandbox.client("watch").resume(device: "phone") { challenge in
                try await watch.secureEnclave.attestPasscode(Self.passcode, challenge: challenge).derRepresentation
            }
        }
        #expect(otherEnclave?.0 == 403)
        // A key of the caller's own making: refused.
        let forged = await refusal {
            _ = try await sandbox.client("phone").resume(device: "phone") { challenge in
                try P256.Signing.PrivateKey().signature(
                    for: PayAPI.PasscodeAttestation.signedContent(challenge: challenge)
                )
                .derRepresentation
            }
        }
        #expect(forged?.0 == 403)
        // A wrong passcode: the Secure Enclave refuses to sign.
        let wrong = await refusal {
            _ = try await sandbox.client("phone").resume(device: "phone") { challenge in
                try await phone.secureEnclave.attestPasscode(SecureBytes(Array("000000".utf8)), challenge: challenge)
                    .derRepresentation
            }
        }
        #expect(wrong?.1?.contains("passcodeIncorrect") == true)
        // The phone's Secure Enclave over a challenge the Pay server did not issue now: refused.
        let stale = await refusal {
            _ = try await sandbox.client("phone").resume(device: "phone") { _ in
                try await phone.secureEnclave.attestPasscode(Self.passcode, challenge: [UInt8](repeating: 7, count: 32))
                    .derRepresentation
            }
        }
        #expect(stale?.0 == 403)
        // Re-registering the phone with another Secure Enclave key (a holder of its certificate): refused.
        let swapped = await refusal {
            _ = try await sandbox.client("phone").register(
                secureElementCertificate: try Device.identity(of: "phone", in: sandbox.deployment).certificate,
                enclavePublicKey: try P256.Signing.PrivateKey().publicKey)
        }
        #expect(swapped?.0 == 409 || swapped?.1 == "deviceMismatch")
        #expect(try await sandbox.networkTokens(of: "phone").first?.state == .suspended)

        // The passcode on the phone, from any device of the account: resumed. Its challenge is spent.
        let used = Mutex<[UInt8]>([])
        _ = try await sandbox.client("watch").resume(device: "phone") { challenge in
            let signature = try await phone.secureEnclave.attestPasscode(Self.passcode, challenge: challenge)
                .derRepresentation
            used.withLock { $0 = signature }
            return signature
        }
        #expect(try await sandbox.networkTokens(of: "phone").first?.state == .active)
        _ = try await sandbox.client("phone").lifecycle(device: "phone", action: .lostMode)
        let replayed = await refusal {
            _ = try await sandbox.client("phone").resume(device: "phone") { _ in used.withLock { $0 } }
        }
        #expect(replayed?.0 == 403)
        #expect(try await sandbox.networkTokens(of: "phone").first?.state == .suspended)
        await sandbox.close()
    }

    /// Applies the phone's pending notifications and what the Pay server says of lost mode.
    func sync(_ sandbox: Sandbox, _ device: Device) async throws {
        _ = try await NotificationSync.run(
            client: try sandbox.client(device.name),
            apply: { reference, change in try await device.applyTokenStatus(tokenReference: reference, change) },
            lostMode: { try device.setLostMode($0) })
    }

    /// Presents an in-app sheet on `device` for the demo merchant; its outcome or the sheet's refusal.
    func present(_ sandbox: Sandbox, _ device: Device) async throws -> Result<PaymentSheetOutcome, PaymentSheetError> {
        let sheet = DevicePaymentSheet(
            device: device, client: try sandbox.client(device.name), root: sandbox.root,
            user: AcceptingSheetUser(contact: PaymentSheetTests.alice))
        let controller = PaymentAuthorizationController(
            paymentRequest: PaymentSheetTests.request(), host: sheet, applicationIdentifier: "dev.orchard.demo-app")
        do {
            return .success(try await controller.present(delegate: RecordingDelegate()))
        } catch let error as PaymentSheetError {
            return .failure(error)
        }
    }

    @Test(
        "I29: the device learns lost mode with its notifications, shows it in its status, and starts no payment sheet until the owner leaves it"
    )
    func theDeviceLearnsLostMode() async throws {
        let sandbox = try await Sandbox()
        let phone = try await sandbox.makeDevice("phone", kind: .phone, biometry: .face)
        _ = try await sandbox.addCard("4111111111111111", to: phone)
        try await sandbox.register("phone")
        try await sync(sandbox, phone)
        #expect(try await sandbox.client("phone").notificationsAndState(after: 0).lostMode == false)
        #expect(!phone.isInLostMode)
        #expect(await phone.status().lostMode == false)

        _ = try await sandbox.client("phone").lifecycle(device: "phone", action: .lostMode)
        #expect(!phone.isInLostMode)  // not told yet
        #expect(try await sandbox.client("phone").notificationsAndState(after: 0).lostMode == true)
        try await sync(sandbox, phone)
        #expect(phone.isInLostMode)
        #expect(await phone.status().lostMode)
        // Acknowledging the notifications does not acknowledge the state: every answer carries it.
        #expect(try await sandbox.client("phone").notificationsAndState(after: 0).lostMode == true)
        // The sheet refuses before it shows anything or asks the Pay server: lost mode, not "no eligible card".
        let refused = try await present(sandbox, phone)
        guard case .failure(let error) = refused else {
            Issue.record("a device in lost mode presented a sheet: \(refused)")
            return await sandbox.close()
        }
        #expect(error.code == .deviceInLostMode && error.message.contains("lost mode"), "\(error)")

        // The owner leaves lost mode with the passcode on the phone: the next sync clears the flag and it pays.
        _ = try await sandbox.client("phone").resume(device: "phone") { challenge in
            try await phone.secureEnclave.attestPasscode(Self.passcode, challenge: challenge).derRepresentation
        }
        try await sync(sandbox, phone)
        #expect(!phone.isInLostMode)
        guard case .success(.completed(let result)) = try await present(sandbox, phone) else {
            Issue.record("the sheet did not complete after lost mode was left")
            return await sandbox.close()
        }
        #expect(result.status == .success)

        // Erase clears lost mode at the Pay server, and the device learns that too.
        _ = try await sandbox.client("phone").lifecycle(device: "phone", action: .lostMode)
        try await sync(sandbox, phone)
        #expect(phone.isInLostMode)
        _ = try await sandbox.client("phone").lifecycle(device: "phone", action: .erase)
        try await sync(sandbox, phone)
        #expect(!phone.isInLostMode)
        await sandbox.close()
    }

    @Test("S2: an erased device stays erased (no resume, no lost mode, no provisioning) until it registers again")
    func erasedStaysErased() async throws {
        let sandbox = try await Sandbox()
        let phone = try await sandbox.makeDevice("phone", kind: .phone, biometry: .face)
        _ = try await sandbox.addCard("4111111111111111", to: phone)
        _ = try await sandbox.client("phone").lifecycle(device: "phone", action: .erase)
        #expect(try await sandbox.networkTokens(of: "phone").first?.state == .deleted)
        for action in [PayAPI.LifecycleAction.lostMode, .resume] {
            let refused = await refusal {
                _ = try await sandbox.client("phone").lifecycle(device: "phone", action: action)
            }
            #expect(refused?.1 == "deviceNotRegistered", "\(action)")
        }
        let challenge = await refusal {
            _ = try await sandbox.client("phone").resume(device: "phone") { challenge in
                try await phone.secureEnclave.attestPasscode(Self.passcode, challenge: challenge).derRepresentation
            }
        }
        #expect(challenge?.1 == "deviceNotRegistered")
        // Registering again (adding a card does) sets it up again.
        _ = try await sandbox.addCard("5555555555554444", to: phone)
        _ = try await sandbox.client("phone").lifecycle(device: "phone", action: .lostMode)
        #expect(try await sandbox.networkTokens(of: "phone").contains { $0.state == .suspended })
        await sandbox.close()
    }
}
