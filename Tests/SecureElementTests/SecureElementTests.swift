import EMV
import Foundation
import OrchardCrypto
import PaymentCredential
import SecureElement
import Testing

@Suite("Secure Element: applets, authorizations, termination")
struct SecureElementTests {
    @Test("A Visa card pays once per authorization; the terminal's cryptogram verifies with CDCVM face")
    func visaPayment() async throws {
        let h = try await Harness()
        let card = try await h.provision(dpan: visaDPAN)
        #expect(card.state == .active && card.deviceAccountSuffix == "5678" && card.network == "visa")
        try await h.element.authorizeContactless(try await h.authorization(card.card))
        let outcome = try await h.tap()
        #expect(outcome.status == .onlineRequest, "\(outcome)")
        #expect(outcome.card?.pan == visaDPAN)
        guard case .valid(let verified) = try Harness.verify(outcome, dpan: visaDPAN) else {
            Issue.record("the cryptogram does not verify")
            return
        }
        #expect(verified.atc == 1)
        #expect(verified.cdcvm == CDCVMResult(performed: true, method: .face))
        #expect(try await h.element.lastATC(card.card) == 1)
        // Single use: the next tap without a new authorization releases nothing.
        let again = try await h.tap()
        #expect(again.status != .onlineRequest && again.card == nil)
        #expect(try await h.element.lastATC(card.card) == 1)
    }

    @Test("A Mastercard card pays through GENERATE AC; passcode is the CDCVM")
    func mastercardPayment() async throws {
        let h = try await Harness(.phone, .touch)
        let card = try await h.provision(dpan: mastercardDPAN, network: "masterCard")
        for _ in 0..<3 {
            _ = try await h.enclave.authorizePayment(
                AuthorizationRequest(
                    transactionType: .contactless, card: card.card, amount: nil,
                    challenge: await h.element.challenge()),
                evidence: .touchID(matched: false))
        }
        let signed = try await h.authorization(card.card, evidence: .passcode(Harness.secret(Harness.passcode)))
        try await h.element.authorizeContactless(signed)
        let outcome = try await h.tap(kernel: .mastercard)
        #expect(outcome.status == .onlineRequest, "\(outcome)")
        guard case .valid(let verified) = try Harness.verify(outcome, dpan: mastercardDPAN) else {
            Issue.record("the cryptogram does not verify")
            return
        }
        #expect(verified.cdcvm == CDCVMResult(performed: true, method: .passcode))
    }

    @Test("D1: Without an authorization the card answers SELECT and releases nothing")
    func nothingWithoutAuthorization() async throws {
        let h = try await Harness()
        let card = try await h.provision(dpan: visaDPAN)
        // Nothing presented: the PPSE is not found.
        let none = try await h.tap()
        #expect(none.status != .onlineRequest && none.card == nil)
        try await h.element.present(card.card)
        let outcome = try await h.tap()
        #expect(outcome.status != .onlineRequest && outcome.card == nil)
        #expect(outcome.refusal == .conditionsNotSatisfied)
        // No answer carries the DPAN, packed or in ASCII.
        let packed = try EMVNumeric.compressedNumeric(visaDPAN)
        for exchange in outcome.transcript {
            #expect(
                !exchange.response.containsSequence(packed) && !exchange.response.containsSequence(Array(visaDPAN.utf8))
            )
        }
        #expect(try await h.element.lastATC(card.card) == 0)
    }

    @Test("D2: A replayed authorization is refused, also after a restart")
    func replay() async throws {
        let h = try await Harness()
        let card = try await h.provision(dpan: visaDPAN)
        let signed = try await h.authorization(card.card)
        try await h.element.authorizeContactless(signed)
        #expect(try await h.tap().status == .onlineRequest)
        await expectCode(.authorizationReplayed) { try await h.element.authorizeContactless(signed) }
        let restarted = try h.restarted()
        await expectCode(.authorizationReplayed) { try await restarted.element.authorizeContactless(signed) }
        // A statement made for a challenge that was never issued is refused too.
        let forged = try await h.enclave.authorizePayment(
            AuthorizationRequest(
                transactionType: .contactless, card: card.card, amount: nil,
                challenge: try AuthorizationChallenge(bytes: [UInt8](repeating: 7, count: 16))),
            evidence: .faceID(matched: true))
        guard case .authorized(let unsolicited) = forged else { throw SecureElementError(.internalFailure, "") }
        await expectCode(.authorizationReplayed) { try await h.element.authorizeContactless(unsolicited) }
    }

    @Test("D3: An authorization is valid only for its transaction type")
    func transactionTypes() async throws {
        let h = try await Harness()
        let card = try await h.provision(dpan: visaDPAN)
        let amount = try PaymentAmount(minorUnits: 500, currency: 840)
        let inApp = try await h.authorization(card.card, type: .inApp, amount: amount)
        await expectCode(.wrongTransactionType) { try await h.element.authorizeContactless(inApp) }
        let web = try await h.authorization(card.card, type: .web, amount: amount)
        await expectCode(.wrongTransactionType) { try await h.element.authorizeContactless(web) }
        let contactless = try await h.authorization(card.card, type: .contactless, amount: amount)
        await expectCode(.wrongTransactionType) {
            try await h.element.authorizeRemote(contactless, card: card.card, amount: amount)
        }
        // Nothing was armed by the refused statements.
        let outcome = try await h.tap(amount: 500)
        #expect(outcome.card == nil)
        // The right types pass, for the named card and amount only.
        let good = try await h.authorization(card.card, type: .inApp, amount: amount)
        #expect(try await h.element.authorizeRemote(good, card: card.card, amount: amount) == .inApp)
        let other = try PaymentAmount(minorUnits: 501, currency: 840)
        let mismatched = try await h.authorization(card.card, type: .web, amount: amount)
        await expectCode(.wrongCard) { try await h.element.authorizeRemote(mismatched, card: card.card, amount: other) }
    }

    @Test("A named amount caps what the terminal may charge")
    func amountCap() async throws {
        let h = try await Harness()
        let card = try await h.provision(dpan: visaDPAN)
        let amount = try PaymentAmount(minorUnits: 1000, currency: 840)
        try await h.element.authorizeContactless(try await h.authorization(card.card, amount: amount))
        let over = try await h.tap(amount: 5000)
        #expect(over.card == nil && over.refusal == .conditionsNotSatisfied)
        // Still armed (nothing was used): the right amount passes.
        let right = try await h.tap(amount: 1000)
        #expect(right.status == .onlineRequest)
        let euro = try PaymentAmount(minorUnits: 1000, currency: 978)
        try await h.element.authorizeContactless(try await h.authorization(card.card, amount: euro))
        #expect(try await h.tap(amount: 1000).card == nil)  // the terminal charges USD
    }

    @Test("D3: Commands must come from the NFC field, while a field is present")
    func fieldRules() async throws {
        let h = try await Harness()
        let card = try await h.provision(dpan: visaDPAN)
        try await h.element.authorizeContactless(try await h.authorization(card.card))
        let select = try CommandAPDU.select(CommandAPDU.ppseName).encoded()
        await expectCode(.fieldNotActive) { try await h.element.transceive(select, from: .nfcField) }
        try await h.element.fieldOn()
        await expectCode(.illegalTransition) { try await h.element.fieldOn() }
        await expectCode(.notFromField) { try await h.element.transceive(select, from: .applicationProcessor) }
        #expect(await h.element.contactlessStatus == .inField(presented: card.card, authorized: true))
        try await h.element.fieldOff()
        await expectCode(.illegalTransition) { try await h.element.fieldOff() }
        // The unused authorization is still armed after the field left.
        #expect(await h.element.contactlessStatus == .armed(card: card.card))
        #expect(try await h.tap().status == .onlineRequest)
    }

    @Test("Authorizations and challenges expire")
    func expiry() async throws {
        let h = try await Harness()
        let card = try await h.provision(dpan: visaDPAN)
        try await h.element.authorizeContactless(try await h.authorization(card.card))
        h.clock.advance(by: 61)
        #expect(try await h.tap().card == nil)
        let challenge = await h.element.challenge()
        let outcome = try await h.enclave.authorizePayment(
            AuthorizationRequest(transactionType: .contactless, card: card.card, amount: nil, challenge: challenge),
            evidence: .faceID(matched: true))
        guard case .authorized(let signed) = outcome else { throw SecureElementError(.internalFailure, "") }
        h.clock.advance(by: 61)
        await expectCode(.authorizationExpired) { try await h.element.authorizeContactless(signed) }
    }

    @Test("A statement from another Secure Enclave, or altered, is refused")
    func foreignStatements() async throws {
        let h = try await Harness()
        let other = try await Harness(seed: "another device")
        let card = try await h.provision(dpan: visaDPAN)
        let otherCard = try await other.provision(dpan: visaDPAN)
        // Signed by the other enclave over a challenge of ours.
        let foreign = try await other.enclave.authorizePayment(
            AuthorizationRequest(
                transactionType: .contactless, card: otherCard.card, amount: nil, challenge: await h.element.challenge()
            ),
            evidence: .faceID(matched: true))
        guard case .authorized(let foreignStatement) = foreign else { throw SecureElementError(.internalFailure, "") }
        await expectCode(.invalidAuthorization) { try await h.element.authorizeContactless(foreignStatement) }
        // One byte of the amount changed after signing.
        let amount = try PaymentAmount(minorUnits: 100, currency: 840)
        var bytes = try await h.authorization(card.card, amount: amount).encoded
        bytes[4 + 1 + 1 + 32 + 16 + 8 + 33 + 2 + 17 + 8] ^= 0x01
        let altered = try SignedEnclaveStatement(encoded: bytes)
        await expectCode(.invalidAuthorization) { try await h.element.authorizeContactless(altered) }
        // A status statement is not a payment authorization.
        let status = try await h.enclave.status(challenge: await h.element.challenge())
        await expectCode(.invalidAuthorization) { try await h.element.authorizeContactless(status) }
    }

    @Test("D4: Resetting the Authorization Random terminates every card; old authorizations fail")
    func authorizationRandomReset() async throws {
        for reason in AuthorizationRandomResetReason.allCases {
            let h = try await Harness()
            let first = try await h.provision(dpan: visaDPAN)
            let second = try await h.provision(dpan: mastercardDPAN, network: "masterCard")
            let old = try await h.authorization(first.card)
            try await h.enclave.resetAuthorizationRandom(reason: reason)
            let terminated = try await h.element.synchronize(
                try await h.enclave.status(challenge: await h.element.challenge()))
            #expect(Set(terminated) == [first.card, second.card])
            #expect(await h.element.cards().allSatisfy { $0.state == .terminated })
            // Made before the reset: older than the state the Secure Element has seen.
            await expectCode(.rollbackDetected) { try await h.element.authorizeContactless(old) }
            await expectCode(.notProvisioned) { try await h.authorization(first.card) }
            await expectCode(.cardTerminated) { try await h.element.present(first.card) }
            // Terminated survives a restart; a new provisioning makes a new AR and a working card.
            let restarted = try h.restarted()
            #expect(await restarted.element.cards().allSatisfy { $0.state == .terminated })
            let again = try await restarted.provision(dpan: visaDPAN)
            #expect(again.card != first.card && again.state == .active)
            try await restarted.element.authorizeContactless(try await restarted.authorization(again.card))
            #expect(try await restarted.tap().status == .onlineRequest)
        }
    }

    @Test("A new AR seen at provisioning or payment terminates the cards of the old one")
    func authorizationRandomChangeWithoutStatus() async throws {
        let h = try await Harness()
        let first = try await h.provision(dpan: visaDPAN)
        // The passcode goes (AR with it) and comes back; the SE was not told.
        try await h.enclave.removePasscode(current: Harness.secret(Harness.passcode))
        try await h.enclave.setPasscode(Harness.secret(Harness.passcode), current: nil)
        let second = try await h.provision(dpan: mastercardDPAN, network: "masterCard")
        #expect(try await h.element.card(first.card).state == .terminated)
        #expect(try await h.element.card(second.card).state == .active)

        let other = try await Harness(seed: "payment sees it")
        let card = try await other.provision(dpan: visaDPAN)
        try await other.enclave.erase()
        try await other.enclave.setPasscode(Harness.secret(Harness.passcode), current: nil)
        // A new AR, never delivered to the Secure Element.
        _ = try await other.enclave.provisioningBinding(challenge: await other.element.challenge())
        await expectCode(.cardTerminated) {
            try await other.element.authorizeContactless(try await other.authorization(card.card))
        }
        #expect(try await other.element.card(card.card).state == .terminated)
    }

    @Test("D4: A Secure Enclave restored from an older snapshot is detected and the cards terminated")
    func rollback() async throws {
        let h = try await Harness()
        let card = try await h.provision(dpan: visaDPAN)
        let snapshot = try Harness.snapshot(h.enclaveStorage, kinds: ["state"])
        // The enclave moves on (failed attempts), and the SE sees its newer generation.
        for _ in 0..<4 {
            _ = try await h.enclave.authorizePayment(
                AuthorizationRequest(
                    transactionType: .contactless, card: card.card, amount: nil,
                    challenge: await h.element.challenge()),
                evidence: .faceID(matched: false))
        }
        try await h.element.authorizeContactless(
            try await h.authorization(card.card, evidence: .passcode(Harness.secret(Harness.passcode))))
        // Restore the old enclave state (failure counters back to zero).
        let restored = try h.restarted(enclaveStorage: snapshot)
        await expectCode(.rollbackDetected) {
            try await restored.element.synchronize(
                try await restored.enclave.status(challenge: await restored.element.challenge()))
        }
        #expect(try await restored.element.card(card.card).state == .terminated)
    }

    @Test("P3: A tampered, misaddressed or mislabelled personalisation envelope is refused and installs nothing")
    func envelopes() async throws {
        let h = try await Harness()
        let data = try Harness.personalisation(dpan: visaDPAN)
        let good = try h.envelope(data)
        // A flipped bit anywhere: the layout (invalidEnvelope) or the signature (untrustedInstall) refuses it.
        for index in [0, 1, 4, 21, 40, 70, good.count / 2, good.count - 1] {
            var bad = good
            bad[index] ^= 0x80
            let binding = try await h.enclave.provisioningBinding(challenge: await h.element.challenge())
            let code = await Self.refusal { try await h.element.install(bad, binding: binding) }
            #expect(code == .invalidEnvelope || code == .untrustedInstall, "\(index)")
        }
        let other = try await Harness(seed: "other element")
        let misaddressed = try h.envelope(data, to: other.element.publicKey)
        await expectCode(.invalidEnvelope) {
            try await h.element.install(
                misaddressed,
                binding: try await h.enclave.provisioningBinding(challenge: await h.element.challenge()))
        }
        let mislabelled = try h.envelope(data, purpose: "token-service>pay-server:card-data")
        await expectCode(.invalidEnvelope) {
            try await h.element.install(
                mislabelled,
                binding: try await h.enclave.provisioningBinding(challenge: await h.element.challenge()))
        }
        let amex = try h.envelope(try Harness.personalisation(dpan: "374245001751006", network: "amex"))
        await expectCode(.unsupportedNetwork) {
            try await h.element.install(
                amex, binding: try await h.enclave.provisioningBinding(challenge: await h.element.challenge())
            )
        }
        #expect(await h.element.cards().isEmpty)
        // The binding must be a fresh provisioning binding of the paired enclave.
        let status = try await h.enclave.status(challenge: await h.element.challenge())
        await expectCode(.invalidAuthorization) { try await h.element.install(good, binding: status) }
        let binding = try await h.enclave.provisioningBinding(challenge: await h.element.challenge())
        let installed = try await h.element.install(good, binding: binding)
        await expectCode(.authorizationReplayed) { try await h.element.install(good, binding: binding) }
        // The same token again is the same card (a retried provisioning).
        let retried = try await h.element.install(
            good, binding: try await h.enclave.provisioningBinding(challenge: await h.element.challenge()))
        let count = await h.element.cards().count
        #expect(retried == installed && count == 1)
    }

    @Test("A well-sealed envelope whose personalisation data is out of form installs nothing")
    func malformedPersonalisation() async throws {
        let h = try await Harness()
        let good = try Harness.personalisation(dpan: visaDPAN).encoded().unsafeCopyOfBytes()
        for plaintext in [Array(good.dropLast()), good + [0x7F, 0, 0], [0, 0, 1, 2] + Array(good.dropFirst(4))] {
            let envelope = try plaintext.withUnsafeBytes { bytes in
                try SealedEnvelope.seal(
                    bytes, to: h.element.publicKey, purpose: PersonalisationData.envelopePurpose, random: h.random)
            }
            let signed = try SignedPersonalisation(
                installID: h.random.bytes(16), certificateDigest: SHA256.hash(Harness.certificate), envelope: envelope,
                sign: { content in try Harness.tokenServiceKey.signature(for: content) })
            await expectCode(.invalidEnvelope) {
                try await h.element.install(
                    signed.serialized,
                    binding: try await h.enclave.provisioningBinding(challenge: await h.element.challenge()))
            }
        }
        #expect(await h.element.cards().isEmpty)
    }

    /// The code `body` was refused with; nil when it succeeded (or threw something else).
    static func refusal(_ body: () async throws -> CardDisplayData) async -> SecureElementError.Code? {
        do {
            _ = try await body()
            return nil
        } catch {
            return (error as? SecureElementError)?.code
        }
    }

    @Test("S1: Only the pinned token service key installs, for this SE's certificate, each install once")
    func onlyTheTokenServiceInstalls() async throws {
        let h = try await Harness()
        let data = try Harness.personalisation(dpan: visaDPAN)
        func install(_ bytes: [UInt8]) async throws -> CardDisplayData {
            try await h.element.install(
                bytes, binding: try await h.enclave.provisioningBinding(challenge: await h.element.challenge()))
        }
        // Anyone with the SE's certificate can seal to its key; a relay (the Pay server) signing with its own key,
        // or anyone else's, installs nothing.
        for key in [try P256.Signing.PrivateKey(), try P256.Signing.PrivateKey()] {
            await expectCode(.untrustedInstall) { try await install(try h.envelope(data, signer: key)) }
        }
        // The bare envelope, without the signed wrapper, is not an install.
        let sealed = try data.encoded().withUnsafeBytes { bytes in
            try SealedEnvelope.seal(
                bytes, to: h.element.publicKey, purpose: PersonalisationData.envelopePurpose, random: h.random)
        }
        await expectCode(.invalidEnvelope) { try await install(sealed) }
        // Signed by the token service, but for another Secure Element's certificate.
        await expectCode(.untrustedInstall) {
            try await install(try h.envelope(data, certificate: Array("another certificate".utf8)))
        }
        // A signature over another install ID does not carry over.
        var moved = try SignedPersonalisation(serialized: try h.envelope(data)).serialized
        moved[4] ^= 0x01
        await expectCode(.untrustedInstall) { try await install(moved) }
        #expect(await h.element.cards().isEmpty)

        // The real install works once; removed, the same install does not bring the card back.
        let installID = h.random.bytes(16)
        let good = try h.envelope(data, installID: installID)
        let card = try await install(good)
        #expect(try await install(good) == card)  // a retry while installed: the same card
        try await h.element.remove(card.card)
        await expectCode(.untrustedInstall) { try await install(good) }
        // Nor does another envelope under the spent install ID.
        await expectCode(.untrustedInstall) {
            try await install(
                try h.envelope(
                    try Harness.personalisation(dpan: visaDPAN, tokenReference: "tok_other"), installID: installID))
        }
        #expect(await h.element.cards().isEmpty)
    }

    @Test("S1: A Secure Element made without a pinned token service key installs nothing")
    func noPinNoInstall() async throws {
        let storageKey = SymmetricKey(data: [UInt8](repeating: 0x42, count: 32))
        let random = InsecureDeterministicRandom(seed: [1])
        let elementStorage = InMemorySealedRecordStorage()
        _ = try SecureElement.manufacture(
            profile: try DeviceProfile(kind: .phone, biometry: .face, account: "a"), elementStorage: elementStorage,
            enclaveStorage: InMemorySealedRecordStorage(), storageKey: storageKey, random: random,
            installAuthority: nil, certify: { _ in Harness.certificate })
        let element = try SecureElement(
            storage: elementStorage, storageKey: storageKey, clock: ManualClock(now: Date()), random: random)
        let h = try await Harness()
        let signed = try h.envelope(try Harness.personalisation(dpan: visaDPAN), to: element.publicKey)
        let binding = try await h.enclave.provisioningBinding(challenge: await h.element.challenge())
        await expectCode(.untrustedInstall) { try await element.install(signed, binding: binding) }
    }

    @Test("Stored records hold no DPAN or key in clear and do not open in another slot")
    func sealedAtRest() async throws {
        let h = try await Harness()
        let card = try await h.provision(dpan: visaDPAN)
        try await h.element.authorizeContactless(try await h.authorization(card.card))
        _ = try await h.tap()
        let masterKey = try EMVKeyDerivation.masterKey(
            issuerMasterKey: Harness.issuerMasterKey, pan: visaDPAN, panSequenceNumber: 0)
        let secrets: [[UInt8]] = [
            Array(visaDPAN.utf8), try EMVNumeric.compressedNumeric(visaDPAN), masterKey.bytes.unsafeCopyOfBytes(),
            Array(repeating: 0x5A, count: 16),
        ]
        for sealed in h.elementStorage.allSealedBytes + h.enclaveStorage.allSealedBytes {
            for secret in secrets { #expect(!sealed.containsSequence(secret)) }
        }
        // An applet record moved to another card's slot does not open.
        let applets = try h.elementStorage.records(kind: "applet")
        let moved = InMemorySealedRecordStorage()
        try moved.apply(
            try h.elementStorage.records(kind: "identity").map {
                SealedRecordChange(kind: "identity", id: $0.id, sealed: $0.sealed)
            }
                + [SealedRecordChange(kind: "applet", id: String(repeating: "0", count: 32), sealed: applets[0].sealed)]
        )
        await expectCode(.corruptState) {
            try SecureElement(storage: moved, storageKey: h.storageKey, clock: h.clock, random: h.random)
        }
        // Another storage key opens nothing.
        await expectCode(.corruptState) {
            try SecureElement(
                storage: h.elementStorage, storageKey: SymmetricKey(data: [UInt8](repeating: 9, count: 32)),
                clock: h.clock,
                random: h.random)
        }
    }

    @Test("R4: The ATC is stored before a cryptogram leaves: a failing store releases nothing")
    func atcStoredFirst() async throws {
        let storage = FlakyStorage()
        let h = try await Harness()
        let card = try await h.provision(dpan: visaDPAN)
        try storage.apply(
            (try h.elementStorage.records(kind: "identity").map {
                SealedRecordChange(kind: "identity", id: $0.id, sealed: $0.sealed)
            })
                + (try h.elementStorage.records(kind: "applet").map {
                    SealedRecordChange(kind: "applet", id: $0.id, sealed: $0.sealed)
                })
                + (try h.elementStorage.records(kind: "atc").map {
                    SealedRecordChange(kind: "atc", id: $0.id, sealed: $0.sealed)
                }))
        let element = try SecureElement(storage: storage, storageKey: h.storageKey, clock: h.clock, random: h.random)
        let signed = try await h.enclave.authorizePayment(
            AuthorizationRequest(
                transactionType: .contactless, card: card.card, amount: nil, challenge: await element.challenge()),
            evidence: .faceID(matched: true))
        guard case .authorized(let statement) = signed else { throw SecureElementError(.internalFailure, "") }
        try await element.authorizeContactless(statement)
        storage.failWrites = true
        try await element.fieldOn()
        let kernel = TerminalKernel(
            configuration: TerminalConfiguration(countryCode: 840, currencyCode: 840), random: h.random)
        let outcome = try await kernel.run(
            TransactionParameters(amount: 100, date: try TransactionDate(yymmdd: "250615")),
            card: SecureElementFieldLink(element))
        #expect(outcome.card == nil)
        #expect(outcome.refusal == .memoryFailure)
        #expect(try await element.lastATC(card.card) == 0)
    }

    @Test("Counters continue after a restart and removed cards leave no record")
    func restartAndRemove() async throws {
        let h = try await Harness()
        let card = try await h.provision(dpan: visaDPAN)
        for expected in UInt16(1)...3 {
            try await h.element.authorizeContactless(try await h.authorization(card.card))
            let outcome = try await h.tap()
            #expect(outcome.card?.atc == expected)
        }
        let restarted = try h.restarted()
        try await restarted.element.authorizeContactless(try await restarted.authorization(card.card))
        let outcome = try await restarted.tap()
        #expect(outcome.card?.atc == 4)
        #expect(try Harness.verify(outcome, dpan: visaDPAN, lastSeenATC: 3).isValid)
        try await restarted.element.remove(card.card)
        #expect(try h.elementStorage.records(kind: "applet").isEmpty && h.elementStorage.records(kind: "atc").isEmpty)
        await expectCode(.cardNotFound) { try await restarted.element.card(card.card) }
    }
}

/// A storage whose writes can be made to fail.
final class FlakyStorage: SealedRecordStorage, @unchecked Sendable {
    private let inner = InMemorySealedRecordStorage()
    private let lock = NSLock()
    private var failing = false
    var failWrites: Bool {
        get { lock.withLock { failing } }
        set { lock.withLock { failing = newValue } }
    }

    func records(kind: String) throws -> [(id: String, sealed: [UInt8])] { try inner.records(kind: kind) }
    func apply(_ changes: [SealedRecordChange]) throws {
        if failWrites { throw CocoaError(.fileWriteUnknown) }
        try inner.apply(changes)
    }
}

extension Array where Element == UInt8 {
    func containsSequence(_ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, needle.count <= count else { return false }
        for start in 0...(count - needle.count) where self[start] == needle[0] {
            if Array(self[start..<(start + needle.count)]) == needle { return true }
        }
        return false
    }
}
