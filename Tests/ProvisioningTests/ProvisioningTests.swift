import CardBasics
import Device
import Foundation
import Issuer
import NetworkServer
import OrchardCrypto
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import OrchardX509
import PayAPI
import PayClient
import PayServer
import SecureElement
import Testing
import TokenService
import Wallet

/// Provisioning and lifecycle through the real Pay server and network over HTTPS (cases P1–P4, L1–L3).
@Suite("Provisioning through the Pay server", .serialized)
struct ProvisioningTests {
    @Test("P4: Approve, step-up (no code: refused; with the code: added), decline: nothing installed on a decline")
    func decisions() async throws {
        let sandbox = try await Sandbox()
        let phone = try await sandbox.makeDevice("phone", kind: .phone, biometry: .face)

        guard case .added(_, let reference, let card, _) = try await sandbox.addCard("4111111111111111", to: phone)
        else { Issue.record("the approve card was not added"); return await sandbox.close() }
        #expect(card.network == "visa" && card.suffix == "1111" && card.type == "credit")
        #expect(try await sandbox.networkTokens(of: "phone").map(\.tokenReference) == [reference])

        await #expect(throws: PayClientError.self) { _ = try await sandbox.addCard("4000000000003220", to: phone) }
        guard case .added = try await sandbox.addCard("4000000000003220", to: phone, otp: "123456") else {
            Issue.record("the step-up card was not added with its code"); return await sandbox.close()
        }
        guard case .declined(let reason) = try await sandbox.addCard("4000000000000002", to: phone) else {
            Issue.record("the decline card was not declined"); return await sandbox.close()
        }
        #expect(!reason.isEmpty)
        #expect(await phone.wallet.allCards.count == 2)
        #expect(try await sandbox.networkTokens(of: "phone").count == 2)
        await sandbox.close()
    }

    @Test("P2: One card on a phone and a watch: two DPANs; lost mode on the phone leaves the watch working")
    func twoDevices() async throws {
        let sandbox = try await Sandbox()
        let phone = try await sandbox.makeDevice("phone", kind: .phone, biometry: .face)
        let watch = try await sandbox.makeDevice("watch", kind: .watch, biometry: .none)
        _ = try await sandbox.addCard("5555555555554444", to: phone)
        _ = try await sandbox.addCard("5555555555554444", to: watch)
        let phoneToken = try #require(try await sandbox.networkTokens(of: "phone").first)
        let watchToken = try #require(try await sandbox.networkTokens(of: "watch").first)
        #expect(phoneToken.dpan != watchToken.dpan && phoneToken.cardID == watchToken.cardID)

        let result = try await sandbox.client("phone").lifecycle(device: "phone", action: .lostMode)
        #expect(result.cards.map(\.state) == ["suspended"])
        #expect(try await sandbox.networkTokens(of: "phone").first?.state == .suspended)
        #expect(try await sandbox.networkTokens(of: "watch").first?.state == .active)
        await sandbox.close()
    }

    @Test("L1: Lost mode while the device is offline blocks its tokens at once; the device learns it later; resume")
    func lostModeOffline() async throws {
        let sandbox = try await Sandbox()
        let phone = try await sandbox.makeDevice("phone", kind: .phone, biometry: .face)
        try await sandbox.makeDevice("watch", kind: .watch, biometry: .none)
        _ = try await sandbox.addCard("4111111111111111", to: phone)
        let cardID = try #require(await phone.wallet.allCards.first?.id)

        // The owner acts from the watch: the phone takes no part.
        try await sandbox.register("watch")
        _ = try await sandbox.client("watch").lifecycle(device: "phone", action: .lostMode)
        #expect(try await sandbox.networkTokens(of: "phone").first?.state == .suspended)
        #expect(try await phone.wallet.card(id: cardID).state == .active)  // not yet told

        let applied = try await NotificationSync.run(
            client: try sandbox.client("phone"),
            apply: { reference, change in try await phone.applyTokenStatus(tokenReference: reference, change) },
            lostMode: { try phone.setLostMode($0) })
        #expect(applied.map(\.state) == ["suspended"])
        #expect(try await phone.wallet.card(id: cardID).state == .suspended)
        #expect(phone.isInLostMode)  // the device's own state came with the notifications
        // Acknowledged: a second sync applies nothing.
        #expect(try await sandbox.client("phone").notifications(after: 0).isEmpty)

        // Leaving lost mode takes the passcode on the phone itself, attested by its Secure Enclave.
        _ = try await sandbox.client("watch").resume(device: "phone") { challenge in
            try await phone.secureEnclave.attestPasscode(SecureBytes(Array("123456".utf8)), challenge: challenge)
                .derRepresentation
        }
        #expect(try await sandbox.networkTokens(of: "phone").first?.state == .active)
        _ = try await NotificationSync.run(
            client: try sandbox.client("phone"),
            apply: { reference, change in try await phone.applyTokenStatus(tokenReference: reference, change) },
            lostMode: { try phone.setLostMode($0) })
        #expect(try await phone.wallet.card(id: cardID).state == .active)
        #expect(!phone.isInLostMode)
        await sandbox.close()
    }

    @Test("L2: Erase deletes the tokens at the token service and terminates the cards on the device")
    func erase() async throws {
        let sandbox = try await Sandbox()
        let phone = try await sandbox.makeDevice("phone", kind: .phone, biometry: .face)
        _ = try await sandbox.addCard("4111111111111111", to: phone)
        _ = try await sandbox.client("phone").lifecycle(device: "phone", action: .erase)
        #expect(try await sandbox.networkTokens(of: "phone").first?.state == .deleted)
        // Erased: provisioning is refused until the device registers again; its notifications still arrive.
        await #expect(throws: PayClientError.self) { _ = try await sandbox.client("phone").provisioningCertificate() }
        _ = try await NotificationSync.run(
            client: try sandbox.client("phone"),
            apply: { reference, change in try await phone.applyTokenStatus(tokenReference: reference, change) },
            lostMode: { try phone.setLostMode($0) })
        #expect(await phone.wallet.allCards.map(\.state) == [.terminated])
        #expect(await phone.secureElement.cards().map(\.state) == [.terminated])
        await sandbox.close()
    }

    @Test("A retry of the same request returns the first decision and token, never a second DPAN")
    func idempotentRetry() async throws {
        let sandbox = try await Sandbox()
        try await sandbox.makeDevice("phone", kind: .phone, biometry: .face)
        let client = try sandbox.client("phone")
        try await sandbox.register("phone")
        let key = try ProvisioningKey(
            certificate: try await client.provisioningCertificate(), root: sandbox.root, now: Date())
        let sealed = try key.seal(
            try CardEntry(number: "4111111111111111", expiry: "12/34", verificationValue: "266", cardholderName: "A B"),
            deviceID: "phone")
        let check = CheckCardBody(idempotencyKey: "check-1", encryptedCardData: Data(sealed).base64EncodedString())
        let first = try await client.checkCard(check)
        let again = try await client.checkCard(check)
        #expect(first == again && first.outcome == .approved)
        let link = LinkBody(idempotencyKey: "link-1", sessionID: try #require(first.sessionID), termsAccepted: true)
        let linked = try await client.link(link)
        let relinked = try await client.link(link)
        #expect(linked.tokenReference != nil && linked == relinked)
        #expect(try await sandbox.networkTokens(of: "phone").count == 1)
        // The same key with another request (card data sealed again) is refused, not answered with a new token.
        let resealed = try key.seal(
            try CardEntry(number: "4111111111111111", expiry: "12/34", verificationValue: "266", cardholderName: "A B"),
            deviceID: "phone")
        do {
            _ = try await client.checkCard(
                CheckCardBody(idempotencyKey: "check-1", encryptedCardData: Data(resealed).base64EncodedString()))
            Issue.record("a different request with a used key was answered")
        } catch {
            #expect(error.httpStatus == 422)
        }
        #expect(try await sandbox.networkTokens(of: "phone").count == 1)
        await sandbox.close()
    }

    @Test("P3: No key the Pay server owns opens the card data; a certificate not from the root is refused")
    func payServerCannotRead() async throws {
        let sandbox = try await Sandbox()
        try await sandbox.makeDevice("phone", kind: .phone, biometry: .face)
        let client = try sandbox.client("phone")
        try await sandbox.register("phone")
        let key = try ProvisioningKey(
            certificate: try await client.provisioningCertificate(), root: sandbox.root, now: Date())
        let card = try CardEntry(
            number: "4111111111111111", expiry: "12/34", verificationValue: "266", cardholderName: "Alice Doe")
        let sealed = try key.seal(card, deviceID: "phone")
        let purpose = PayAPI.cardDataPurpose(deviceID: "phone", recipient: key.recipient)
        let payKeys = [
            PayService.Files.tokenRoot, PayService.Files.tokenIntegrationCA, PayService.Files.tokenSigning,
            SigningLeaves.fileName(.merchantSession), SigningLeaves.fileName(.domainAssociationFile),
            SigningLeaves.fileName(.capabilityStatement), PayService.Files.merchantCA, PayService.Files.client,
            "pay-tls",
        ]
        for name in payKeys {
            let pem = try sandbox.deployment.readPrivateKey(named: name)
            let privateKey = try pem.withUnsafeBytes {
                try P256.KeyAgreement.PrivateKey(pemRepresentation: String(decoding: $0, as: UTF8.self))
            }
            #expect(throws: CryptoError.self, "pki/\(name).key opened the card data") {
                _ = try SealedEnvelope.open(sealed, with: privateKey, purpose: purpose)
            }
        }
        // A certificate for the relay's own key, even one from a CA under the root, is not the token service's.
        let merchantCA = try CertificateAuthority.load(named: PayService.Files.merchantCA, from: sandbox.deployment)
        let forged = try Certificate.issue(
            subject: DistinguishedName([
                .organization("Orchard"), .organizationalUnit(PayAPI.ProvisioningCertificate.organizationalUnit),
                .commonName("token-service"),
            ]),
            publicKey: CertificatePublicKey(try P256.Signing.PrivateKey().publicKey), issuer: merchantCA.issuer,
            notValidBefore: Date().addingTimeInterval(-60), notValidAfter: Date().addingTimeInterval(3600),
            extensions: [.basicConstraints(isCA: false), .keyUsage([.keyAgreement])])
        #expect(throws: PayClientError.self) {
            _ = try ProvisioningKey(certificate: forged, root: sandbox.root, now: Date())
        }
        // The root's own TLS certificate for the network is from the root, but not a provisioning certificate.
        let tls = try Certificate(pemEncoded: try sandbox.deployment.readCertificate(named: "network-tls"))
        #expect(throws: PayClientError.self) {
            _ = try ProvisioningKey(certificate: tls, root: sandbox.root, now: Date())
        }
        await sandbox.close()
    }

    @Test("P1: At rest: no FPAN in clear in any file, issuer.sqlite included; no DPAN or CVV at the Pay server")
    func atRest() async throws {
        let sandbox = try await Sandbox()
        let phone = try await sandbox.makeDevice("phone", kind: .phone, biometry: .face)
        _ = try await sandbox.addCard("4111111111111111", to: phone)
        let dpan = try #require(try await sandbox.networkTokens(of: "phone").first?.dpan.digits)
        try phone.checkpoint()
        let fpanFiles = try sandbox.filesHolding("4111111111111111")
        // The issuer seals its card records and finds them by keyed hash, as the vault does.
        #expect(fpanFiles.isEmpty, "\(fpanFiles)")
        let dpanFiles = try sandbox.filesHolding(dpan)
        #expect(dpanFiles.allSatisfy { $0.hasPrefix("network.sqlite") }, "\(dpanFiles)")
        // The CVV as the card data carries it (TLV item 32) or as JSON: nowhere.
        let cvvForms: [[UInt8]] = [[0x32, 0x00, 0x03] + Array("266".utf8), Array("\"266\"".utf8)]
        for (file, bytes) in try sandbox.files() {
            for form in cvvForms { #expect(!Sandbox.contains(bytes, form), "\(file) holds the CVV") }
        }
        await sandbox.close()
    }

    @Test("Only a registered device of the account: unregistered, another account's device, another's session")
    func access() async throws {
        let sandbox = try await Sandbox()
        let phone = try await sandbox.makeDevice("phone", kind: .phone, biometry: .face)
        try await sandbox.makeDevice("stranger", kind: .phone, biometry: .touch, account: "mallory")
        // Not registered yet: provisioning is refused.
        do {
            _ = try await sandbox.client("stranger").provisioningCertificate()
            Issue.record("an unregistered device got the provisioning certificate")
        } catch let error as PayClientError {
            #expect(error.httpStatus == 403 && error.serverCode == "deviceNotRegistered")
        }
        _ = try await sandbox.addCard("4111111111111111", to: phone)
        try await sandbox.register("stranger")
        // Another account's device cannot put the phone in lost mode.
        do {
            _ = try await sandbox.client("stranger").lifecycle(device: "phone", action: .lostMode)
            Issue.record("another account suspended the phone")
        } catch let error as PayClientError {
            #expect(error.httpStatus == 404)
        }
        #expect(try await sandbox.networkTokens(of: "phone").first?.state == .active)
        // A Secure Element certificate of another device does not register this one.
        do {
            _ = try await sandbox.client("stranger").register(
                secureElementCertificate: try Device.identity(of: "phone", in: sandbox.deployment).certificate,
                enclavePublicKey: try Device.identity(of: "phone", in: sandbox.deployment).enclavePublicKey)
            Issue.record("a device registered with another's Secure Element certificate")
        } catch let error as PayClientError {
            #expect(error.serverCode == "deviceMismatch")
        }
        await sandbox.close()
    }
}
