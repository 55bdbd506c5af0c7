import CardBasics
import Foundation
import Issuer
import OrchardCrypto
import PaymentCredential
import SecureElement
import Testing
import TokenService

/// The token service writes the personalisation a real Secure Element reads: one format
/// (`PaymentCredential.PersonalisationData`), one envelope purpose, and keys that arrive as derived.
@Suite("Personalisation contract: the token service writes, the Secure Element reads")
struct PersonalisationContractTests {
    @Test func bothSidesSealAndOpenUnderTheSamePurpose() {
        #expect(TokenService.personalisationLabel.purposeString == PersonalisationData.envelopePurpose)
    }

    @Test func theHSMsEnvelopeInstallsInARealSecureElement() async throws {
        let random = InsecureDeterministicRandom(seed: Array("personalisation contract".utf8))
        let storageKey = SymmetricKey(data: random.bytes(32))
        let elementStorage = InMemorySealedRecordStorage()
        let enclaveStorage = InMemorySealedRecordStorage()
        let clock = ManualClock(now: Date(timeIntervalSince1970: 1_750_000_000))
        let hsm = try SoftwareHSMTests.hsm()
        let signingKey = try hsm.generateKey(usage: .personalisationSigning, id: "tsp-personalisation-signing")
        let certificate = Array("the SE's device certificate".utf8)
        // The factory pins the token service's install key and keeps the digest of the certificate it issued.
        let (elementKey, _) = try SecureElement.manufacture(
            profile: try DeviceProfile(kind: .phone, biometry: .face, account: "alice"),
            elementStorage: elementStorage, enclaveStorage: enclaveStorage, storageKey: storageKey, random: random,
            installAuthority: try hsm.signingPublicKey(of: signingKey), certify: { _ in certificate })
        let element = try SecureElement(storage: elementStorage, storageKey: storageKey, clock: clock, random: random)
        let enclave = try SecureEnclave(storage: enclaveStorage, storageKey: storageKey, clock: clock, random: random)
        try await enclave.setPasscode(SecureBytes(Array("246810".utf8)), current: nil)

        let imk = SecureBytes([UInt8](repeating: 0x11, count: 8) + [UInt8](repeating: 0x22, count: 8))
        let proximity = try hsm.importKey(imk, usage: .proximityIssuerMasterKey, id: "imk")
        let remote = try hsm.importKey(imk, usage: .remoteIssuerMasterKey, id: "imk-rp")
        let template = PersonalisationTemplate(
            tokenReference: "tok_contract", dpan: try PrimaryAccountNumber("4895370012345671"), panSequenceNumber: 0,
            tokenExpiry: try CardExpiry(year: 2029, month: 3), network: .visa)
        let signed = try hsm.sealPersonalisation(
            template, proximityKey: proximity, remoteKey: remote, to: elementKey,
            label: TokenService.personalisationLabel,
            install: PersonalisationInstall(installID: random.bytes(16), certificateDigest: SHA256.hash(certificate)),
            signingKey: signingKey)

        let binding = try await enclave.provisioningBinding(challenge: await element.challenge())
        let display = try await element.install(signed.serialized, binding: binding)
        #expect(
            display.deviceAccountSuffix == "5671" && display.network == "visa"
                && display.tokenReference == "tok_contract")
        #expect(await element.cards().count == 1)
    }
}
