import Foundation
import MerchantKit
import MerchantServer
import OrchardCrypto
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import OrchardStore
import OrchardX509
import PayAPI
import PayClient
import PayServer
import PaymentCredential
import PaymentToken
import Testing

/// A device as the Pay server sees it: a TLS client identity and a Secure Element key with its certificate,
/// both from the deployment's device CA.
struct InAppTestDevice {
    let name: String
    let client: HTTPClient
    let secureElementKey: P256.Signing.PrivateKey
    let secureElementCertificate: Certificate
}

/// A deployment with the Pay server running in process over HTTPS on loopback, and the test's view of it.
final class InAppFixture: @unchecked Sendable {
    static let merchant = "merchant.dev.orchard.demo"
    static let app = "dev.orchard.demo-app"
    static let dpan = "4895370012345678"
    static let remoteMasterKey = SymmetricKey(data: [UInt8](repeating: 0x5A, count: 16))
    static let applicationData = Array("order 1001: Orchard Tee, size M".utf8)

    let temporary: TemporaryDirectory
    let directory: DeploymentDirectory
    let connections: ServiceConnections
    let base: String
    let clock: ManualClock
    let deviceCA: CertificateAuthority
    let credentialKey: P256.KeyAgreement.PublicKey
    let tokenRoot: Certificate
    var atc: UInt16 = 0

    init(database: String? = nil) async throws {
        temporary = try TemporaryDirectory()
        directory = DeploymentDirectory(path: temporary.child("deployment"))
        let registry = try ServiceRegistry([PayService(), MerchantService()])
        _ = try await DeploymentInitializer.initialize(
            directory, registry: registry,
            options: .init(databases: database.map { [.pay: $0, .merchant: $0] } ?? [:]))
        clock = ManualClock(now: Date())
        connections = try await ServiceConnections.connect(
            [.pay], directory: directory, registry: registry,
            environment: ServiceEnvironment(wallClock: clock, monotonicClock: clock))
        base = try connections.baseURL(of: .pay)
        deviceCA = try CertificateAuthority.load(named: PKIFiles.deviceCA, from: directory)
        let credentialCertificate = try DeploymentPKI.readCertificate(
            named: InAppPKI.Files.credential, from: directory)
        credentialKey = try P256.KeyAgreement.PublicKey(
            x963Representation: try #require(try credentialCertificate.publicKey.p256).x963Representation)
        tokenRoot = try DeploymentPKI.readCertificate(named: PayService.Files.tokenRoot, from: directory)
    }

    func close() async { await connections.close() }

    /// A device named `name`: its TLS identity and SE certificate from the device CA, registered with the Pay
    /// server unless `register` is false.
    func device(
        _ name: String, organization: String = "Orchard device", register: Bool = true
    ) async throws -> InAppTestDevice {
        let now = Date()
        let subject = DistinguishedName([
            .organization(organization), .organizationalUnit("phone"), .userID("demo"), .commonName(name),
        ])
        let tlsKey = try P256.Signing.PrivateKey()
        let tlsCertificate = try Certificate.issue(
            subject: subject, publicKey: CertificatePublicKey(tlsKey.publicKey), issuer: deviceCA.issuer,
            notValidBefore: now.addingTimeInterval(-60), notValidAfter: now.addingTimeInterval(3600),
            extensions: [.basicConstraints(isCA: false), .extendedKeyUsage([.clientAuth])])
        let seKey = try P256.Signing.PrivateKey()
        let seCertificate = try Certificate.issue(
            subject: subject, publicKey: CertificatePublicKey(seKey.publicKey), issuer: deviceCA.issuer,
            notValidBefore: now.addingTimeInterval(-60), notValidAfter: now.addingTimeInterval(3600),
            extensions: [.basicConstraints(isCA: false), .keyUsage([.keyAgreement])])
        let client = try connections.client(
            identity: TLSIdentity(
                certificateChainPEM: tlsCertificate.pemRepresentation + deviceCA.certificate.pemRepresentation,
                privateKeyPEM: SecureBytes(Array(try tlsKey.pemRepresentation.utf8))))
        if register {
            let response = try await client.post(
                base + "/v1/devices/register",
                json: [
                    "secureElementCertificate": Data(seCertificate.derRepresentation).base64EncodedString(),
                    // These tests never leave lost mode: any Secure Enclave key will do.
                    "enclavePublicKey": Data(try P256.Signing.PrivateKey().publicKey.x963Representation)
                        .base64EncodedString(),
                ])
            try #require(response.status == .ok, "register: \(String(decoding: response.body, as: UTF8.self))")
        }
        return InAppTestDevice(
            name: name, client: client, secureElementKey: seKey, secureElementCertificate: seCertificate)
    }

    /// Asks for a nonce; returns its bytes.
    func nonce(for device: InAppTestDevice) async throws -> [UInt8] {
        let response = try await device.client.post(base + "/v1/payments/nonce", json: [String: String]())
        try #require(response.status == .ok, "nonce: \(String(decoding: response.body, as: UTF8.self))")
        let body = try JSONSerialization.jsonObject(with: response.body) as? [String: Any]
        let text = try #require(body?["nonce"] as? String)
        #expect(body?["expiresInSeconds"] as? Int == 60)
        return try #require(Data(base64Encoded: text).map { Array($0) })
    }

    /// A credential as a Secure Element makes it (signed with `signer`, sealed to the Pay server's key).
    func credential(
        _ nonce: [UInt8], signer: InAppTestDevice, merchant: String = InAppFixture.merchant,
        app: String = InAppFixture.app, amount: Int64 = 1999, cryptogramNonce: [UInt8]? = nil,
        applicationData: [UInt8]? = InAppFixture.applicationData
    ) throws -> [UInt8] {
        atc += 1
        let credential = try PaymentCredential(
            nonce: nonce, merchantIdentifier: merchant, applicationIdentifier: app,
            dpan: SecureBytes(Array(Self.dpan.utf8)), expiry: "301231",
            cryptogram: try RemoteCryptogram.generate(
                masterKey: Self.remoteMasterKey, atc: atc, amount: amount, currency: 840,
                nonce: cryptogramNonce ?? nonce, merchantIdentifier: merchant),
            eci: "05", amount: amount, currency: 840, applicationDataHash: applicationData.map { SHA256.hash($0) },
            channel: .inApp)
        return try SealedPaymentCredential.seal(credential, signingKey: signer.secureElementKey, to: credentialKey)
    }

    /// Sends a credential from `device`.
    func exchange(_ sealed: [UInt8], from device: InAppTestDevice) async throws -> HTTPResponse {
        try await device.client.post(
            base + "/v1/payments/credential", json: ["credential": Data(sealed).base64EncodedString()])
    }

    /// The error code of a refusal.
    static func errorCode(_ response: HTTPResponse) -> String? {
        let body = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any]
        return (body?["error"] as? [String: Any])?["code"] as? String
    }

    /// The demo merchant's decryptor, trusting the deployment's token root.
    func decryptor(_ identity: MerchantIdentity? = nil) throws -> PaymentTokenDecryptor {
        try PaymentTokenDecryptor(
            identities: [try identity ?? MerchantService.loadProcessingIdentity(from: directory)],
            trustRoots: [tokenRoot], clock: clock)
    }

    /// A second store on pay.sqlite (as the merchant commands use it).
    func payStore() throws -> Store { try PayStore.open(in: directory) }
}

@Suite("Pay server: in-app credentials over mutual TLS", .serialized)
struct InAppPaymentTests {
    @Test("A2: A credential becomes an EC_v1 token the merchant verifies and decrypts; the same nonce again is refused")
    func exchangeAndReplay() async throws {
        let f = try await InAppFixture()
        let phone = try await f.device("phone-a")
        let nonce = try await f.nonce(for: phone)
        let sealed = try f.credential(nonce, signer: phone)
        let response = try await f.exchange(sealed, from: phone)
        try #require(response.status == .ok, "\(String(decoding: response.body, as: UTF8.self))")
        let token = try PaymentToken(jsonBytes: Array(response.body))
        #expect(token.paymentData.version == .ecV1)
        let result = try f.decryptor().decrypt(
            token,
            order: ExpectedOrder(applicationData: InAppFixture.applicationData, amount: 1999, currencyCode: "840"))
        #expect(result.payment.applicationPrimaryAccountNumber == InAppFixture.dpan)
        #expect(result.payment.applicationExpirationDate == "301231" && result.payment.paymentDataType == .threeDSecure)
        guard case .threeDSecure(let cryptogram, let eci) = result.payment.credential else {
            Issue.record("not 3DSecure")
            return
        }
        #expect(eci == "05")
        let remote = try RemoteCryptogram(bytes: try #require(Data(base64Encoded: cryptogram)))
        #expect(
            try remote.verify(
                masterKey: InAppFixture.remoteMasterKey, amount: 1999, currency: 840,
                merchantIdentifierHash: SHA256.hash(Array(InAppFixture.merchant.utf8))))
        #expect(result.signature.signer.subject.commonName == "orchard-smp-broker-sign")
        // Another applicationData than the order's: the merchant refuses.
        #expect(throws: MerchantKitError.self) {
            try f.decryptor().decrypt(
                token, order: ExpectedOrder(applicationData: [1, 2, 3], amount: 1999, currencyCode: "840"))
        }
        // The same credential again: the nonce is used.
        let replay = try await f.exchange(sealed, from: phone)
        #expect(replay.status == .conflict && InAppFixture.errorCode(replay) == "nonceUsed")
        // A new credential with the used nonce: refused too.
        let again = try await f.exchange(try f.credential(nonce, signer: phone), from: phone)
        #expect(InAppFixture.errorCode(again) == "nonceUsed")
        await f.close()
    }

    /// The server remembers a client certificate it admitted (a keep-alive connection presents the same bytes on
    /// every request), but not past its validity period.
    @Test("A device certificate admitted before is refused once it has expired")
    func anAdmittedCertificateExpires() async throws {
        let f = try await InAppFixture()
        let phone = try await f.device("phone-a")
        _ = try await f.nonce(for: phone)
        let start = f.clock.now()
        f.clock.setWall(start.addingTimeInterval(2 * 3600))  // the device's TLS certificate is valid for one hour
        let response = try await phone.client.post(f.base + "/v1/payments/nonce", json: [String: String]())
        #expect(response.status == .forbidden, "\(String(decoding: response.body, as: UTF8.self))")
        f.clock.setWall(start)
        _ = try await f.nonce(for: phone)
        await f.close()
    }

    @Test("A4: The token decrypts for its merchant and for no other")
    func onlyForItsMerchant() async throws {
        let f = try await InAppFixture()
        let phone = try await f.device("phone-a")
        let response = try await f.exchange(try f.credential(try await f.nonce(for: phone), signer: phone), from: phone)
        let token = try PaymentToken(jsonBytes: Array(response.body))
        #expect(throws: Never.self) { try f.decryptor().decrypt(token) }
        let otherKey = try P256.KeyAgreement.PrivateKey()
        let other = try MerchantIdentity(key: .ec(otherKey), merchantIdentifier: "merchant.dev.other")
        #expect(throws: MerchantKitError.self) { try f.decryptor(other).decrypt(token) }
        // Even with the publicKeyHash check bypassed, another merchant's key cannot open it (A4).
        let forced = try MerchantIdentity(key: .ec(otherKey), merchantIdentifier: InAppFixture.merchant)
        #expect(throws: MerchantKitError.self) { try f.decryptor(forced).decrypt(token) }
        await f.close()
    }

    @Test("R5/R6: A device past its nonce quota gets 429 with Retry-After; the quota refills on the monotonic clock")
    func nonceQuotaPerDevice() async throws {
        let f = try await InAppFixture()
        let phone = try await f.device("phone-a")
        let other = try await f.device("phone-b")
        let quota = PayService.noncesPerMinute.defaultValue
        for _ in 0..<quota { _ = try await f.nonce(for: phone) }
        let refused = try await phone.client.post(f.base + "/v1/payments/nonce", json: [String: String]())
        #expect(refused.status == .tooManyRequests, "\(String(decoding: refused.body, as: UTF8.self))")
        #expect(refused.headers["Retry-After"] == "1")
        #expect(InAppFixture.errorCode(refused) == "rate_limited")
        _ = try await f.nonce(for: other)
        // Half an hour on the wall clock (within the device certificate's hour) refills nothing (R6); one second
        // of monotonic time gives one nonce back.
        let start = f.clock.now()
        f.clock.setWall(start.addingTimeInterval(1800))
        let still = try await phone.client.post(f.base + "/v1/payments/nonce", json: [String: String]())
        #expect(still.status == .tooManyRequests)
        f.clock.setWall(start)
        f.clock.advance(by: 1)
        _ = try await f.nonce(for: phone)
        await f.close()
    }

    @Test("A2/R6: An unknown nonce and an expired nonce (monotonic clock) are refused")
    func unknownAndExpired() async throws {
        let f = try await InAppFixture()
        let phone = try await f.device("phone-a")
        let unknown = try await f.exchange(
            try f.credential([UInt8](repeating: 7, count: 32), signer: phone), from: phone)
        #expect(unknown.status == .conflict && InAppFixture.errorCode(unknown) == "nonceUnknown")
        let nonce = try await f.nonce(for: phone)
        f.clock.advance(by: 61)
        let expired = try await f.exchange(try f.credential(nonce, signer: phone), from: phone)
        #expect(expired.status == .conflict && InAppFixture.errorCode(expired) == "nonceExpired")
        // Within the lifetime it passes, whatever the wall clock does.
        let fresh = try await f.nonce(for: phone)
        f.clock.advance(by: 59)
        f.clock.setWall(Date())
        #expect(try await f.exchange(try f.credential(fresh, signer: phone), from: phone).status == .ok)
        await f.close()
    }

    @Test("A nonce issued to device A and redeemed by device B is refused; so are foreign signatures")
    func anotherDevice() async throws {
        let f = try await InAppFixture()
        let a = try await f.device("phone-a")
        let b = try await f.device("phone-b")
        let nonce = try await f.nonce(for: a)
        let byB = try await f.exchange(try f.credential(nonce, signer: b), from: b)
        #expect(byB.status == .conflict && InAppFixture.errorCode(byB) == "nonceNotIssuedToDevice")
        // B relays A's credential: signed by A's SE, not by B's registered one.
        let aCredential = try f.credential(nonce, signer: a)
        let relayed = try await f.exchange(aCredential, from: b)
        #expect(InAppFixture.errorCode(relayed) == "credentialRejected")
        // Signed by B's SE but sent by A: the signature does not verify under A's registered SE key.
        let forged = try await f.exchange(try f.credential(nonce, signer: b), from: a)
        #expect(InAppFixture.errorCode(forged) == "credentialRejected")
        // A cryptogram bound to another nonce.
        let unbound = try await f.exchange(
            try f.credential(nonce, signer: a, cryptogramNonce: [UInt8](repeating: 1, count: 32)), from: a)
        #expect(InAppFixture.errorCode(unbound) == "credentialRejected")
        // Garbage is refused as such.
        let garbage = try await f.exchange([UInt8](repeating: 1, count: 200), from: a)
        #expect(garbage.status == .badRequest && InAppFixture.errorCode(garbage) == "credentialRejected")
        // None of that used the nonce: A's own credential still passes, once.
        #expect(try await f.exchange(aCredential, from: a).status == .ok)
        await f.close()
    }

    @Test("Only device certificates reach the nonce and credential routes")
    func onlyDevices() async throws {
        let f = try await InAppFixture()
        let anonymous = try f.connections.client()
        #expect(
            try await anonymous.post(f.base + "/v1/payments/nonce", json: [String: String]()).status == .unauthorized)
        let merchant = try f.connections.client(
            identity: try TLSIdentity.load(named: MerchantService.Files.identity, from: f.directory))
        #expect(try await merchant.post(f.base + "/v1/payments/nonce", json: [String: String]()).status == .forbidden)
        let notADevice = try await f.device("phone-x", organization: "Someone else", register: false)
        #expect(
            try await notADevice.client.post(f.base + "/v1/payments/nonce", json: [String: String]()).status
                == .forbidden)
        // A device of the device CA that never registered.
        let unregistered = try await f.device("phone-new", register: false)
        let refused = try await unregistered.client.post(f.base + "/v1/payments/nonce", json: [String: String]())
        #expect(refused.status == .forbidden && InAppFixture.errorCode(refused) == "deviceNotRegistered")
        let phone = try await f.device("phone-a")
        let answer = try await phone.client.get(f.base + PayAPI.Route.credentialCertificate)
        let pem = try answer.decodeJSON(CredentialCertificateResponse.self).certificate
        // The device accepts the key only from the root-issued credential certificate.
        let root = try DeploymentPKI.readCertificate(named: PKIFiles.rootCA, from: f.directory)
        let key = try PayCredentialKey(certificate: try Certificate(pemEncoded: pem), root: root, now: Date())
        #expect(key.publicKey == f.credentialKey)
        for other in [
            try DeploymentPKI.readCertificate(named: PKIFiles.deviceCA, from: f.directory),
            try DeploymentPKI.readCertificate(named: PayService.Files.tokenSigning, from: f.directory),
            phone.secureElementCertificate,
        ] {
            #expect(throws: PayClientError.self) { try PayCredentialKey(certificate: other, root: root, now: Date()) }
        }
        anonymous.shutdown()
        merchant.shutdown()
        await f.close()
    }

    @Test(
        "A3: 64 concurrent redemptions of one nonce: exactly one token, 63 refusals, one record",
        arguments: PartyBackend.all)
    func concurrentRedemptions(_ backend: PartyBackend) async throws {
        let f = try await InAppFixture(database: try backend.database())
        let phone = try await f.device("phone-a")
        let nonce = try await f.nonce(for: phone)
        let sealed = try f.credential(nonce, signer: phone)
        let statuses = try await withThrowingTaskGroup(of: (Int, String?).self) { group in
            for _ in 0..<64 {
                group.addTask {
                    let response = try await f.exchange(sealed, from: phone)
                    return (response.status.code, InAppFixture.errorCode(response))
                }
            }
            var all: [(Int, String?)] = []
            for try await status in group { all.append(status) }
            return all
        }
        #expect(statuses.filter { $0.0 == 200 }.count == 1)
        #expect(statuses.filter { $0.1 == "nonceUsed" }.count == 63)
        let store = try f.payStore()
        let records = try await store.read { db in
            try db.queryFirst("SELECT sum(purchases) FROM in_app_purchase_tallies", [], { try $0.int(0) })
        }
        #expect(records == 1)
        await store.close()
        await f.close()
    }

    @Test("A11: An app without the entitlement is refused (and the nonce stays usable)")
    func entitlement() async throws {
        let f = try await InAppFixture()
        let phone = try await f.device("phone-a")
        let nonce = try await f.nonce(for: phone)
        let refused = try await f.exchange(
            try f.credential(nonce, signer: phone, app: "dev.orchard.other-app"), from: phone)
        #expect(refused.status == .forbidden && InAppFixture.errorCode(refused) == "notEntitled")
        let unknownMerchant = try await f.exchange(
            try f.credential(nonce, signer: phone, merchant: "merchant.dev.nobody"), from: phone)
        #expect(InAppFixture.errorCode(unknownMerchant) == "notEntitled")
        #expect(try await f.exchange(try f.credential(nonce, signer: phone), from: phone).status == .ok)
        await f.close()
    }

    @Test("A revoked processing certificate gives no token; an RSA-only merchant gets RSA_v1 signed by the RSA leaf")
    func revokedAndRSA() async throws {
        let f = try await InAppFixture()
        let phone = try await f.device("phone-a")
        let store = try f.payStore()
        let certificates = MerchantCertificates(store: store, clock: SystemClock())
        let processing = try await certificates.list(merchantIdentifier: InAppFixture.merchant)
            .filter { $0.kind == "processing" }
        try #require(processing.count == 1)
        try await certificates.revoke(serial: processing[0].serial)
        #expect(
            try await certificates.list(merchantIdentifier: InAppFixture.merchant).first { $0.kind == "processing" }?
                .revokedAt != nil)
        let nonce = try await f.nonce(for: phone)
        let refused = try await f.exchange(try f.credential(nonce, signer: phone), from: phone)
        #expect(refused.status == .conflict && InAppFixture.errorCode(refused) == "noProcessingCertificate")
        do {
            try await certificates.revoke(serial: "00")
            Issue.record("revoking an unknown serial succeeded")
        } catch let error as PayServerError {
            #expect(error.code == .notFound)
        }

        // An RSA merchant.
        let registry = MerchantRegistry(
            store: store,
            authority: try CertificateAuthority.load(named: PayService.Files.merchantCA, from: f.directory),
            clock: SystemClock(), random: SystemRandom())
        let rsaMerchant = "merchant.dev.orchard.rsa"
        try await registry.registerMerchant(identifier: rsaMerchant, displayName: "RSA Store")
        let rsaKey = try RSA.PrivateKey(keySize: 2048)
        let csr = try CertificateSigningRequest.create(
            subject: DistinguishedName([.userID(rsaMerchant), .commonName(rsaMerchant)]),
            key: CertificatePrivateKey(rsaKey))
        let chain = try await registry.issuePaymentProcessingCertificate(for: csr, merchantIdentifier: rsaMerchant)
        try await registry.entitle(application: InAppFixture.app, merchantIdentifiers: [rsaMerchant])
        #expect(try await certificates.list(merchantIdentifier: rsaMerchant).first?.keyType == "RSA-2048")
        let response = try await f.exchange(
            try f.credential(try await f.nonce(for: phone), signer: phone, merchant: rsaMerchant), from: phone)
        try #require(response.status == .ok, "\(String(decoding: response.body, as: UTF8.self))")
        let token = try PaymentToken(jsonBytes: Array(response.body))
        #expect(token.paymentData.version == .rsaV1)
        let identity = try MerchantIdentity(certificate: chain[0], privateKeyPEM: rsaKey.pemRepresentation)
        let result = try f.decryptor(identity).decrypt(token)
        #expect(result.payment.applicationPrimaryAccountNumber == InAppFixture.dpan)
        #expect(result.signature.signer.subject.commonName == "orchard-rsa-smp-broker-sign")
        #expect(throws: MerchantKitError.self) { try f.decryptor().decrypt(token) }
        await store.close()
        await f.close()
    }

    @Test(
        "V1/V2: The Pay server's files and logs hold no DPAN, applicationData, item or nonce; no device next to an amount"
    )
    func nothingRetained() async throws {
        let f = try await InAppFixture()
        let phone = try await f.device("phone-secret-name")
        var nonces: [[UInt8]] = []
        for amount in [1999, 45_000] as [Int64] {
            let nonce = try await f.nonce(for: phone)
            nonces.append(nonce)
            #expect(
                try await f.exchange(try f.credential(nonce, signer: phone, amount: amount), from: phone).status
                    == .ok)
        }
        let store = try f.payStore()
        let rows = try await store.read { db in
            try db.query("SELECT device, boot_id, issued_at_ns, used FROM payment_nonces", []) { row in
                [try row.optionalString(0), try row.optionalString(1), try row.optionalInt64(2).map(String.init)]
                    .compactMap { $0 }.count + (try row.bool(3) ? 0 : 100)
            }
        }
        #expect(rows == [0, 0])  // used, and nothing but the keyed hash and purge time left
        let records = try await store.read { db in
            try db.query(
                "SELECT payment_channel, currency_code, value_band, purchases FROM in_app_purchase_tallies ORDER BY 3",
                []
            ) { row in "\(try row.string(0)) \(try row.string(1)) \(try row.string(2)) \(try row.int(3))" }
        }
        #expect(records == ["in-app 840 1000-9999 1", "in-app 840 10000-99999 1"])
        // No tally column shares a name with another table's, and none names a party.
        let tables = try await store.read { db in
            try db.query("SELECT name FROM sqlite_master WHERE type = 'table'", []) { try $0.string(0) }
        }
        var otherColumns: Set<String> = []
        for table in tables where table != "in_app_purchase_tallies" {
            let names = try await store.read { db in
                try db.query("SELECT name FROM pragma_table_info(?)", [.text(table)]) { try $0.string(0) }
            }
            otherColumns.formUnion(names)
        }
        let tallyColumns = try await store.read { db in
            try db.query("SELECT name FROM pragma_table_info('in_app_purchase_tallies')", []) { try $0.string(0) }
        }
        #expect(tallyColumns.count == 6 && otherColumns.intersection(tallyColumns).isEmpty)
        for name in tallyColumns {
            for word in ["device", "account", "card", "pan", "merchant", "token", "app", "nonce", "id"] {
                #expect(!name.split(separator: "_").contains(Substring(word)), "\(name) looks identifying")
            }
        }
        await store.close()
        await f.close()
        let forbidden: [(String, [UInt8])] =
            [
                ("DPAN", Array(InAppFixture.dpan.utf8)), ("applicationData", InAppFixture.applicationData),
                ("item label", Array("Orchard Tee".utf8)),
            ] + nonces.map { ("nonce", $0) }
        let enumerator = FileManager.default.enumerator(atPath: f.directory.path)
        var scanned: [String] = []
        while let relative = enumerator?.nextObject() as? String {
            let path = f.directory.path + "/" + relative
            guard !relative.hasPrefix("pki"), let data = FileManager.default.contents(atPath: path) else { continue }
            scanned.append(relative)
            let bytes = Array(data)
            for (what, needle) in forbidden {
                let found = contains(bytes, needle)
                #expect(!found, "\(relative) holds the \(what)")
            }
        }
        #expect(scanned.contains("pay.sqlite"))
        #expect(scanned.contains { $0.hasPrefix("logs/") })
    }

    func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, haystack.count >= needle.count else { return false }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if Array(haystack[start..<(start + needle.count)]) == needle { return true }
        }
        return false
    }
}
