import CardBasics
import Foundation
import Issuer
import NetworkAuthorizationAPI
import NetworkTestSupport
import OrchardCrypto
import Testing
import TokenService

/// The token service as `AcquiringNetwork`: what the contract promises an acquirer.
@Suite("Token service: the acquirer's AcquiringNetwork")
struct AcquiringNetworkConformanceTests {
    func contractRequest(
        pan: String, amount: Int64, channel: String = "contactless", cryptogram: CryptogramSubmission?, id: String,
        clock: ManualClock
    ) -> NetworkAuthorizationAPI.AuthorizationRequest {
        NetworkAuthorizationAPI.AuthorizationRequest(
            acquirerID: "acq-1", transactionID: id, pan: pan, expiry: nil,
            amount: NetworkAuthorizationAPI.Money(minorUnits: amount, currency: "840"), channel: channel,
            merchant: NetworkAuthorizationAPI.Merchant(
                merchantID: "m-coffee", name: "Orchard Coffee", categoryCode: "5814", countryCode: "840"),
            cryptogram: cryptogram, transmittedAt: clock.now())
    }

    @Test func anApprovalIsIdempotentAndCarriesNoCardNumber() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let card = try await h.provision("4111111111111111", on: phone)
        let network: any AcquiringNetwork = h.tokenService
        let money = try Money(minorUnits: 450, currency: Currency("840"))
        let cryptogram = try await phone.cryptogram(for: card, kind: .proximityARQC, amount: money)
        let request = contractRequest(
            pan: card.data.dpan.digits, amount: 450, cryptogram: cryptogram, id: "c-1", clock: h.clock)
        let answer = try await network.authorize(request)
        #expect(answer.responseCode == "00" && answer.approvalCode?.count == 6 && answer.declineReason == nil)
        #expect(answer.cardSuffix == "1111" && answer.transactionID == "c-1")
        // The same transaction again: the first answer, and the issuer moved the money once.
        #expect(try await network.authorize(request) == answer)
        #expect(try await h.issuer.account(id: "acct-1")?.balance == 450)
        // The same ID for another amount is a conflict, not a second decision.
        await #expect(throws: NetworkAuthorizationAPI.Failure(.idempotencyConflict, "")) {
            try await network.authorize(
                contractRequest(
                    pan: card.data.dpan.digits, amount: 451, cryptogram: cryptogram, id: "c-1", clock: h.clock))
        }
        // The reversal releases once; another amount for it is a conflict.
        let reversal = NetworkAuthorizationAPI.ReversalRequest(
            acquirerID: "acq-1", transactionID: "c-1", amount: .init(minorUnits: 450, currency: "840"),
            transmittedAt: h.clock.now())
        #expect(try await network.reverse(reversal).outcome == "released")
        #expect(try await network.reverse(reversal).outcome == "released")
        #expect(try await h.issuer.account(id: "acct-1")?.balance == 0)
        await #expect(throws: NetworkAuthorizationAPI.Failure(.idempotencyConflict, "")) {
            try await network.reverse(
                NetworkAuthorizationAPI.ReversalRequest(
                    acquirerID: "acq-1", transactionID: "c-1", amount: .init(minorUnits: 1, currency: "840"),
                    transmittedAt: h.clock.now()))
        }
    }

    @Test func aDeclineIsAnAnswerAndBadFieldsAreRefused() async throws {
        let h = try await NetworkHarness()
        let network: any AcquiringNetwork = h.tokenService
        // An unknown token: declined with its reason, not an error.
        let unknown = try await network.authorize(
            contractRequest(pan: "4895370012345671", amount: 10, cryptogram: nil, id: "d-1", clock: h.clock))
        #expect(unknown.responseCode == "14" && unknown.declineReason == "unknownToken" && unknown.approvalCode == nil)
        // Fields the token service cannot read are refused before anything is decided or recorded.
        for bad in [
            contractRequest(pan: "4895370012345670", amount: 10, cryptogram: nil, id: "d-2", clock: h.clock),
            contractRequest(
                pan: "4895370012345671", amount: 10, channel: "fax", cryptogram: nil, id: "d-3", clock: h.clock),
            contractRequest(pan: "4895370012345671", amount: -1, cryptogram: nil, id: "d-4", clock: h.clock),
        ] {
            await #expect(throws: NetworkAuthorizationAPI.Failure(.invalidRequest, "")) {
                try await network.authorize(bad)
            }
        }
        // d-2 was refused, so the same ID is still free for a real request.
        let retry = try await network.authorize(
            contractRequest(pan: "4895370012345671", amount: 10, cryptogram: nil, id: "d-2", clock: h.clock))
        #expect(retry.declineReason == "unknownToken")
    }
}
