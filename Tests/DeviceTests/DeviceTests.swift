import CardBasics
import Device
import DeviceTestSupport
import EMV
import Foundation
import OrchardCrypto
import OrchardRuntime
import SecureElement
import Testing
import Wallet

@Suite("Device: factory, files, flows")
struct DeviceTests {
    @Test("The factory writes the store and a 0600 storage key, once per name")
    func factory() async throws {
        let directory = try TemporaryDirectory()
        let (_, identity) = try await makeDevice(in: directory.deployment)
        let keyPath = Device.storageKeyPath(of: "alice-phone", in: directory.deployment)
        #expect(SecureFile.mode(of: keyPath) == 0o600)
        #expect(SecureFile.mode(of: Device.directory(of: "alice-phone", in: directory.deployment)) == 0o700)
        #expect(SecureFile.mode(of: try Device.databasePath(of: "alice-phone", in: directory.deployment)) == 0o600)
        #expect(try SecureFile.readSecret(keyPath).count == 32)
        #expect(try Device.identity(of: "alice-phone", in: directory.deployment) == identity)
        #expect(Device.names(in: directory.deployment) == ["alice-phone"])
        await expectError(code(DeviceError.Code.alreadyExists)) {
            try Device.create(
                in: directory.deployment, name: "alice-phone",
                profile: try DeviceProfile(kind: .watch, biometry: .none, account: "alice"))
        }
        await expectError(code(DeviceError.Code.invalidArgument)) {
            try Device.create(
                in: directory.deployment, name: "../evil",
                profile: try DeviceProfile(kind: .phone, biometry: .face, account: "alice"))
        }
        await expectError(code(DeviceError.Code.notFound)) {
            try await Device.open(in: directory.deployment, name: "nobody")
        }
        // A storage key readable by others is not used.
        chmod(keyPath, 0o644)
        await expectError(code(DeviceError.Code.insecurePermissions)) {
            try await Device.open(in: directory.deployment, name: "alice-phone")
        }
    }

    @Test("A card is installed, shown in the wallet with display data only, and pays after Face ID")
    func provisionAndPay() async throws {
        let directory = try TemporaryDirectory()
        let (device, identity) = try await makeDevice(in: directory.deployment)
        let card = try await device.installCard(
            envelope: try TestCards.envelope(for: identity, dpan: TestCards.visaDPAN), display: TestCards.display)
        #expect(card.network == "visa" && card.deviceAccountSuffix == "0119" && card.suffix == "4242")
        #expect(await device.wallet.defaultCard?.id == card.id)
        // Without authentication nothing is released.
        let refused = try await tap(device)
        #expect(refused.card == nil)
        guard case .authorized = try await device.authenticate(.faceID(matched: true)) else {
            Issue.record("Face ID should authorize")
            return
        }
        let outcome = try await tap(device)
        #expect(outcome.status == .onlineRequest)
        let verification = try CryptogramVerifier().verify(
            ChipAuthorizationData(try #require(outcome.card)), issuerMasterKey: TestCards.issuerMasterKey,
            lastSeenATC: nil)
        #expect(verification.isValid)
        let status = await device.status()
        #expect(status.cards.count == 1 && status.defaultCard == card.id && status.contactless == "idle")
    }

    @Test("Automatic selection and a hand-made choice decide which card the terminal gets")
    func cardChoice() async throws {
        let directory = try TemporaryDirectory()
        let (device, identity) = try await makeDevice(in: directory.deployment)
        let visa = try await device.installCard(
            envelope: try TestCards.envelope(for: identity, dpan: TestCards.visaDPAN), display: TestCards.display)
        let mastercard = try await device.installCard(
            envelope: try TestCards.envelope(for: identity, dpan: TestCards.mastercardDPAN, network: "masterCard"),
            display: CardDisplayInput(type: .debit, suffix: "4444", displayName: "Orchard Debit"))
        try await device.wallet.setAutomaticSelection(true, id: mastercard.id)
        // The terminal asks for Mastercard: the automatic card is offered and authorized.
        guard case .authorized = try await device.authenticate(.faceID(matched: true), card: mastercard.id) else {
            Issue.record("not authorized")
            return
        }
        let automatic = try await tap(device, networks: ["masterCard"])
        #expect(automatic.card?.pan == TestCards.mastercardDPAN)
        // Chosen by hand: the Visa card, then authenticated.
        try await device.chooseCard(visa.id)
        _ = try await device.authenticate(.faceID(matched: true))
        let chosen = try await tap(device, networks: ["masterCard"])
        #expect(chosen.card?.pan == TestCards.visaDPAN)
        // Removing a card deletes it from both the wallet and the Secure Element.
        try await device.removeCard(mastercard.id)
        #expect(await device.wallet.allCards.map(\.id) == [visa.id])
        #expect(await device.secureElement.cards().map(\.card.hex) == [visa.id])
    }

    @Test("A watch pays by double-click only while unlocked on the wrist")
    func watchDoubleClick() async throws {
        let directory = try TemporaryDirectory()
        let (watch, identity) = try await makeDevice(
            in: directory.deployment, name: "alice-watch", kind: .watch, biometry: .none)
        _ = try await watch.installCard(
            envelope: try TestCards.envelope(for: identity, dpan: TestCards.visaDPAN), display: TestCards.display)
        await expectError(code(SecureElementError.Code.deviceLocked)) { try await watch.doubleClick() }
        try await watch.secureEnclave.putOnWrist()
        await expectError(code(SecureElementError.Code.deviceLocked)) { try await watch.doubleClick() }
        _ = try await watch.unlock(.passcode(SecureBytes(Array(TestCards.passcode.utf8))))
        let outcome = try await watch.doubleClick()
        guard case .authorized = outcome else {
            Issue.record("an unlocked watch on the wrist authorizes by double-click")
            return
        }
        let paid = try await tap(watch)
        let verified = try CryptogramVerifier().verify(
            ChipAuthorizationData(try #require(paid.card)), issuerMasterKey: TestCards.issuerMasterKey, lastSeenATC: nil
        )
        guard case .valid(let result) = verified else {
            Issue.record("the watch's cryptogram must verify")
            return
        }
        #expect(result.cdcvm == CDCVMResult(performed: true, method: .wristDetection))
        try await watch.secureEnclave.takeOffWrist()
        await expectError(code(SecureElementError.Code.deviceLocked)) { try await watch.doubleClick() }
        // An iPad never joins a field.
        let (ipad, _) = try await makeDevice(
            in: directory.deployment, name: "alice-ipad", kind: .ipad, biometry: .touch)
        await expectError(code(DeviceError.Code.unsupported)) { try await ipad.fieldOn() }
    }

    @Test("D4: Turning the passcode off, signing out or erasing terminates every card, in the wallet too")
    func resets() async throws {
        let directory = try TemporaryDirectory()
        let (device, identity) = try await makeDevice(in: directory.deployment)
        let card = try await device.installCard(
            envelope: try TestCards.envelope(for: identity, dpan: TestCards.visaDPAN), display: TestCards.display)
        let terminated = try await device.removePasscode(current: SecureBytes(Array(TestCards.passcode.utf8)))
        #expect(terminated.map(\.hex) == [card.id])
        #expect(try await device.wallet.card(id: card.id).state == .terminated)
        #expect(await device.wallet.defaultCard == nil)

        let (other, otherIdentity) = try await makeDevice(in: directory.deployment, name: "bob-phone")
        let otherCard = try await other.installCard(
            envelope: try TestCards.envelope(for: otherIdentity, dpan: TestCards.visaDPAN), display: TestCards.display)
        try await other.wallet.recordUse(Contact(name: "Bob", emailAddress: "bob@example.com"), as: .contact)
        try await other.erase()
        #expect(await other.wallet.allCards.isEmpty)
        #expect(await other.secureElement.cards().isEmpty)
        #expect(try await other.wallet.recentContacts(.contact).isEmpty)
        await expectError(code(SecureElementError.Code.cardNotFound)) {
            try await other.secureElement.card(try CardIdentifier(hex: otherCard.id))
        }
    }

    @Test("An AR reset while the device was not running is applied when it opens")
    func resetWhileClosed() async throws {
        let directory = try TemporaryDirectory()
        let clock = ManualClock(now: Date(timeIntervalSince1970: 1_750_000_000))
        var (device, identity) = try await makeDevice(in: directory.deployment, clock: clock)
        let card = try await device.installCard(
            envelope: try TestCards.envelope(for: identity, dpan: TestCards.visaDPAN), display: TestCards.display)
        try await device.secureEnclave.resetAuthorizationRandom(reason: .signOut)  // the SE is not told now
        device = try await Device.open(in: directory.deployment, name: "alice-phone", clock: clock)
        #expect(try await device.wallet.card(id: card.id).state == .terminated)
        #expect(try await device.secureElement.card(try CardIdentifier(hex: card.id)).state == .terminated)
        _ = identity
    }

    @Test("State survives a restart: cards, ATC, settings, limits")
    func restart() async throws {
        let directory = try TemporaryDirectory()
        let clock = ManualClock(now: Date(timeIntervalSince1970: 1_750_000_000))
        var (device, identity) = try await makeDevice(in: directory.deployment, clock: clock)
        let card = try await device.installCard(
            envelope: try TestCards.envelope(for: identity, dpan: TestCards.visaDPAN), display: TestCards.display)
        for _ in 0..<2 {
            _ = try await device.authenticate(.faceID(matched: true))
            _ = try await tap(device)
        }
        _ = try await device.authenticate(.faceID(matched: false))
        try await device.wallet.update(WalletSettings(allowWebsiteQueries: false))
        device = try await Device.open(in: directory.deployment, name: "alice-phone", clock: clock)
        #expect(await device.wallet.defaultCard?.id == card.id)
        #expect(await device.wallet.currentSettings.allowWebsiteQueries == false)
        #expect(await device.secureEnclave.status.failedBiometricAttempts == 1)
        #expect(try await device.secureElement.lastATC(try CardIdentifier(hex: card.id)) == 2)
        _ = try await device.authenticate(.faceID(matched: true))
        #expect(try await tap(device).card?.atc == 3)
        _ = identity
    }
}
