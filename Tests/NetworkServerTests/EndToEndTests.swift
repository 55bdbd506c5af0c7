import Acquirer
import CardBasics
import CommandTestSupport
import Device
import DeviceTestSupport
import EMV
import Foundation
import Issuer
import NetworkAuthorizationAPI
import NetworkServer
import NetworkTestSupport
import OrchardCrypto
import OrchardRuntime
import OrchardStore
import OrchardX509
import PaymentCredential
import SecureElement
import Testing
import TokenService
import Wallet

/// The terminal's view of a device in the field.
struct DeviceLink: CardTransport {
    let device: Device
    func transmit(_ command: CommandAPDU) async throws -> ResponseAPDU {
        try ResponseAPDU(bytes: try await device.transceive(try command.encoded()))
    }
}

/// Every party real: the device (Secure Element, Secure Enclave, wallet) with its certificate from the
/// deployment's device CA, the token service checking that certificate and sealing the personalisation to
/// it, the EMV terminal reading the device, the acquirer, the token service verifying the ARQC with the EMV
/// verifier, and the demo issuer.
///
/// The token vault (ATC windows) and the issuer (holds, balances) are the network's stores, on an SQLite file and
/// on PostgreSQL in turn.
@Suite("End to end: device, terminal, acquirer, token service, issuer", .serialized)
struct EndToEndTests {
    @Test(arguments: TestPostgreSQL.enabled ? [false, true] : [false])
    func provisionTapAndPay(onPostgreSQL: Bool) async throws {
        let directory = try TemporaryDirectory()
        let deployment = DeploymentDirectory(path: directory.path)
        let clock = ManualClock(now: NetworkHarness.start)
        let deviceCA = try DeviceCertificateAuthority.loadOrCreate(in: deployment, clock: clock)
        func location(_ name: String) async throws -> StoreLocation {
            guard onPostgreSQL else { return .file("\(directory.path)/\(name).sqlite") }
            return .postgreSQL(
                try PostgreSQLLocation(
                    url: try await TestPostgreSQL.shared().url, schema: TestPostgreSQL.freshSchema(name)))
        }
        let vaultStore = try SQLiteTokenVaultStore(location: try await location("network"))
        let issuerStore = try await SQLiteIssuerStore.open(
            location: try await location("issuer"), key: try IssuerStorageKey.generate())
        defer {
            Task {
                await vaultStore.store.close()
                await issuerStore.store.close()
            }
        }
        let network = try await NetworkHarness(
            vaultStore: vaultStore, issuerStore: issuerStore,
            deviceKeyVerifier: try DeviceCAKeyVerifier(deviceCARoots: [deviceCA.certificate], clock: clock))
        // The factory pins this token service's install-signing key in the phone's Secure Element.
        try TestInstallAuthority.pin(
            try network.hsm.signingPublicKey(of: network.keys.personalisationSigningKey), in: deployment)
        let identity = try Device.create(
            in: deployment, name: "alice-phone",
            profile: try DeviceProfile(kind: .phone, biometry: .face, account: "alice"),
            clock: clock)
        let device = try await Device.open(in: deployment, name: "alice-phone", clock: clock)
        try await device.secureEnclave.setPasscode(SecureBytes(Array("739146".utf8)), current: nil)
        let acquirer = Acquirer(acquirerID: "acq-1", store: InMemoryAcquirerStore(), network: network.tokenService)
        try await acquirer.registerMerchant(
            MerchantAccount(
                merchantID: "m-coffee", name: "Orchard Coffee", categoryCode: "5814", countryCode: "840",
                terminalIDs: ["T0001"]))

        // Provisioning: the card data sealed to the token service, Check Card, Link and Provision with the
        // device certificate, the personalisation installed in the device's Secure Element.
        let pan = try PrimaryAccountNumber("4111111111111111")
        let payload = try CardDataPayload(
            pan: pan, expiry: try CardExpiry(year: 2034, month: 12),
            cardVerificationValue: try CardVerificationValue(try network.cvv(pan.digits)), cardholderName: "Alice")
        let check = try await network.tokenService.checkCard(
            CheckCardRequest(
                idempotencyKey: "add-card-1", tokenRequestorID: TokenRequestor.orchardPay.id, deviceID: "alice-phone",
                deviceKind: "phone",
                encryptedCardData: try EncryptedEnvelope.seal(
                    try payload.encoded(), to: network.tokenService.provisioningPublicKey,
                    label: try network.tokenService.cardDataLabel(deviceID: "alice-phone"))))
        let sessionID = try #require(check.sessionID)
        guard
            case .provisioned(let token) = try await network.tokenService.linkAndProvision(
                LinkAndProvisionRequest(
                    idempotencyKey: "link-1", sessionID: sessionID, deviceID: "alice-phone",
                    secureElementCertificateChain: [identity.certificate.derRepresentation], termsAccepted: true))
        else {
            Issue.record("Link and Provision did not provision")
            return
        }
        let card = try await device.installCard(
            envelope: token.personalisation.serialized,
            display: CardDisplayInput(type: .credit, suffix: pan.suffix, displayName: "Orchard Visa"))
        #expect(card.deviceAccountSuffix == token.dpanSuffix && card.network == "visa")

        // In store: Face ID, the tap, the acquirer, the network, the issuer.
        func pay(
            stan: String, amount: UInt64
        ) async throws -> (AcquirerAuthorizationResult, AcquirerAuthorizationRequest) {
            guard case .authorized = try await device.authenticate(.faceID(matched: true)) else {
                throw TestDoubleError("Face ID did not authorize")
            }
            try await device.fieldOn()
            let outcome = try await TerminalKernel(
                configuration: TerminalConfiguration(countryCode: 840, currencyCode: 840)
            )
            .run(
                TransactionParameters(amount: amount, date: try TransactionDate(yymmdd: "260301")),
                card: DeviceLink(device: device))
            try await device.fieldOff()
            let read = try #require(outcome.card)
            let submission = CryptogramSubmission(
                kind: .proximityARQC, cryptogram: read.cryptogram, applicationTransactionCounter: read.atc,
                transactionData: read.field55Bytes)
            let request = AcquirerAuthorizationRequest(
                origin: .terminal(terminalID: "T0001", systemTraceAuditNumber: stan), merchantID: "m-coffee",
                pan: try PrimaryAccountNumber(read.pan), expiry: try CardExpiry(yymm: read.expiry),
                amount: try Money(minorUnits: Int64(amount), currency: Currency("840")), channel: .contactless,
                cryptogram: submission)
            return (try await acquirer.authorize(request), request)
        }
        let (first, firstRequest) = try await pay(stan: "000001", amount: 450)
        #expect(first.isApproved && first.maskedPAN.hasSuffix(token.dpanSuffix))
        #expect(try await network.issuer.account(id: "acct-1")?.balance == 450)
        let (second, _) = try await pay(stan: "000002", amount: 990)
        #expect(second.isApproved)

        // The first cryptogram replayed under a new STAN: the token service refuses its ATC.
        let replay = try await acquirer.authorize(
            AcquirerAuthorizationRequest(
                origin: .terminal(terminalID: "T0001", systemTraceAuditNumber: "000003"), merchantID: "m-coffee",
                pan: firstRequest.pan, expiry: firstRequest.expiry, amount: firstRequest.amount,
                channel: .contactless, cryptogram: firstRequest.cryptogram))
        #expect(replay.responseCode == .cryptographicFailure && replay.declineReason == "atcReplayed")

        // Lost mode: the token is suspended at the network while the device itself still taps.
        try await network.tokenService.suspendDevice("alice-phone", by: .cardholder)
        let (lost, _) = try await pay(stan: "000004", amount: 100)
        #expect(lost.responseCode == .restrictedCard && lost.declineReason == "tokenSuspended")
        #expect(try await network.issuer.account(id: "acct-1")?.balance == 1_440)
    }

}
