import CardBasics
import Foundation
import OrchardCrypto
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import OrchardStore
import OrchardX509
import PayAPI
import PaymentCredential
import PaymentToken

/// The Pay server's in-app payment endpoints (docs/in-app.md), all over mutual TLS with the client certificate
/// of a registered device (the device registry's requirement; not erased, not in lost mode):
///
/// - `GET /v1/payments/credential-certificate`: the certificate of the device-to-server credential key;
/// - `POST /v1/payments/nonce`: a single-use nonce issued to the calling device (``PaymentNonces``);
/// - `POST /v1/payments/credential`: exchanges a sealed credential for a signed PKPaymentToken.
///
/// The exchange decrypts the credential, checks the Secure Element's signature with the key of the SE
/// certificate the device registered (issued by the device CA to the device that calls, valid now), checks the
/// cryptogram is bound to the credential's nonce, then in ONE write transaction consumes the nonce (issued to
/// this device, unused, not expired), checks the app's entitlement for the merchant ID, picks the processing
/// certificate (unrevoked, valid) and counts the purchase in the anonymous tallies; only then it builds the
/// 3DSecure payment data, encrypts it as EC_v1 (RSA_v1 for a merchant with only an RSA certificate) with the
/// applicationData hash in the header, and signs it with the token-signing leaf (the RSA leaf for RSA_v1). It
/// stores and logs no DPAN, cryptogram, nonce, app, merchant or device next to an amount.
final class InAppPayments: Sendable {
    /// Apple's `deviceManufacturerIdentifier` is a 12-hex-digit value; Orchard's says "ORCHAR".
    static let deviceManufacturerIdentifier = "4F5243484152"
    static let deviceOrganization = "Orchard device"

    private let store: Store
    private let devices: DeviceRegistry
    private let nonces: PaymentNonces
    private let cache: VerifiedKeyCache
    private let pki: InAppPKI.Loaded
    private let ecEncoder: PaymentTokenEncoder
    private let rsaEncoder: PaymentTokenEncoder
    private let clock: any WallClock
    /// Merchant tokens and, on PostgreSQL, the tally shard of each exchange
    /// (``InAppStore/tally(channel:currency:minorUnits:day:random:in:)``).
    private let random: any RandomSource
    /// Nonces per device (``PayService/noncesPerMinute``): a device cannot fill the nonce table.
    private let nonceQuota: RateLimiter

    init(
        store: Store, devices: DeviceRegistry, pki: InAppPKI.Loaded, tokenSigning: TokenSigningPKI,
        wallClock: any WallClock, monotonicClock: any MonotonicClock, random: any RandomSource,
        noncesPerMinute: Int = PayService.noncesPerMinute.defaultValue
    ) throws {
        nonceQuota = RateLimiter(
            RateLimit(perSecond: Double(noncesPerMinute) / 60, burst: noncesPerMinute), clock: monotonicClock)
        self.store = store
        self.devices = devices
        cache = VerifiedKeyCache(deviceCA: pki.deviceCA)
        self.pki = pki
        self.clock = wallClock
        self.random = random
        let raw = try pki.credentialKey.rawRepresentation
        let hashKey = try HKDF.deriveKey(
            inputKeyMaterial: SymmetricKey(raw), salt: [], info: Array("orchard-pay nonce hash v1".utf8),
            outputByteCount: 32)
        nonces = PaymentNonces(
            store: store, hashKey: hashKey, monotonic: monotonicClock, wall: wallClock, random: random)
        ecEncoder = PaymentTokenEncoder(signer: try tokenSigning.signer(clock: wallClock), random: random)
        rsaEncoder = PaymentTokenEncoder(
            signer: try CMSTokenSigner(
                leaf: pki.rsaLeaf, key: pki.rsaKey, intermediate: tokenSigning.intermediate, clock: wallClock),
            random: random)
    }

    /// Deletes expired nonces on a shared store (``PaymentNonces/purgeExpired()``); 0 on SQLite.
    func purgeExpiredNonces() async throws -> Int { try await nonces.purgeExpired() }

    /// Loads the keys `init` wrote and makes the endpoints.
    static func load(
        directory: DeploymentDirectory, store: Store, devices: DeviceRegistry, tokenSigning: TokenSigningPKI,
        environment: ServiceEnvironment, noncesPerMinute: Int = PayService.noncesPerMinute.defaultValue
    ) throws -> InAppPayments {
        try InAppPayments(
            store: store, devices: devices, pki: try InAppPKI.load(from: directory), tokenSigning: tokenSigning,
            wallClock: environment.wallClock, monotonicClock: environment.monotonicClock, random: environment.random,
            noncesPerMinute: noncesPerMinute)
    }

    // MARK: Routes

    func addRoutes(to router: inout Router) {
        router.add(PayAPI.Declared.credentialCertificate) { [pki] _ in
            try Self.json(CredentialCertificateResponse(certificate: pki.credentialCertificate.pemRepresentation))
        }
        // The Pay server keeps nothing that ties a payment to a device: a kept answer (a nonce issued to this device,
        // a token) would. A lost answer is retried with a new nonce, which consumes nothing the first one did not.
        router.exemptFromIdempotency(
            PayAPI.Declared.paymentNonce,
            because: "a kept nonce would tie a payment to the device; a nonce is single-use, a retry asks for another")
        router.exemptFromIdempotency(
            PayAPI.Declared.paymentCredential,
            because: "a kept token would tie a payment to the device; the nonce inside makes a repeat fail, not pay")
        router.classify(PayAPI.Declared.paymentNonce, as: .payment)
        router.classify(PayAPI.Declared.paymentCredential, as: .payment)
        router.add(PayAPI.Declared.paymentNonce) { [self] request in
            let device = try await payingDevice(request)
            if let wait = nonceQuota.take(device.deviceID) {
                throw OverloadError.rateLimited("payment nonces for this device", retryAfter: wait)
            }
            let nonce = try await nonces.issue(to: device.deviceID)
            return try Self.json(
                PaymentNonceResponse(
                    nonce: StrictEncoding.base64Encode(nonce),
                    expiresInSeconds: Int(PaymentNonces.lifetime / 1_000_000_000)))
        }
        router.add(PayAPI.Declared.paymentCredential) { [self] request in
            // The public-key work (about 0.2 ms) runs on the event loop that holds the connection, as every other
            // handler's does: the server runs a loop per CPU it may use, and the shared pool cost two thread
            // hand-offs per exchange (to the pool, back to the loop for the reply): about a fifth of the server's
            // CPU per token (docs/performance.md, `bench inapp`).
            let device = try await payingDevice(request)
            let token = try await exchange(try Self.decode(request), device: device)
            return HTTPResponse(
                status: .ok, headers: ["Content-Type": "application/json"], body: Data(token.json.serializedBytes))
        }
    }

    /// The registered device that sent `request` (the device registry's client-certificate check), not erased
    /// and not in lost mode.
    func payingDevice(_ request: HTTPRequest) async throws -> DeviceRegistry.Record {
        let device = try await devices.registeredDevice(request)
        guard !device.lostMode else {
            throw PayServerError(.notPermitted, "this device is in lost mode: it cannot pay until it leaves it")
        }
        return device
    }

    // Synchronous wrappers: Swift 6.3 release builds crash on some typed-throws calls made directly in async
    // closures, so the route bodies call these instead.
    static func json(_ value: some Encodable) throws -> HTTPResponse { try HTTPResponse.json(value) }

    static func decode(_ request: HTTPRequest) throws -> PaymentCredentialExchange {
        try request.decodeJSON(PaymentCredentialExchange.self)
    }

    // MARK: The exchange

    /// Exchanges a sealed credential from `device` for a signed token (see the type's documentation).
    func exchange(_ body: PaymentCredentialExchange, device: DeviceRegistry.Record) async throws -> PaymentToken {
        let credential = try verifiedCredential(body, device: device)
        let now = clock.now()
        let nonces = self.nonces
        let cache = self.cache
        let (channel, currency, amount, day) = (
            credential.channel.name, try Self.currencyCode(credential.currency), credential.amount, Self.day(now)
        )
        let random = self.random
        let (certificate, merchantToken) = try await store.write { db in
            try nonces.consume(credential.nonce, device: device.deviceID, in: db)
            var merchant = credential.merchantIdentifier
            if let session = credential.merchantSession {
                // Web: the merchant session is consumed in the transaction that issues the token.
                merchant = try MerchantSessions.consume(
                    identifier: session.identifier, nonce: session.nonce, merchant: credential.merchantIdentifier,
                    domain: credential.applicationIdentifier, at: now, in: db)
            } else {
                guard
                    try db.queryFirst(
                        "SELECT 1 FROM app_entitlements WHERE application = ? AND merchant_identifier = ?",
                        [.text(credential.applicationIdentifier), .text(credential.merchantIdentifier)], { _ in true })
                        != nil
                else {
                    throw PayServerError(.notEntitled, "this app is not entitled to pay for this merchant ID")
                }
            }
            guard
                let certificate = try MerchantCertificates.processingCertificate(
                    for: merchant, at: now, in: db, parse: cache.processingCertificate)
            else {
                throw PayServerError(
                    .noProcessingCertificate, "the merchant has no valid, unrevoked payment processing certificate")
            }
            // A recurring, automatic reload or deferred payment: the merchant token of this merchant and card.
            let merchantToken = try body.merchantToken.map {
                try MerchantTokens.mint(
                    merchant: merchant, tokenReference: $0.tokenReference, deviceID: device.deviceID, at: now,
                    random: random, in: db)
            }
            try InAppStore.tally(
                channel: channel, currency: currency, minorUnits: amount, day: day, random: random, in: db)
            return (certificate, merchantToken)
        }
        return try makeToken(
            credential, certificate: certificate, paymentMethod: body.paymentMethod, merchantToken: merchantToken)
    }

    /// Opens the credential and checks its signature, device certificate, nonce binding and channel.
    func verifiedCredential(
        _ body: PaymentCredentialExchange, device: DeviceRegistry.Record
    ) throws
        -> PaymentCredential
    {
        guard let sealed = StrictEncoding.base64Decode(body.credential) else {
            throw PayServerError(.invalidRequest, "credential is base64")
        }
        let opened: OpenedPaymentCredential
        do {
            opened = try SealedPaymentCredential.open(sealed, with: pki.credentialKey)
        } catch {
            throw PayServerError(.credentialRejected, "the credential cannot be opened: \(error.message)")
        }
        // The Secure Element certificate the device registered (checked then against the device CA and the
        // client certificate's subject), checked again here: issuer, signature, validity, the same device.
        guard let entry = cache.secureElement(device.secureElementCertificate),
            entry.certificate.isValid(at: clock.now()),
            entry.certificate.subject.organization == Self.deviceOrganization,
            entry.certificate.subject.commonName == device.deviceID
        else {
            throw PayServerError(
                .credentialRejected, "the device's registered Secure Element certificate is not valid")
        }
        guard opened.isSigned(by: entry.key) else {
            throw PayServerError(.credentialRejected, "the credential is not signed by this device's Secure Element")
        }
        let credential = opened.credential
        guard credential.cryptogram.isBound(toNonce: credential.nonce) else {
            throw PayServerError(.credentialRejected, "the cryptogram is not bound to the credential's nonce")
        }
        guard credential.channel == .inApp || credential.merchantSession != nil else {
            throw PayServerError(
                .credentialRejected, "a web credential is version 2, bound to the page's merchant session")
        }
        return credential
    }

    /// The 3DSecure payment data, encrypted to `certificate` and signed.
    func makeToken(
        _ credential: PaymentCredential, certificate: Certificate, paymentMethod: PaymentMethodDisplay?,
        merchantToken: MerchantTokens.Minted? = nil
    ) throws -> PaymentToken {
        let payment = JSONValue.object(
            [
                ("applicationPrimaryAccountNumber", .string(credential.dpanString)),
                ("applicationExpirationDate", .string(credential.expiry)),
                ("currencyCode", .string(try Self.currencyCode(credential.currency))),
                ("transactionAmount", .number(String(credential.amount))),
                ("deviceManufacturerIdentifier", .string(Self.deviceManufacturerIdentifier)),
                ("paymentDataType", .string("3DSecure")),
                (
                    "paymentData",
                    .object([
                        ("onlinePaymentCryptogram", .string(StrictEncoding.base64Encode(credential.cryptogram.bytes))),
                        ("eciIndicator", .string(credential.eci)),
                    ])
                ),
            ] + (merchantToken.map(MerchantTokens.members) ?? []))
        let recipient = try cache.processingCertificate(certificate.derRepresentation).1
        let encoder: PaymentTokenEncoder
        switch recipient {
        case .ec: encoder = ecEncoder
        case .rsa: encoder = rsaEncoder
        }
        let paymentData = try encoder.makePaymentData(
            payment: payment, recipient: recipient, applicationDataHash: credential.applicationDataHash)
        return PaymentToken(
            paymentData: paymentData,
            paymentMethod: paymentMethod.map {
                PaymentMethod(displayName: $0.displayName, network: $0.network, type: $0.type)
            },
            transactionIdentifier: Hex.encode(paymentData.header.transactionId))
    }

    /// The credential's currency as ISO 4217's three digits (`"036"`). PaymentCredential admits only CardBasics'
    /// currencies, so this refuses only a credential that did not come through it.
    static func currencyCode(_ numeric: UInt16) throws(PayServerError) -> String {
        guard let currency = Currency(numericCode: Int(numeric)) else {
            throw PayServerError(.credentialRejected, "the credential's currency is not an ISO 4217 currency")
        }
        return currency.numericString
    }

    static func day(_ date: Date) -> String { CivilTime.dayStamp(date) ?? "0000-01-01" }
}
