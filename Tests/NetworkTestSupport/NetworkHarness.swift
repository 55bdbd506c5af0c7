public import CardBasics
import EMV
public import Foundation
public import Issuer
public import NetworkAuthorizationAPI
public import OrchardCrypto
import PaymentCredential
public import TokenService

/// The network parties wired in memory: the demo issuer with its test cards, a software HSM with the
/// test-double cryptogram verifiers, a token service with a Visa and a Mastercard token range.
public final class NetworkHarness: Sendable {
    /// 1 March 2026, 12:00 UTC.
    public static let start = Date(timeIntervalSince1970: 1_772_366_400)
    public static let visaTokenPrefix = "489537"
    public static let mastercardTokenPrefix = "539990"

    public let clock: ManualClock
    public let random: InsecureDeterministicRandom
    public let hsm: SoftwareHSM
    public let issuerStore: any IssuerStore
    public let issuer: Issuer
    /// The in-memory vault, unless the harness was given another store (then empty and unused).
    public let vault: InMemoryTokenVaultStore
    public let outbox: InMemoryNotificationOutbox
    public let deviceKeys: TestDoubleDeviceKeyVerifier
    public let tokenService: TokenService
    public let visaRange: TokenRange
    public let mastercardRange: TokenRange
    public let keys: TokenServiceKeys
    /// Between the token service and the issuer: set `reachable` to false to cut the line.
    public let issuerSwitch: IssuerSwitch

    /// - Parameters:
    ///   - issuerHost: replaces the issuer the token service talks to (default: the real demo issuer).
    ///   - verifiers: the HSM's cryptogram checks (default: the EMV module's ARQC check for proximity, the
    ///     test double for remote cryptograms until the in-app issue defines them).
    public init(
        atcPolicy: ATCPolicy = ATCPolicy(), issuerHost: (any IssuerHost)? = nil,
        vaultStore: (any TokenVaultStore)? = nil, issuerStore: (any IssuerStore)? = nil,
        deviceKeyVerifier: (any DeviceKeyVerifier)? = nil,
        verifiers: [any TokenCryptogramVerifier] = [
            EMVProximityCryptogramVerifier(), TestDoubleCryptogramVerifier(kind: .remote),
        ],
        authorizationProbe: (any AuthorizationProbe)? = nil
    ) async throws {
        clock = ManualClock(now: Self.start)
        random = InsecureDeterministicRandom(seed: Array("network-harness".utf8))
        hsm = try SoftwareHSM(localMasterKey: SymmetricKey(bitCount: 256), verifiers: verifiers, random: random)
        self.issuerStore = issuerStore ?? InMemoryIssuerStore()
        issuer = Issuer(
            configuration: TestCards.configuration, store: self.issuerStore,
            cardVerificationKey: TestCards.insecureDemoCardVerificationKey, clock: clock, random: random,
            monotonicClock: clock)
        try await TestCards.seed(into: issuer)
        issuerSwitch = IssuerSwitch(inner: issuerHost ?? issuer)
        vault = InMemoryTokenVaultStore()
        outbox = InMemoryNotificationOutbox()
        deviceKeys = TestDoubleDeviceKeyVerifier()
        visaRange = try TokenRange(
            rangeID: "visa-tokens", issuerID: TestCards.issuerID, network: .visa, prefix: Self.visaTokenPrefix,
            proximityKey: try hsm.generateKey(usage: .proximityIssuerMasterKey, id: "visa-imk-ac"),
            remoteKey: try hsm.generateKey(usage: .remoteIssuerMasterKey, id: "visa-imk-rp"))
        mastercardRange = try TokenRange(
            rangeID: "mc-tokens", issuerID: TestCards.issuerID, network: .mastercard,
            prefix: Self.mastercardTokenPrefix,
            proximityKey: try hsm.generateKey(usage: .proximityIssuerMasterKey, id: "mc-imk-ac"),
            remoteKey: try hsm.generateKey(usage: .remoteIssuerMasterKey, id: "mc-imk-rp"))
        keys = try TokenServiceKeys.generate(in: hsm)
        tokenService = try TokenService(
            configuration: TokenServiceConfiguration(atcPolicy: atcPolicy), keyStore: hsm, keys: keys,
            ranges: [visaRange, mastercardRange],
            issuers: [
                IssuerRoute(
                    issuerID: TestCards.issuerID, cardBINPrefixes: TestCards.cardBINPrefixes,
                    host: issuerSwitch)
            ],
            vault: vaultStore ?? vault, deviceKeys: deviceKeyVerifier ?? deviceKeys, notifier: outbox, clock: clock,
            random: random, authorizationProbe: authorizationProbe, monotonicClock: clock)
        await issuer.connect(to: tokenService)
    }

    /// A device whose SE key the (test-double) device CA has certified.
    public func makeDevice(_ id: String, kind: String = "phone") throws -> SimulatedDevice {
        let device = try SimulatedDevice(deviceID: id, kind: kind)
        deviceKeys.register(device.secureElementPublicKey, deviceID: device.deviceID)
        return device
    }

    /// The CVV2 of a test card.
    public func cvv(_ pan: String) throws -> String {
        try TestCards.insecureDemoCardVerificationKey.cardVerificationValue(
            pan: try PrimaryAccountNumber(pan), expiry: try testCardExpiry())
    }

    public func testCardExpiry() throws -> CardExpiry {
        try CardExpiry(year: TestCards.expiryYear, month: TestCards.expiryMonth)
    }

    /// Check Card for a test card from `device`.
    public func checkCard(
        _ pan: String, on device: SimulatedDevice, cvv: String? = nil, idempotencyKey: String? = nil
    ) async throws -> CheckCardResponse {
        let envelope = try device.sealCardData(
            pan: try PrimaryAccountNumber(pan), expiry: try testCardExpiry(), cvv: try cvv ?? self.cvv(pan),
            name: TestCards.cardholderName, to: tokenService)
        return try await tokenService.checkCard(
            CheckCardRequest(
                // Never a card number in a key: keys are stored in clear.
                idempotencyKey: idempotencyKey
                    ?? "check-\(device.deviceID)-\(random.bytes(8).map { String($0, radix: 16) }.joined())",
                tokenRequestorID: TokenRequestor.orchardPay.id, deviceID: device.deviceID, deviceKind: device.kind,
                encryptedCardData: envelope))
    }

    /// Link and Provision for an approved session.
    public func link(
        _ sessionID: String, on device: SimulatedDevice, termsAccepted: Bool = true,
        domainControls: DomainControls? = nil, idempotencyKey: String? = nil
    ) async throws -> LinkAndProvisionResponse {
        try await tokenService.linkAndProvision(
            LinkAndProvisionRequest(
                idempotencyKey: idempotencyKey ?? "link-\(sessionID)", sessionID: sessionID, deviceID: device.deviceID,
                secureElementCertificateChain: device.certificateChain,
                termsAccepted: termsAccepted, domainControls: domainControls))
    }

    /// Check Card, Link and Provision, and installation in the device's SE, for an approving test card.
    public func provision(
        _ pan: String, on device: SimulatedDevice, domainControls: DomainControls? = nil
    ) async throws -> InstalledCard {
        let check = try await checkCard(pan, on: device)
        guard case .approve = check.decision, let sessionID = check.sessionID else {
            throw TestDoubleError("Check Card did not approve: \(check.decision)")
        }
        guard case .provisioned(let token) = try await link(sessionID, on: device, domainControls: domainControls)
        else { throw TestDoubleError("Link and Provision did not provision") }
        return try device.install(token, from: tokenService)
    }

    /// A contactless or online authorization sent straight to the token service.
    public func authorize(
        _ card: InstalledCard, on device: SimulatedDevice, amount minorUnits: Int64,
        channel: PaymentChannel = .contactless,
        atc: UInt16? = nil, cryptogramAmount: Int64? = nil, transactionID: String? = nil, withCryptogram: Bool = true
    ) async throws -> NetworkAuthorizationResponse {
        let amount = try Money(minorUnits: minorUnits, currency: Currency(TestCards.currency))
        let kind: CryptogramKind = channel == .contactless ? .proximityARQC : .remote
        let cryptogram = try await device.cryptogram(
            for: card, kind: kind,
            amount: try Money(minorUnits: cryptogramAmount ?? minorUnits, currency: Currency("840")),
            atc: atc)
        return try await tokenService.authorize(
            NetworkAuthorizationRequest(
                acquirerID: "acq-1",
                transactionID: transactionID ?? "txn-\(random.bytes(8).map { String($0, radix: 16) }.joined())",
                pan: card.data.dpan, expiry: card.data.tokenExpiry, amount: amount, channel: channel,
                merchant: Self.merchant, cryptogram: withCryptogram ? cryptogram : nil, transmittedAt: clock.now()))
    }

    public static let merchant = MerchantInfo(
        merchantID: "m-coffee", name: "Orchard Coffee", categoryCode: "5814", countryCode: "840")
}

/// An issuer host that forwards to another one while `reachable` is true and fails otherwise.
public final class IssuerSwitch: IssuerHost, @unchecked Sendable {
    private let inner: any IssuerHost
    // Guarded by `lock`.
    private let lock = NSLock()
    private var isReachable = true

    public init(inner: any IssuerHost) { self.inner = inner }

    public var reachable: Bool {
        get { lock.withLock { isReachable } }
        set { lock.withLock { isReachable = newValue } }
    }

    public var issuerID: String { inner.issuerID }

    private func check() throws {
        guard reachable else { throw TestDoubleError("the issuer is unreachable") }
    }

    public func checkCard(_ request: CardCheckRequest) async throws -> CardCheckDecision {
        try check()
        return try await inner.checkCard(request)
    }

    public func verifyOneTimeCode(reference: String, code: String) async throws -> CardCheckDecision {
        try check()
        return try await inner.verifyOneTimeCode(reference: reference, code: code)
    }

    public func authorize(_ request: IssuerAuthorizationRequest) async throws -> IssuerAuthorizationResponse {
        try check()
        return try await inner.authorize(request)
    }

    public func reverse(_ request: IssuerReversalRequest) async throws -> IssuerReversalResponse {
        try check()
        return try await inner.reverse(request)
    }
}

/// A card installed in a simulated SE.
public struct InstalledCard: Sendable {
    public let token: ProvisionedToken
    public let data: InstalledCardData
}

/// What a simulated SE read from its personalisation envelope (`PaymentCredential.PersonalisationData`, the
/// format the real Secure Element reads), in the network's card types.
public struct InstalledCardData: Sendable {
    public let tokenReference: String
    public let dpan: PrimaryAccountNumber
    public let panSequenceNumber: UInt8
    public let tokenExpiry: CardExpiry
    public let network: CardNetwork
    public let proximityMasterKey: SymmetricKey
    public let remoteMasterKey: SymmetricKey

    public init(decoding plaintext: SecureBytes) throws {
        let data = try PersonalisationData(decoding: plaintext)
        tokenReference = data.tokenReference
        dpan = try PrimaryAccountNumber(data.dpan.withUnsafeBytes { String(decoding: $0, as: UTF8.self) })
        panSequenceNumber = data.panSequenceNumber
        tokenExpiry = try CardExpiry(yymm: data.expiry)
        network = CardNetwork(data.network)
        proximityMasterKey = data.proximityMasterKey
        remoteMasterKey = data.remoteMasterKey
    }
}

/// A device's Secure Element, reduced to what the network tests need: its key pair, opening the
/// personalisation envelope, and the application transaction counter.
public final class SimulatedDevice: @unchecked Sendable {
    public let deviceID: String
    public let kind: String
    let secureElementKey: P256.KeyAgreement.PrivateKey
    // Guarded by `lock`.
    private let lock = NSLock()
    private var counters: [String: UInt16] = [:]
    private var chain: [[UInt8]]?

    public init(deviceID: String, kind: String) throws {
        self.deviceID = deviceID
        self.kind = kind
        secureElementKey = try P256.KeyAgreement.PrivateKey()
    }

    public var secureElementPublicKey: P256.KeyAgreement.PublicKey { secureElementKey.publicKey }
    /// What the device presents as its SE certificate chain: by default the test double's form (the bare
    /// key); tests of the real device-CA check set a real chain.
    public var certificateChain: [[UInt8]] {
        get { lock.withLock { chain } ?? [secureElementKey.publicKey.derRepresentation] }
        set { lock.withLock { chain = newValue } }
    }

    /// The wallet side of Check Card: the card data sealed to the token service.
    public func sealCardData(
        pan: PrimaryAccountNumber, expiry: CardExpiry, cvv: String, name: String, to tokenService: TokenService
    ) throws -> EncryptedEnvelope {
        let payload = try CardDataPayload(
            pan: pan, expiry: expiry, cardVerificationValue: try CardVerificationValue(cvv), cardholderName: name)
        return try EncryptedEnvelope.seal(
            try payload.encoded(), to: tokenService.provisioningPublicKey,
            label: try tokenService.cardDataLabel(deviceID: deviceID))
    }

    /// Opens the personalisation envelope with the SE's key.
    public func install(_ token: ProvisionedToken, from tokenService: TokenService) throws -> InstalledCard {
        let plain = try EncryptedEnvelope(serialized: token.personalisation.envelope).open(
            with: secureElementKey, label: TokenService.personalisationLabel)
        return InstalledCard(token: token, data: try InstalledCardData(decoding: plain))
    }

    /// The next cryptogram for `card` (or one with the given ATC), made with the installed card master keys.
    ///
    /// Proximity: a real contactless transaction, the EMV module's card applet (personalised with the DPAN,
    /// PSN, token expiry and proximity master key from the envelope) read by its terminal kernel after the
    /// user was verified on the device; the submission is the ARQC, its ATC and field 55. Remote: the test
    /// double's cryptogram under the remote master key.
    public func cryptogram(
        for card: InstalledCard, kind: CryptogramKind, amount: Money, atc: UInt16? = nil
    )
        async throws -> CryptogramSubmission
    {
        let counter: UInt16 = lock.withLock {
            let next = atc ?? (counters[card.token.tokenReference, default: 0] + 1)
            counters[card.token.tokenReference] = max(next, counters[card.token.tokenReference, default: 0])
            return next
        }
        if kind == .proximityARQC { return try await tap(card, amount: amount, atc: counter) }
        let data = TestDoubleCryptogramVerifier.transactionData(
            amount: amount, unpredictableNumber: [0x12, 0x34, 0x56, 0x78], atc: counter)
        let key = card.data.remoteMasterKey
        return CryptogramSubmission(
            kind: kind,
            cryptogram: TestDoubleCryptogramVerifier.cryptogram(kind: kind, transactionData: data, cardMasterKey: key),
            applicationTransactionCounter: counter, transactionData: data)
    }

    /// One contactless transaction whose card uses `atc` (the applet's counter is set just below it).
    private func tap(_ card: InstalledCard, amount: Money, atc: UInt16) async throws -> CryptogramSubmission {
        let scheme: PaymentScheme = card.data.network == .mastercard ? .mastercard : .visa
        let profile = try CardApplicationProfile(
            scheme: scheme, pan: card.data.dpan.digits, expiry: card.data.tokenExpiry.yymm,
            panSequenceNumber: Int(card.data.panSequenceNumber), masterKey: card.data.proximityMasterKey)
        let applet = try ContactlessCard(
            applications: [CardApplication(profile: profile, atcStore: InMemoryATCStore(lastUsed: atc &- 1))])
        let link = InProcessCardLink(card: applet)
        await link.authorize(CardholderAuthorization(verifiedBy: .fingerprint))
        let kernel = TerminalKernel(
            configuration: TerminalConfiguration(countryCode: 840, currencyCode: Int(amount.currency.numericCode)),
            random: InsecureDeterministicRandom(seed: Array((deviceID + String(atc)).utf8)))
        let outcome = try await kernel.run(
            TransactionParameters(amount: UInt64(amount.minorUnits), date: try TransactionDate(yymmdd: "260301")),
            card: link)
        guard let read = outcome.card, read.cryptogramType == .arqc else {
            throw TestDoubleError("the contactless transaction gave no ARQC: \(outcome)")
        }
        return CryptogramSubmission(
            kind: .proximityARQC, cryptogram: read.cryptogram, applicationTransactionCounter: read.atc,
            transactionData: read.field55Bytes)
    }
}
