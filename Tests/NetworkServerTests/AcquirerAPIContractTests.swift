import Acquirer
import AcquirerAPI
import CardBasics
import Foundation
import Issuer
import NetworkAuthorizationAPI
import NetworkServer
import NetworkTestSupport
import OrchardHTTP
import Testing
import TokenService

/// The callers' side of the acquiring routes (`AcquirerAPI`, which terminals and merchant servers import) against
/// the network's side of the same JSON: what one writes, the other reads, field for field.
@Suite("Acquiring wire format: callers and network agree")
struct AcquirerAPIContractTests {
    let amount = AcquirerAPI.Money(minorUnits: 1999, currency: "840")
    let cryptogram = AcquirerAPI.Cryptogram(
        kind: "remote", cryptogram: Array(repeating: 0xA5, count: 20), applicationTransactionCounter: 7,
        transactionData: Array(0..<42))

    func read<T: Decodable>(_ type: T.Type, from value: some Encodable) throws -> T {
        try JSONDecoder().decode(type, from: JSONEncoder().encode(value))
    }

    @Test func aMerchantServersChargeIsReadAsSent() throws {
        let sent = AcquirerAPI.AuthorizationRequest(
            merchantID: "m-shop", idempotencyKey: "merchant-order-1-1", pan: "4895370012345671",
            expiry: AcquirerAPI.Expiry(year: 2029, month: 12), amount: amount, cryptogram: cryptogram, eci: "05",
            appleMerchantID: "merchant.dev.shop")
        let read = try read(AuthorizationBody.self, from: sent)
        #expect(read.merchantID == "m-shop" && read.idempotencyKey == "merchant-order-1-1")
        #expect(read.appleMerchantID == "merchant.dev.shop")
        #expect(read.terminalID == nil && read.stan == nil)
        #expect(read.pan.digits == "4895370012345671")
        #expect(read.expiry?.year == 2029 && read.expiry?.month == 12)
        #expect(read.amount.minorUnits == 1999 && read.amount.currency.numericString == "840")
        #expect(read.channel == .inApp)
        #expect(read.cryptogram?.kind == .remote && read.cryptogram?.cryptogram == cryptogram.cryptogram)
        #expect(read.cryptogram?.applicationTransactionCounter == 7)
        #expect(read.cryptogram?.transactionData == cryptogram.transactionData)
        // Its descriptions never show the card number.
        #expect(!"\(sent)".contains("4895370012345671") && !String(reflecting: sent).contains("4895370012345671"))
    }

    @Test func aTerminalsAuthorizationIsReadAsSent() throws {
        let arqc = AcquirerAPI.Cryptogram(
            kind: "proximityARQC", cryptogram: Array(repeating: 1, count: 8), applicationTransactionCounter: 3,
            transactionData: [0x9F, 0x02, 0x06, 0, 0, 0, 0, 0x19, 0x99])
        let sent = AcquirerAPI.AuthorizationRequest(
            merchantID: "m-coffee", terminalID: "T0001", stan: "000042", pan: "4895370012345671", expiry: nil,
            amount: amount, cryptogram: arqc, panSequenceNumber: 1, posEntryMode: "07")
        let read = try read(AuthorizationBody.self, from: sent)
        #expect(read.terminalID == "T0001" && read.stan == "000042" && read.idempotencyKey == nil)
        #expect(read.appleMerchantID == nil)
        #expect(read.expiry == nil && read.channel == .contactless)
        #expect(read.cryptogram?.kind == .proximityARQC && read.cryptogram?.transactionData == arqc.transactionData)
    }

    @Test func reversalsAreReadAsSent() throws {
        let byTerminal = try read(
            ReversalBody.self,
            from: AcquirerAPI.ReversalRequest(
                merchantID: "m-coffee", terminalID: "T0001", stan: "000042", amount: amount, reason: "timeout"))
        #expect(byTerminal.terminalID == "T0001" && byTerminal.stan == "000042" && byTerminal.idempotencyKey == nil)
        #expect(byTerminal.amount.minorUnits == 1999 && byTerminal.reason == "timeout")
        let byMerchant = try read(
            ReversalBody.self,
            from: AcquirerAPI.ReversalRequest(
                merchantID: "m-shop", idempotencyKey: "merchant-order-1-1", amount: amount, reason: "recovery"))
        #expect(byMerchant.idempotencyKey == "merchant-order-1-1" && byMerchant.terminalID == nil)
    }

    @Test func theNetworksAnswersAreReadByTheCallers() async throws {
        try await NetworkRoutesTests().withNetwork { h, client, base in
            let phone = try h.makeDevice("phone-1")
            let card = try await h.provision("4111111111111111", on: phone)
            let money = try Money(minorUnits: 450, currency: Currency("840"))
            let submission = try await phone.cryptogram(for: card, kind: .proximityARQC, amount: money)
            let sent = AcquirerAPI.AuthorizationRequest(
                merchantID: "m-coffee", terminalID: "T0001", stan: "000042", pan: card.data.dpan.digits,
                expiry: AcquirerAPI.Expiry(year: card.data.tokenExpiry.year, month: card.data.tokenExpiry.month),
                amount: AcquirerAPI.Money(minorUnits: 450, currency: "840"),
                cryptogram: AcquirerAPI.Cryptogram(
                    kind: submission.kind.rawValue, cryptogram: submission.cryptogram,
                    applicationTransactionCounter: submission.applicationTransactionCounter,
                    transactionData: submission.transactionData),
                panSequenceNumber: 1, posEntryMode: "07")
            let answer = try await client.post(base + AcquirerAPI.Route.authorizations, json: sent)
                .decodeJSON(AcquirerAPI.AuthorizationAnswer.self)
            #expect(answer.responseCode == "00" && answer.authorizationID != nil && answer.approvalCode != nil)
            #expect(answer.maskedPAN?.hasSuffix(String(card.data.dpan.digits.suffix(4))) == true)
            let reversal = AcquirerAPI.ReversalRequest(
                merchantID: "m-coffee", terminalID: "T0001", stan: "000042",
                amount: AcquirerAPI.Money(minorUnits: 450, currency: "840"), reason: "timeout")
            let reversed = try await client.post(base + AcquirerAPI.Route.reversals, json: reversal)
                .decodeJSON(AcquirerAPI.ReversalAnswer.self)
            #expect(reversed.reversed)
        }
    }
}
