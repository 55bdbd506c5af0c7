import Acquirer
import CardBasics
import CommandTestSupport
import Device
import DeviceControlAPI
import DeviceTestSupport
import EMV
import Foundation
import Issuer
import NetworkServer
import NetworkTestSupport
import OrchardCrypto
import OrchardHTTP
import OrchardLogging
import OrchardRuntime
import OrchardX509
import PaymentCredential
import SecureElement
import Terminal
import Testing
import TokenService

/// Every party real and in its own place: the phone as `orchard device run` (provisioned by the token
/// service through its device certificate), the terminal as `orchard terminal charge`, the two talking only
/// through the NFC link; the network service's routes (acquirer → token service with the EMV ARQC check →
/// demo issuer) over HTTPS in this process.
@Suite("In store through the network service", .serialized)
struct NetworkEndToEndTests {
    @Test("Approved through acquirer, token service and issuer; lost mode declines; a replayed ATC is refused")
    func throughTheNetwork() async throws {
        let directory = try TemporaryDirectory()
        let deployment = directory.deployment
        let deviceCA = try DeviceCertificateAuthority.loadOrCreate(in: deployment)
        let network = try await NetworkHarness(
            deviceKeyVerifier: try DeviceCAKeyVerifier(deviceCARoots: [deviceCA.certificate], clock: SystemClock()))
        network.clock.setWall(Date())  // the device certificate was issued now, by the system clock
        // The phone's factory pins this token service's install key.
        try TestInstallAuthority.pin(
            try network.hsm.signingPublicKey(of: network.keys.personalisationSigningKey), in: deployment)
        try await createDevice(directory, "phone", kind: "phone", biometry: "face")
        let acquirer = Acquirer(
            acquirerID: "acq-1", store: InMemoryAcquirerStore(), network: network.tokenService, clock: network.clock)
        try await acquirer.registerMerchant(
            MerchantAccount(
                merchantID: "m-coffee", name: "Orchard Coffee", categoryCode: "5814", countryCode: "840",
                terminalIDs: ["T-E2E"]))
        var router = Router()
        NetworkRoutes.install(
            into: &router, tokenService: network.tokenService, acquirer: acquirer, issuerID: TestCards.issuerID,
            access: NetworkAccess(tokenRequestor: .none, acquiring: .none, issuer: .none))
        let certificate = try EphemeralCertificate()
        let roots = directory.path + "/network-root.pem"
        try Data(certificate.certificatePEM.utf8).write(to: URL(fileURLWithPath: roots))
        let server = try HTTPServer(
            configuration: HTTPServerConfiguration(
                listeners: [
                    .init(
                        port: 0,
                        tls: TLSServerConfiguration(
                            certificateChainPEM: certificate.certificatePEM, privateKeyPEM: certificate.privateKeyPEM))
                ], threads: 1, shutdownDeadline: .seconds(5)),
            router: router, logger: .disabled)
        try server.start()

        // Provisioning by the token service: Check Card, Link and Provision with the device certificate.
        let phone = try await DeviceProcessHandle(deployment, name: "phone", autoAuth: "face-id")
        let identity = try Device.identity(of: "phone", in: deployment)
        let pan = try PrimaryAccountNumber("4111111111111111")
        let payload = try CardDataPayload(
            pan: pan, expiry: try network.testCardExpiry(),
            cardVerificationValue: try CardVerificationValue(try network.cvv(pan.digits)), cardholderName: "Alice")
        let check = try await network.tokenService.checkCard(
            CheckCardRequest(
                idempotencyKey: "add-card-1", tokenRequestorID: TokenRequestor.orchardPay.id, deviceID: "phone",
                deviceKind: "phone",
                encryptedCardData: try EncryptedEnvelope.seal(
                    try payload.encoded(), to: network.tokenService.provisioningPublicKey,
                    label: try network.tokenService.cardDataLabel(deviceID: "phone"))))
        guard
            case .provisioned(let token) = try await network.tokenService.linkAndProvision(
                LinkAndProvisionRequest(
                    idempotencyKey: "link-1", sessionID: try #require(check.sessionID), deviceID: "phone",
                    secureElementCertificateChain: [identity.certificate.derRepresentation], termsAccepted: true))
        else {
            Issue.record("Link and Provision did not provision")
            return
        }
        let card = try await phone.send(
            AddCard(
                envelope: Data(token.personalisation.serialized), type: "credit", suffix: pan.suffix,
                displayName: "Orchard Visa"))
        #expect(card.deviceAccountSuffix == token.dpanSuffix, "\(card)")

        let setup = try await orchard([
            "terminal", "setup", "--data-dir", directory.path, "--terminal", "T-E2E", "--merchant", "m-coffee",
            "--acquirer-url", "https://127.0.0.1:\(server.port)", "--acquirer-roots", roots,
        ])
        #expect(setup.status == 0, "\(setup.stderr)")

        let (firstOutput, first) = try await charge(directory, "4.50", device: "phone")
        #expect(first["outcome"] as? String == "approved" && first["responseCode"] as? String == "00", "\(first)")
        #expect((first["maskedPan"] as? String)?.hasSuffix(token.dpanSuffix) == true)
        #expect(first["approvalCode"] as? String != nil)
        #expect(try await network.issuer.account(id: "acct-1")?.balance == 450)
        let (_, second) = try await charge(directory, "9.90", device: "phone")
        #expect(second["outcome"] as? String == "approved", "\(second)")
        #expect(try await network.issuer.account(id: "acct-1")?.balance == 1_440)

        // Lost mode: the network suspends the device's token; the phone still taps, the network declines.
        _ = try await network.tokenService.suspendDevice("phone", by: .cardholder)
        let (_, lost) = try await charge(directory, "1.00", device: "phone")
        #expect(lost["outcome"] as? String == "declined" && lost["responseCode"] as? String == "62", "\(lost)")
        #expect(lost["reason"] as? String == "tokenSuspended")
        _ = try await network.tokenService.resumeDevice("phone", by: .cardholder)
        let (_, resumed) = try await charge(directory, "1.00", device: "phone")
        #expect(resumed["outcome"] as? String == "approved", "\(resumed)")
        #expect(try await network.issuer.account(id: "acct-1")?.balance == 1_540)

        // The terminal's files hold the DPAN masked only; the FPAN never reached the terminal at all.
        let vault = try #require(try await network.vault.token(reference: token.tokenReference))
        let dpan = vault.dpan.digits
        let files =
            [deployment.databasePath(for: .terminal), deployment.logPath(for: .terminal)]
            + ["-wal", "-shm"].map { deployment.databasePath(for: .terminal) + $0 }
        for path in files where FileManager.default.fileExists(atPath: path) {
            let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
            for number in [dpan, pan.digits] {
                for form in cardNumberForms(number) { #expect(!bytes.containsSequence(form), "\(path)") }
            }
        }
        #expect(!firstOutput.stdout.contains(dpan) && !firstOutput.stderr.contains(dpan))
        phone.stop()
        await server.shutdown()
    }
}
