import Foundation
import OrchardCrypto
import SecureElement
import Testing

@Suite("Secure Enclave: methods and limits")
struct SecureEnclaveTests {
    /// A device with a provisioned card (so an AR exists) and the card's identifier.
    static func provisioned(
        _ kind: DeviceKind = .phone, _ biometry: Biometry = .face
    ) async throws -> (
        Harness, CardIdentifier
    ) {
        let harness = try await Harness(kind, biometry)
        let card = try await harness.provision(dpan: visaDPAN).card
        return (harness, card)
    }

    static func request(
        _ harness: Harness, _ card: CardIdentifier, _ type: TransactionType = .contactless
    ) async
        -> AuthorizationRequest
    {
        AuthorizationRequest(
            transactionType: type, card: card, amount: nil, challenge: await harness.element.challenge())
    }

    @Test("D1: Face ID: passcode offered after 2 failures, the only method after 5, counters reset by the passcode")
    func faceLimits() async throws {
        let (h, card) = try await Self.provisioned(.phone, .face)
        #expect(await h.enclave.paymentMethods() == [.faceID])
        // Before it is offered, the passcode is refused without counting.
        await expectCode(.methodNotOffered) {
            try await h.enclave.authorizePayment(
                await Self.request(h, card), evidence: .passcode(Harness.secret(Harness.passcode)))
        }
        let first = try await h.enclave.authorizePayment(await Self.request(h, card), evidence: .faceID(matched: false))
        #expect(first.offered == [.faceID])
        let second = try await h.enclave.authorizePayment(
            await Self.request(h, card), evidence: .faceID(matched: false))
        #expect(second.offered == [.faceID, .passcode])
        for _ in 0..<3 {
            _ = try await h.enclave.authorizePayment(await Self.request(h, card), evidence: .faceID(matched: false))
        }
        #expect(await h.enclave.paymentMethods() == [.passcode])
        await expectCode(.methodNotOffered) {
            try await h.enclave.authorizePayment(await Self.request(h, card), evidence: .faceID(matched: true))
        }
        let byPasscode = try await h.enclave.authorizePayment(
            await Self.request(h, card), evidence: .passcode(Harness.secret(Harness.passcode)))
        #expect(byPasscode.isAuthorized)
        #expect(await h.enclave.paymentMethods() == [.faceID])
        #expect(await h.enclave.status.failedBiometricAttempts == 0)
    }

    @Test("D1: Touch ID: passcode offered after 3 failures, not after 2; only passcode after 5")
    func touchLimits() async throws {
        let (h, card) = try await Self.provisioned(.phone, .touch)
        for _ in 0..<2 {
            _ = try await h.enclave.authorizePayment(await Self.request(h, card), evidence: .touchID(matched: false))
        }
        #expect(await h.enclave.paymentMethods() == [.touchID])
        _ = try await h.enclave.authorizePayment(await Self.request(h, card), evidence: .touchID(matched: false))
        #expect(await h.enclave.paymentMethods() == [.touchID, .passcode])
        for _ in 0..<2 {
            _ = try await h.enclave.authorizePayment(await Self.request(h, card), evidence: .touchID(matched: false))
        }
        #expect(await h.enclave.paymentMethods() == [.passcode])
        // A match after a few failures resets the count.
        let (h2, card2) = try await Self.provisioned(.phone, .touch)
        _ = try await h2.enclave.authorizePayment(await Self.request(h2, card2), evidence: .touchID(matched: false))
        #expect(
            try await h2.enclave.authorizePayment(await Self.request(h2, card2), evidence: .touchID(matched: true))
                .isAuthorized)
        #expect(await h2.enclave.status.failedBiometricAttempts == 0)
    }

    @Test("The biometric limit survives a restart")
    func limitsPersist() async throws {
        let (h, card) = try await Self.provisioned(.phone, .face)
        for _ in 0..<5 {
            _ = try await h.enclave.authorizePayment(await Self.request(h, card), evidence: .faceID(matched: false))
        }
        let restarted = try h.restarted()
        #expect(await restarted.enclave.paymentMethods() == [.passcode])
        #expect(await restarted.enclave.status.failedBiometricAttempts == 5)
    }

    @Test("A method the device lacks is refused")
    func missingMethods() async throws {
        let (touch, touchCard) = try await Self.provisioned(.phone, .touch)
        await expectCode(.methodUnavailable) {
            try await touch.enclave.authorizePayment(
                await Self.request(touch, touchCard), evidence: .faceID(matched: true))
        }
        await expectCode(.methodUnavailable) {
            try await touch.enclave.authorizePayment(await Self.request(touch, touchCard), evidence: .doubleClick)
        }
        let (face, faceCard) = try await Self.provisioned(.phone, .face)
        await expectCode(.methodUnavailable) {
            try await face.enclave.authorizePayment(
                await Self.request(face, faceCard), evidence: .touchID(matched: true))
        }
        let (watch, watchCard) = try await Self.provisioned(.watch, .none)
        try await watch.enclave.putOnWrist()
        _ = try await watch.enclave.unlock(.passcode(Harness.secret(Harness.passcode)))
        await expectCode(.methodUnavailable) {
            try await watch.enclave.authorizePayment(
                await Self.request(watch, watchCard), evidence: .faceID(matched: true))
        }
        // An iPad has no NFC: no contactless authorization; in-app works.
        let (ipad, ipadCard) = try await Self.provisioned(.ipad, .touch)
        await expectCode(.unsupportedDevice) {
            try await ipad.enclave.authorizePayment(
                await Self.request(ipad, ipadCard), evidence: .touchID(matched: true))
        }
        #expect(
            try await ipad.enclave.authorizePayment(
                await Self.request(ipad, ipadCard, .inApp), evidence: .touchID(matched: true)
            ).isAuthorized)
        // A Mac without Touch ID authorizes nothing and holds no card.
        let mac = try await Harness(.mac, .none)
        await expectCode(.unsupportedDevice) {
            try await mac.enclave.provisioningBinding(challenge: await mac.element.challenge())
        }
        await expectCode(.unsupportedDevice) {
            try await mac.enclave.authorizePayment(
                await Self.request(mac, touchCard, .web), evidence: .passcode(Harness.secret(Harness.passcode)))
        }
    }

    @Test("Devices exist only with their real biometry")
    func profiles() throws {
        #expect(throws: SecureElementError.self) { try DeviceProfile(kind: .watch, biometry: .face, account: "a") }
        #expect(throws: SecureElementError.self) { try DeviceProfile(kind: .phone, biometry: .none, account: "a") }
        #expect(throws: SecureElementError.self) { try DeviceProfile(kind: .mac, biometry: .face, account: "a") }
        #expect(throws: SecureElementError.self) {
            try DeviceProfile(kind: .phone, biometry: .face, account: "Bad Name")
        }
        let mac = try DeviceProfile(kind: .mac, biometry: .none, account: "alice")
        #expect(!mac.authorizesPayments && mac.transactionTypes.isEmpty)
        #expect(try DeviceProfile(kind: .watch, biometry: .none, account: "a").transactionTypes.contains(.contactless))
        let json = Data(#"{"kind":"watch","biometry":"face","account":"a"}"#.utf8)
        #expect(throws: (any Error).self) { try JSONDecoder().decode(DeviceProfile.self, from: json) }
    }

    @Test("With biometrics off for payments only the passcode is offered")
    func biometricsOff() async throws {
        let (h, card) = try await Self.provisioned(.phone, .face)
        try await h.enclave.setBiometricsForPayments(false)
        #expect(await h.enclave.paymentMethods() == [.passcode])
        await expectCode(.methodNotOffered) {
            try await h.enclave.authorizePayment(await Self.request(h, card), evidence: .faceID(matched: true))
        }
        #expect(
            try await h.enclave.authorizePayment(
                await Self.request(h, card), evidence: .passcode(Harness.secret(Harness.passcode))
            ).isAuthorized)
        let watch = try await Harness(.watch, .none)
        await expectCode(.methodUnavailable) { try await watch.enclave.setBiometricsForPayments(true) }
    }

    @Test("Wrong passcodes are counted and delayed: 1 minute after the fifth")
    func passcodeDelay() async throws {
        let (h, card) = try await Self.provisioned(.phone, .face)
        try await h.enclave.setBiometricsForPayments(false)
        for attempt in 1...5 {
            let outcome = try await h.enclave.authorizePayment(
                await Self.request(h, card), evidence: .passcode(Harness.secret("000000")))
            #expect(outcome.offered == (attempt < 5 ? [.passcode] : []))
        }
        await expectCode(.lockedOut) {
            try await h.enclave.authorizePayment(
                await Self.request(h, card), evidence: .passcode(Harness.secret(Harness.passcode)))
        }
        // The delay is applied again after a restart.
        await expectCode(.lockedOut) {
            let restarted = try h.restarted()
            return try await restarted.enclave.unlock(.passcode(Harness.secret(Harness.passcode)))
        }
        h.clock.advance(by: 61)
        #expect(
            try await h.enclave.authorizePayment(
                await Self.request(h, card), evidence: .passcode(Harness.secret(Harness.passcode))
            ).isAuthorized)
        #expect(await h.enclave.status.failedPasscodeAttempts == 0)
    }

    @Test("Watch: paid only unlocked on the wrist, by double-click; locked on removal")
    func watchRules() async throws {
        let (w, card) = try await Self.provisioned(.watch, .none)
        #expect(await w.enclave.status.lock == .offWrist)
        await expectCode(.deviceLocked) {
            try await w.enclave.authorizePayment(await Self.request(w, card), evidence: .doubleClick)
        }
        await expectCode(.notOnWrist) { try await w.enclave.unlock(.passcode(Harness.secret(Harness.passcode))) }
        try await w.enclave.putOnWrist()
        await expectCode(.illegalTransition) { try await w.enclave.putOnWrist() }
        await expectCode(.deviceLocked) {
            try await w.enclave.authorizePayment(await Self.request(w, card), evidence: .doubleClick)
        }
        #expect(try await w.enclave.unlock(.passcode(Harness.secret("1111"))) == .rejected(offered: [.passcode]))
        #expect(try await w.enclave.unlock(.passcode(Harness.secret(Harness.passcode))) == .unlocked)
        #expect(await w.enclave.paymentMethods() == [.doubleClick])
        await expectCode(.methodNotOffered) {
            try await w.enclave.authorizePayment(
                await Self.request(w, card), evidence: .passcode(Harness.secret(Harness.passcode)))
        }
        let outcome = try await w.enclave.authorizePayment(await Self.request(w, card), evidence: .doubleClick)
        guard case .authorized(let signed) = outcome else {
            Issue.record("an unlocked watch on the wrist authorizes by double-click")
            return
        }
        #expect(signed.statement.method == .doubleClick)
        try await w.enclave.takeOffWrist()
        await expectCode(.illegalTransition) { try await w.enclave.takeOffWrist() }
        await expectCode(.deviceLocked) {
            try await w.enclave.authorizePayment(await Self.request(w, card), evidence: .doubleClick)
        }
        // Put on again: locked until the passcode.
        try await w.enclave.putOnWrist()
        #expect(await w.enclave.status.lock == .locked)
        await expectCode(.unsupportedDevice) {
            let phone = try await Harness(.phone, .face)
            try await phone.enclave.putOnWrist()
        }
    }

    @Test("Phones unlock with a biometric match or the passcode, and lock again")
    func phoneLock() async throws {
        let h = try await Harness(.phone, .touch)
        #expect(await h.enclave.status.lock == .locked)
        #expect(try await h.enclave.unlock(.touchID(matched: false)) == .rejected(offered: [.touchID, .passcode]))
        #expect(try await h.enclave.unlock(.touchID(matched: true)) == .unlocked)
        await h.enclave.lock()
        #expect(await h.enclave.status.lock == .locked)
        await expectCode(.methodUnavailable) { try await h.enclave.unlock(.doubleClick) }
        let watch = try await Harness(.watch, .none)
        try await watch.enclave.putOnWrist()
        await expectCode(.methodNotOffered) { try await watch.enclave.unlock(.doubleClick) }
    }

    @Test("Without a card there is no Authorization Random and no authorization; without a passcode no card")
    func noAuthorizationRandom() async throws {
        let h = try await Harness(.phone, .face)
        let card = CardIdentifier(random: h.random)
        await expectCode(.notProvisioned) {
            try await h.enclave.authorizePayment(await Self.request(h, card), evidence: .faceID(matched: true))
        }
        let bare = try await Harness(.phone, .face, passcode: nil)
        await expectCode(.passcodeRequired) {
            try await bare.enclave.provisioningBinding(challenge: await bare.element.challenge())
        }
        #expect(!(await bare.enclave.status.hasAuthorizationRandom))
    }

    @Test("Changing the passcode needs the current one; removing it discards the AR")
    func passcodeChanges() async throws {
        let (h, _) = try await Self.provisioned(.phone, .face)
        await expectCode(.passcodeIncorrect) { try await h.enclave.setPasscode(Harness.secret("13579"), current: nil) }
        await expectCode(.passcodeIncorrect) {
            try await h.enclave.setPasscode(Harness.secret("13579"), current: Harness.secret("0000"))
        }
        await expectCode(.invalidArgument) {
            try await h.enclave.setPasscode(Harness.secret("12"), current: Harness.secret(Harness.passcode))
        }
        try await h.enclave.setPasscode(Harness.secret("13579"), current: Harness.secret(Harness.passcode))
        #expect(await h.enclave.status.hasAuthorizationRandom)
        await expectCode(.passcodeIncorrect) {
            try await h.enclave.removePasscode(current: Harness.secret(Harness.passcode))
        }
        try await h.enclave.removePasscode(current: Harness.secret("13579"))
        #expect(!(await h.enclave.status.hasAuthorizationRandom))
        #expect(!(await h.enclave.status.hasPasscode))
    }

    @Test("Statements round-trip and malformed ones are refused")
    func statementFormat() async throws {
        let (h, card) = try await Self.provisioned(.phone, .face)
        let amount = try PaymentAmount(minorUnits: 999, currency: 978)
        let signed = try await h.authorization(card, type: .inApp, amount: amount)
        let parsed = try SignedEnclaveStatement(encoded: signed.encoded)
        #expect(parsed == signed)
        #expect(parsed.statement.amount == amount && parsed.statement.card == card)
        #expect(parsed.statement.transactionType == .inApp && parsed.statement.method == .faceID)
        var bytes = signed.encoded
        #expect(throws: SecureElementError.self) { try SignedEnclaveStatement(encoded: bytes.prefix(140)) }
        bytes[5] = 9  // unknown kind
        #expect(throws: SecureElementError.self) { try SignedEnclaveStatement(encoded: bytes) }
        bytes = signed.encoded
        bytes[4 + 1 + 1 + 32 + 16 + 8] = 2  // AR presence flag 2
        #expect(throws: SecureElementError.self) { try SignedEnclaveStatement(encoded: bytes) }
        bytes = signed.encoded
        bytes[4 + 1 + 1 + 32 + 16 + 8 + 33] = 7  // unknown method
        #expect(throws: SecureElementError.self) { try SignedEnclaveStatement(encoded: bytes) }
        #expect(throws: SecureElementError.self) { try PaymentAmount(minorUnits: -1, currency: 840) }
        #expect(throws: SecureElementError.self) { try PaymentAmount(minorUnits: 1, currency: 1000) }
        #expect("\(AuthenticationEvidence.passcode(Harness.secret("246810")))" == "passcode (redacted)")
    }
}
