import EMV
import Foundation
import OrchardCrypto
import PaymentCredential
import SecureElement
import Testing

/// A paired Secure Element and Secure Enclave in memory, with a fixed clock and randomness, plus a stand-in
/// token service that personalises cards with keys derived from a known issuer master key.
struct Harness {
    static let issuerMasterKey = SymmetricKey(
        data: [UInt8](repeating: 0x11, count: 8) + [UInt8](repeating: 0x22, count: 8))
    static let passcode = "246810"

    let clock: ManualClock
    let random: InsecureDeterministicRandom
    let storageKey: SymmetricKey
    let elementStorage: InMemorySealedRecordStorage
    let enclaveStorage: InMemorySealedRecordStorage
    let element: SecureElement
    let enclave: SecureEnclave

    /// A new device; with `passcode` set unless nil.
    init(
        _ kind: DeviceKind = .phone, _ biometry: Biometry = .face, passcode: String? = Harness.passcode,
        seed: String = "device"
    )
        async throws
    {
        clock = ManualClock(now: Date(timeIntervalSince1970: 1_750_000_000))
        random = InsecureDeterministicRandom(seed: Array(seed.utf8))
        storageKey = SymmetricKey(data: random.bytes(32))
        elementStorage = InMemorySealedRecordStorage()
        enclaveStorage = InMemorySealedRecordStorage()
        let profile = try DeviceProfile(kind: kind, biometry: biometry, account: "alice")
        _ = try SecureElement.manufacture(
            profile: profile, elementStorage: elementStorage, enclaveStorage: enclaveStorage, storageKey: storageKey,
            random: random, installAuthority: Self.tokenServiceKey.publicKey, certify: { _ in Self.certificate })
        element = try SecureElement(storage: elementStorage, storageKey: storageKey, clock: clock, random: random)
        enclave = try SecureEnclave(storage: enclaveStorage, storageKey: storageKey, clock: clock, random: random)
        if let passcode { try await enclave.setPasscode(Self.secret(passcode), current: nil) }
    }

    private init(copying other: Harness, enclaveStorage: InMemorySealedRecordStorage? = nil) throws {
        clock = other.clock
        random = other.random
        storageKey = other.storageKey
        elementStorage = other.elementStorage
        self.enclaveStorage = enclaveStorage ?? other.enclaveStorage
        element = try SecureElement(storage: elementStorage, storageKey: storageKey, clock: clock, random: random)
        enclave = try SecureEnclave(
            storage: self.enclaveStorage, storageKey: storageKey, clock: clock, random: random)
    }

    /// The same device after a restart: new actors over the same storage.
    func restarted(enclaveStorage: InMemorySealedRecordStorage? = nil) throws -> Harness {
        try Harness(copying: self, enclaveStorage: enclaveStorage)
    }

    static func secret(_ text: String) -> SecureBytes { SecureBytes(Array(text.utf8)) }

    // MARK: Token service stand-in

    /// The personalisation a token service would send for `dpan`, and the card's proximity master key.
    static func personalisation(
        dpan: String, network: String = "visa", tokenReference: String? = nil, psn: UInt8 = 0
    ) throws -> PersonalisationData {
        let masterKey = try EMVKeyDerivation.masterKey(
            issuerMasterKey: issuerMasterKey, pan: dpan, panSequenceNumber: Int(psn))
        return try PersonalisationData(
            tokenReference: tokenReference ?? "tok_\(dpan.suffix(6))", dpan: dpan, panSequenceNumber: psn,
            expiry: "3012", network: network, proximityMasterKey: masterKey,
            remoteMasterKey: SymmetricKey(data: [UInt8](repeating: 0x5A, count: 16)))
    }

    /// The token service's install-signing key this Secure Element pins at manufacture.
    static let tokenServiceKey: P256.Signing.PrivateKey = {
        guard let key = try? P256.Signing.PrivateKey(rawRepresentation: [UInt8](repeating: 0x07, count: 32)) else {
            preconditionFailure("a valid P-256 scalar")
        }
        return key
    }()
    /// The bytes the factory's `certify` step returns as this Secure Element's device certificate.
    static let certificate: [UInt8] = Array("the device certificate of the test Secure Element".utf8)

    /// A signed install (as the token service sends it) of an envelope sealed to `recipient` (by default this
    /// Secure Element), bound to `certificate` and signed by `signer`.
    func envelope(
        _ data: PersonalisationData, to recipient: P256.KeyAgreement.PublicKey? = nil,
        purpose: String = PersonalisationData.envelopePurpose,
        signer: P256.Signing.PrivateKey = Harness.tokenServiceKey,
        certificate: [UInt8] = Harness.certificate, installID: [UInt8]? = nil
    ) throws -> [UInt8] {
        let plaintext = try data.encoded()
        let sealed = try plaintext.withUnsafeBytes { bytes in
            try SealedEnvelope.seal(bytes, to: recipient ?? element.publicKey, purpose: purpose, random: random)
        }
        return try SignedPersonalisation(
            installID: installID ?? random.bytes(16), certificateDigest: SHA256.hash(certificate), envelope: sealed,
            sign: { content in try signer.signature(for: content) }
        ).serialized
    }

    /// Provisions a card through a provisioning binding and returns its display data.
    @discardableResult
    func provision(dpan: String, network: String = "visa") async throws -> CardDisplayData {
        let envelope = try envelope(try Self.personalisation(dpan: dpan, network: network))
        let binding = try await enclave.provisioningBinding(challenge: await element.challenge())
        return try await element.install(envelope, binding: binding)
    }

    // MARK: Authorization and payment

    /// Asks the enclave to authorize a payment and returns the signed statement (fails the test otherwise).
    func authorization(
        _ card: CardIdentifier, type: TransactionType = .contactless, amount: PaymentAmount? = nil,
        evidence: AuthenticationEvidence = .faceID(matched: true)
    ) async throws -> SignedEnclaveStatement {
        let request = AuthorizationRequest(
            transactionType: type, card: card, amount: amount, challenge: await element.challenge())
        guard case .authorized(let statement) = try await enclave.authorizePayment(request, evidence: evidence) else {
            Issue.record("the enclave did not authorize")
            throw SecureElementError(.invalidAuthorization, "not authorized")
        }
        return statement
    }

    /// Runs one contactless transaction at a terminal (field on, the EMV terminal kernel, field off).
    func tap(
        amount: UInt64 = 1250, kernel: PaymentScheme? = nil, unpredictableNumber: [UInt8] = [1, 2, 3, 4]
    )
        async throws -> TerminalOutcome
    {
        try await element.fieldOn()
        let configuration = TerminalConfiguration(countryCode: 840, currencyCode: 840, preferredAID: kernel?.aid)
        let kernel = TerminalKernel(configuration: configuration, random: random)
        let outcome = try await kernel.run(
            TransactionParameters(
                amount: amount, date: try TransactionDate(yymmdd: "250615"), unpredictableNumber: unpredictableNumber),
            card: SecureElementFieldLink(element))
        try await element.fieldOff()
        return outcome
    }

    /// Verifies the cryptogram a terminal received with the card's master key.
    static func verify(
        _ outcome: TerminalOutcome, dpan: String, lastSeenATC: UInt16? = nil
    ) throws -> CryptogramVerification {
        guard let card = outcome.card else { throw EMVError(.protocolViolation, "no card data: \(outcome)") }
        return try CryptogramVerifier().verify(
            ChipAuthorizationData(card), issuerMasterKey: issuerMasterKey, lastSeenATC: lastSeenATC)
    }

    /// A copy of a storage's records (to restore an older snapshot).
    static func snapshot(_ storage: InMemorySealedRecordStorage, kinds: [String]) throws -> InMemorySealedRecordStorage
    {
        let copy = InMemorySealedRecordStorage()
        for kind in kinds {
            try copy.apply(
                try storage.records(kind: kind).map { SealedRecordChange(kind: kind, id: $0.id, sealed: $0.sealed) })
        }
        return copy
    }
}

/// Expects `body` to throw a `SecureElementError` with `code`.
func expectCode<T>(
    _ code: SecureElementError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> T
) async {
    do {
        _ = try await body()
        Issue.record("expected \(code), nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as SecureElementError {
        #expect(error.code == code, "got \(error)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected \(code), got \(error)", sourceLocation: sourceLocation)
    }
}

extension AuthenticationOutcome {
    var isAuthorized: Bool {
        if case .authorized = self { return true }
        return false
    }
    var offered: [AuthenticationMethod]? {
        if case .rejected(let offered) = self { return offered }
        return nil
    }
}

let visaDPAN = "4895370012345678"
let mastercardDPAN = "5413330089012345"
