import CardBasics
import Foundation
import Issuer
import OrchardCrypto
import Testing

/// A demo issuer with the test cards, on a fixed clock.
struct IssuerFixture {
    static let now = Date(timeIntervalSince1970: 1_772_366_400)  // 2026-03-01 12:00 UTC
    let clock = ManualClock(now: now)
    let store = InMemoryIssuerStore()
    let issuer: Issuer

    init() async throws {
        issuer = Issuer(
            configuration: TestCards.configuration, store: store,
            cardVerificationKey: TestCards.insecureDemoCardVerificationKey, clock: clock,
            random: InsecureDeterministicRandom(seed: [1, 2, 3]), monotonicClock: clock)
        try await TestCards.seed(into: issuer)
    }

    static let expiry = try! CardExpiry(year: 2034, month: 12)

    func check(_ pan: String, cvv: String? = nil, expiry: CardExpiry = expiry) async throws -> CardCheckDecision {
        let pan = try PrimaryAccountNumber(pan)
        let expected = try TestCards.insecureDemoCardVerificationKey.cardVerificationValue(
            pan: pan, expiry: Self.expiry)
        return try await issuer.checkCard(
            CardCheckRequest(
                pan: pan, expiry: expiry, cardVerificationValue: try CardVerificationValue(cvv ?? expected),
                cardholderName: "Orchard Tester", tokenRequestorID: "40010075001", deviceKind: "phone"))
    }

    func authorize(
        _ pan: String, amount: Int64, id: String, currency: String = "840", channel: PaymentChannel = .contactless,
        category: String = "5814", expiry: CardExpiry? = expiry, token: Bool = true, verified: Bool = true,
        at date: Date = now
    ) async throws -> IssuerAuthorizationResponse {
        try await issuer.authorize(
            IssuerAuthorizationRequest(
                networkTransactionID: id, pan: try PrimaryAccountNumber(pan), expiry: expiry,
                amount: try Money(minorUnits: amount, currency: Currency(currency)), channel: channel,
                merchant: MerchantInfo(merchantID: "m1", name: "Shop", categoryCode: category, countryCode: "840"),
                token: token
                    ? TokenContext(
                        tokenRequestorID: "40010075001",
                        paymentAccountReference: "O001" + String(repeating: "A", count: 25),
                        tokenSuffix: "5671", tokenExpiry: try CardExpiry(year: 2029, month: 3)) : nil,
                cryptogramVerified: verified, transmittedAt: date))
    }
}

@Suite("Issuer: provisioning decisions")
struct IssuerProvisioningTests {
    @Test func testCardsGiveTheirDocumentedDecisions() async throws {
        let f = try await IssuerFixture()
        for pan in ["4111111111111111", "5555555555554444", "4000056655665556"] {
            guard case .approve(let profile) = try await f.check(pan) else {
                Issue.record("\(pan) should be approved")
                continue
            }
            #expect(profile.suffix == String(pan.suffix(4)) && profile.issuerName == "Orchard Test Bank")
        }
        guard case .stepUp(let challenge, _) = try await f.check("4000000000003220") else {
            Issue.record("4000000000003220 should step up")
            return
        }
        #expect(challenge.method == "sms" && !challenge.reference.isEmpty)
        #expect(try await f.check("4000000000000002") == .decline(.notEligible))
        #expect(try await f.check("4242424242424242") == .decline(.unknownCard))
        let debit = try await f.check("4000056655665556")
        #expect(debit.profile?.type == .debit && debit.profile?.network == .visa)
        #expect(try await f.check("5555555555554444").profile?.network == .mastercard)
    }

    @Test func wrongCVVOrExpiryIsDeclined() async throws {
        let f = try await IssuerFixture()
        #expect(try await f.check("4111111111111111", cvv: "000") == .decline(.verificationFailed))
        #expect(
            try await f.check("4111111111111111", expiry: try CardExpiry(year: 2033, month: 12))
                == .decline(.verificationFailed))
        // The right CVV for another card is still wrong.
        #expect(try await f.check("4111111111111111", cvv: "667") == .decline(.verificationFailed))
    }

    @Test func restrictedCardOrFrozenAccountIsNotEligible() async throws {
        let f = try await IssuerFixture()
        try await f.issuer.setCardStatus(.restricted, pan: try PrimaryAccountNumber("4111111111111111"))
        #expect(try await f.check("4111111111111111") == .decline(.notEligible))
        try await f.issuer.setAccountStatus(.frozen, accountID: "acct-2")
        #expect(try await f.check("5555555555554444") == .decline(.notEligible))
    }

    @Test func stepUpApprovesWithTheCodeAndIsSingleUse() async throws {
        let f = try await IssuerFixture()
        guard case .stepUp(let challenge, _) = try await f.check("4000000000003220") else {
            Issue.record("expected a step-up")
            return
        }
        guard
            case .stepUp(let again, _) = try await f.issuer.verifyOneTimeCode(
                reference: challenge.reference, code: "000000")
        else {
            Issue.record("a wrong code with attempts left should step up again")
            return
        }
        #expect(again.reference == challenge.reference && again.destinationHint == "•••• 0142")
        guard case .approve = try await f.issuer.verifyOneTimeCode(reference: challenge.reference, code: "123456")
        else {
            Issue.record("the documented code should approve")
            return
        }
        #expect(
            try await f.issuer.verifyOneTimeCode(reference: challenge.reference, code: "123456")
                == .decline(.challengeExpired))
        await #expect(throws: IssuerError(.notFound, "")) {
            try await f.issuer.verifyOneTimeCode(reference: "nope", code: "123456")
        }
    }

    @Test func stepUpDeclinesAfterThreeWrongCodesAndWhenExpired() async throws {
        let f = try await IssuerFixture()
        guard case .stepUp(let challenge, _) = try await f.check("4000000000003220") else {
            Issue.record("expected a step-up")
            return
        }
        _ = try await f.issuer.verifyOneTimeCode(reference: challenge.reference, code: "111111")
        _ = try await f.issuer.verifyOneTimeCode(reference: challenge.reference, code: "222222")
        #expect(
            try await f.issuer.verifyOneTimeCode(reference: challenge.reference, code: "333333")
                == .decline(.tooManyAttempts))
        #expect(
            try await f.issuer.verifyOneTimeCode(reference: challenge.reference, code: "123456")
                == .decline(.challengeExpired))

        guard case .stepUp(let second, _) = try await f.check("4000000000003220") else {
            Issue.record("expected a step-up")
            return
        }
        f.clock.advance(by: 601)
        #expect(
            try await f.issuer.verifyOneTimeCode(reference: second.reference, code: "123456")
                == .decline(.challengeExpired))
    }

    @Test("R6: A step-up expires on the monotonic clock: the wall clock moved an hour either way changes nothing")
    func stepUpIgnoresTheWallClock() async throws {
        let f = try await IssuerFixture()
        for shift in [3600.0, -3600.0] {
            guard case .stepUp(let challenge, _) = try await f.check("4000000000003220") else {
                Issue.record("expected a step-up")
                return
            }
            f.clock.setWall(IssuerFixture.now.addingTimeInterval(shift))
            guard case .approve = try await f.issuer.verifyOneTimeCode(reference: challenge.reference, code: "123456")
            else {
                Issue.record("a wall clock moved by \(shift) s ended a live challenge")
                return
            }
            f.clock.setWall(IssuerFixture.now)
        }
        // Monotonic time past the lifetime expires it even with the wall clock set back an hour.
        guard case .stepUp(let late, _) = try await f.check("4000000000003220") else {
            Issue.record("expected a step-up")
            return
        }
        f.clock.advance(by: 601)
        f.clock.setWall(IssuerFixture.now.addingTimeInterval(-3600))
        #expect(
            try await f.issuer.verifyOneTimeCode(reference: late.reference, code: "123456")
                == .decline(.challengeExpired))
        // A challenge another process (a restarted issuer on the same store) started has no deadline here: expired.
        guard case .stepUp(let earlier, _) = try await f.check("4000000000003220") else {
            Issue.record("expected a step-up")
            return
        }
        let restarted = Issuer(
            configuration: TestCards.configuration, store: f.store,
            cardVerificationKey: TestCards.insecureDemoCardVerificationKey, clock: f.clock,
            random: InsecureDeterministicRandom(seed: [4]), monotonicClock: f.clock)
        #expect(
            try await restarted.verifyOneTimeCode(reference: earlier.reference, code: "123456")
                == .decline(.challengeExpired))
    }
}

@Suite("Issuer: authorization decisions and response codes")
struct IssuerAuthorizationTests {
    @Test func approvesAndMovesFunds() async throws {
        let f = try await IssuerFixture()
        let response = try await f.authorize("4111111111111111", amount: 1_250, id: "t1")
        #expect(response.responseCode == .approved && response.approvalCode?.count == 6)
        #expect(try await f.issuer.account(id: "acct-1")?.balance == 1_250)  // credit: owed
        _ = try await f.authorize("4000056655665556", amount: 1_000, id: "t2")
        #expect(try await f.issuer.account(id: "acct-3")?.balance == 249_000)  // debit: funds
    }

    @Test("R3: a retry returns the first answer and moves no money twice")
    func retryReturnsTheFirstAnswerAndMovesNoMoneyTwice() async throws {
        let f = try await IssuerFixture()
        let first = try await f.authorize("4111111111111111", amount: 700, id: "same")
        let second = try await f.authorize("4111111111111111", amount: 700, id: "same")
        #expect(first == second)
        #expect(try await f.issuer.account(id: "acct-1")?.balance == 700)
        await #expect(throws: IssuerError(.duplicate, "")) {
            try await f.authorize("4111111111111111", amount: 701, id: "same")
        }
    }

    @Test func concurrentAuthorizationsCannotOverspend() async throws {
        let f = try await IssuerFixture()
        // Debit account: 2,500.00 available; 30 concurrent 100.00 payments: exactly 25 approved.
        let codes = try await withThrowingTaskGroup(of: ResponseCode.self) { group in
            for index in 0..<30 {
                group.addTask {
                    try await f.authorize("4000056655665556", amount: 10_000, id: "c\(index)").responseCode
                }
            }
            var out: [ResponseCode] = []
            for try await code in group { out.append(code) }
            return out
        }
        #expect(codes.filter { $0 == .approved }.count == 25)
        #expect(codes.filter { $0 == .insufficientFunds }.count == 5)
        #expect(try await f.issuer.account(id: "acct-3")?.balance == 0)
    }

    @Test func everyDeclineCode() async throws {
        let f = try await IssuerFixture()
        let visa = "4111111111111111"
        // 51: more than the credit line (5,000.00) in two steps under the per-transaction limit.
        #expect(try await f.authorize(visa, amount: 200_000, id: "a").responseCode == .approved)
        #expect(try await f.authorize(visa, amount: 200_000, id: "b").responseCode == .approved)
        #expect(try await f.authorize(visa, amount: 150_000, id: "c").responseCode == .insufficientFunds)
        // 61: above the per-transaction limit (2,000.00).
        #expect(try await f.authorize("5555555555554444", amount: 200_001, id: "d").responseCode == .exceedsAmountLimit)
        // 54: wrong expiry, and an expired card.
        #expect(
            try await f.authorize("5555555555554444", amount: 1, id: "e", expiry: try CardExpiry(year: 2033, month: 12))
                .responseCode == .expiredCard)
        // 57: currency, then a blocked merchant category.
        #expect(
            try await f.authorize("5555555555554444", amount: 1, id: "g", currency: "978").responseCode
                == .notPermittedToCardholder)
        // 88: a token transaction without a verified cryptogram.
        #expect(
            try await f.authorize("5555555555554444", amount: 1, id: "h", verified: false).responseCode
                == .cryptographicFailure)
        // Without token context (not a token transaction) the flag does not matter.
        #expect(
            try await f.authorize("5555555555554444", amount: 1, id: "h2", token: false, verified: false).responseCode
                == .approved)
        // 14: no such card.
        #expect(try await f.authorize("4242424242424242", amount: 1, id: "i").responseCode == .invalidCardNumber)
        // 62: restricted card, frozen account; 05: closed account.
        try await f.issuer.setCardStatus(.restricted, pan: try PrimaryAccountNumber("5555555555554444"))
        #expect(try await f.authorize("5555555555554444", amount: 1, id: "j").responseCode == .restrictedCard)
        try await f.issuer.setAccountStatus(.frozen, accountID: "acct-3")
        #expect(try await f.authorize("4000056655665556", amount: 1, id: "k").responseCode == .restrictedCard)
        try await f.issuer.setAccountStatus(.closed, accountID: "acct-3")
        #expect(try await f.authorize("4000056655665556", amount: 1, id: "l").responseCode == .doNotHonour)
        // Declines carry no approval code and move no money.
        let declined = try await f.authorize("4000056655665556", amount: 1, id: "m")
        #expect(declined.approvalCode == nil)
        #expect(try await f.issuer.account(id: "acct-3")?.balance == 250_000)
    }

    @Test func expiryFollowsTheIssuersClockNotTheRequest() async throws {
        let f = try await IssuerFixture()
        #expect(try await f.authorize("5555555555554444", amount: 1, id: "x1").responseCode == .approved)
        // January 2035: the card (12/34) has expired, whatever time the request claims.
        f.clock.setWall(Date(timeIntervalSince1970: 2_051_222_400))
        #expect(try await f.authorize("5555555555554444", amount: 1, id: "x2").responseCode == .expiredCard)
        #expect(
            try await f.authorize("5555555555554444", amount: 1, id: "x3", at: IssuerFixture.now).responseCode
                == .expiredCard)
    }

    @Test func blockedCategoryAndChannelAnswer57() async throws {
        let f = try await IssuerFixture()
        try await f.issuer.openAccount(
            IssuerAccount(
                accountID: "acct-x", holderName: "X", currency: "840", kind: .debit, balance: 10_000,
                blockedCategoryCodes: ["7995"]))
        let expiry = IssuerFixture.expiry
        try await f.issuer.issueCard(
            IssuedCard(
                pan: try PrimaryAccountNumber("4000000000000010"), expiry: expiry, network: .visa, type: .debit,
                accountID: "acct-x", cardholderName: "X", allowedChannels: [.contactless], productName: "X"))
        #expect(
            try await f.authorize("4000000000000010", amount: 1, id: "n", category: "7995").responseCode
                == .notPermittedToCardholder)
        #expect(
            try await f.authorize("4000000000000010", amount: 1, id: "o", channel: .inApp).responseCode
                == .notPermittedToCardholder)
        #expect(try await f.authorize("4000000000000010", amount: 1, id: "p").responseCode == .approved)
    }

    @Test func issuingRespectsBINsAndUniqueness() async throws {
        let f = try await IssuerFixture()
        let expiry = IssuerFixture.expiry
        await #expect(throws: IssuerError(.invalidInput, "")) {
            try await f.issuer.issueCard(
                IssuedCard(
                    pan: try PrimaryAccountNumber("4242424242424242"), expiry: expiry, network: .visa, type: .credit,
                    accountID: "acct-1", cardholderName: "X", productName: "X"))
        }
        await #expect(throws: IssuerError(.duplicate, "")) {
            try await f.issuer.issueCard(
                IssuedCard(
                    pan: try PrimaryAccountNumber("4111111111111111"), expiry: expiry, network: .visa, type: .credit,
                    accountID: "acct-1", cardholderName: "X", productName: "X"))
        }
        await #expect(throws: IssuerError(.notFound, "")) {
            try await f.issuer.issueCard(
                IssuedCard(
                    pan: try PrimaryAccountNumber("4000000000000010"), expiry: expiry, network: .visa, type: .credit,
                    accountID: "no-such", cardholderName: "X", productName: "X"))
        }
    }

    @Test func reissueWithoutANetworkClosesTheOldCard() async throws {
        let f = try await IssuerFixture()
        let old = try PrimaryAccountNumber("4111111111111111")
        let new = try PrimaryAccountNumber("4111111111111129")
        let card = try await f.issuer.reissueCard(
            pan: old, newPAN: new, newExpiry: try CardExpiry(year: 2035, month: 6))
        #expect(card.pan == new && card.accountID == "acct-1")
        #expect(try await f.issuer.card(pan: old)?.status == .closed)
        #expect(try await f.authorize("4111111111111111", amount: 1, id: "q").responseCode == .doNotHonour)
        #expect(
            try await f.authorize(
                "4111111111111129", amount: 1, id: "r", expiry: try CardExpiry(year: 2035, month: 6)
            ).responseCode == .approved)
        await #expect(throws: IssuerError(.invalidInput, "")) {
            try await f.issuer.reissueCard(pan: new, newPAN: nil, newExpiry: try CardExpiry(year: 2030, month: 1))
        }
        await #expect(throws: IssuerError(.notPermitted, "")) {
            try await f.issuer.tokenAction(.suspend, pan: new)
        }
    }
}
