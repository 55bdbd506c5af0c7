import Acquirer
import CardBasics
import Foundation
import Issuer
import NetworkAuthorizationAPI
import NetworkTestSupport
import PaymentCredential
import Testing
import TokenService

/// Which Apple merchant IDs each acquiring account may charge for, and the token service's check of a remote
/// cryptogram's merchant against it, with the real remote cryptogram (as a Secure Element computes it).
@Suite("Acquirer: in-app cryptograms are bound to the merchant that charges")
struct MerchantBindingTests {
    static let merchantA = "merchant.dev.orchard.a"
    static let merchantB = "merchant.dev.orchard.b"

    struct Fixture {
        let network: NetworkHarness
        let store = InMemoryAcquirerStore()
        let acquirer: Acquirer
        let card: InstalledCard

        init() async throws {
            network = try await NetworkHarness(
                verifiers: [EMVProximityCryptogramVerifier(), RemoteCryptogramVerifier()])
            acquirer = Acquirer(acquirerID: "acq-1", store: store, network: network.tokenService, clock: network.clock)
            for (account, appleID) in [
                ("m-a", MerchantBindingTests.merchantA), ("m-b", MerchantBindingTests.merchantB),
            ] {
                try await acquirer.registerMerchant(
                    MerchantAccount(merchantID: account, name: account, categoryCode: "5732", countryCode: "840"))
                try await acquirer.allowAppleMerchantID(appleID, forMerchant: account)
            }
            card = try await network.provision("4111111111111111", on: try network.makeDevice("phone-1"))
        }

        /// A merchant server's charge through `account`, naming `appleMerchantID`, of a remote cryptogram the
        /// device made for `madeFor` (with the transaction data the merchant it was made for would send).
        func charge(
            through account: String, naming appleMerchantID: String?, madeFor: String, atc: UInt16, key: String
        ) throws -> AcquirerAuthorizationRequest {
            let cryptogram = try RemoteCryptogram.generate(
                masterKey: card.data.remoteMasterKey, atc: atc, amount: 1999, currency: 840,
                nonce: [UInt8](repeating: 7, count: 32), merchantIdentifier: madeFor)
            return AcquirerAuthorizationRequest(
                origin: .merchantServer(idempotencyKey: key), merchantID: account, pan: card.data.dpan,
                expiry: card.data.tokenExpiry, amount: try Money(minorUnits: 1999, currency: Currency("840")),
                channel: .inApp,
                cryptogram: CryptogramSubmission(
                    kind: .remote, cryptogram: cryptogram.bytes, applicationTransactionCounter: atc,
                    transactionData: RemoteTransactionData(merchantIdentifier: madeFor, amount: 1999, currency: 840)
                        .encoded),
                appleMerchantID: appleMerchantID)
        }

        func balance() async throws -> Int64? { try await network.issuer.account(id: "acct-1")?.balance }
    }

    @Test(
        "C3: A token made for merchant A, charged through merchant B's account, is declined (03, merchantMismatch)")
    func madeForAChargedThroughB() async throws {
        let f = try await Fixture()
        // B names its own merchant ID, which its account may charge for: the network sees A's cryptogram.
        let throughB = try await f.acquirer.authorize(
            try f.charge(through: "m-b", naming: Self.merchantB, madeFor: Self.merchantA, atc: 5, key: "b-1"))
        #expect(throughB.responseCode == .invalidMerchant && throughB.declineReason == "merchantMismatch")
        #expect(!throughB.isApproved && throughB.approvalCode == nil)
        #expect(!"\(throughB)".contains(f.card.data.dpan.digits))
        // B names A's merchant ID: its account may not charge for it, and nothing is recorded.
        await #expect(throws: AcquirerError(.merchantIDNotAllowed, "")) {
            try await f.acquirer.authorize(
                try f.charge(through: "m-b", naming: Self.merchantA, madeFor: Self.merchantA, atc: 5, key: "b-2"))
        }
        #expect(try await f.store.authorization(idempotencyKey: "merchant:m-b:b-2") == nil)
        #expect(try await f.balance() == 0)
        // The cryptogram was not used up: A charges it.
        let throughA = try await f.acquirer.authorize(
            try f.charge(through: "m-a", naming: Self.merchantA, madeFor: Self.merchantA, atc: 5, key: "a-1"))
        #expect(throughA.isApproved)
        #expect(try await f.balance() == 1999)
    }

    @Test("A token made for merchant A, charged through A's account, is approved")
    func madeForAChargedThroughA() async throws {
        let f = try await Fixture()
        let result = try await f.acquirer.authorize(
            try f.charge(through: "m-a", naming: Self.merchantA, madeFor: Self.merchantA, atc: 9, key: "a-9"))
        #expect(result.isApproved && result.declineReason == nil)
        #expect(try await f.balance() == 1999)
    }

    @Test("C3: A merchant ID no account charges for, or none at all, is refused before the network")
    func unregisteredMerchantID() async throws {
        let f = try await Fixture()
        let unknown = "merchant.dev.orchard.unknown"
        await #expect(throws: AcquirerError(.merchantIDNotAllowed, "")) {
            try await f.acquirer.authorize(
                try f.charge(through: "m-a", naming: unknown, madeFor: unknown, atc: 3, key: "u-1"))
        }
        await #expect(throws: AcquirerError(.invalidRequest, "")) {
            try await f.acquirer.authorize(
                try f.charge(through: "m-a", naming: nil, madeFor: Self.merchantA, atc: 3, key: "u-2"))
        }
        #expect(f.store.allAuthorizations.isEmpty)
        #expect(try await f.balance() == 0)
        // The card still works: nothing reached the network.
        let approved = try await f.acquirer.authorize(
            try f.charge(through: "m-a", naming: Self.merchantA, madeFor: Self.merchantA, atc: 3, key: "u-3"))
        #expect(approved.isApproved)
    }

    @Test("One account per merchant ID; malformed IDs and unknown accounts are refused; allowing again is a no-op")
    func allowingMerchantIDs() async throws {
        let f = try await Fixture()
        try await f.acquirer.allowAppleMerchantID(Self.merchantA, forMerchant: "m-a")
        await #expect(throws: AcquirerError(.duplicate, "")) {
            try await f.acquirer.allowAppleMerchantID(Self.merchantA, forMerchant: "m-b")
        }
        for bad in ["", "merchant.", "shop.example", "merchant.dev/x", "merchant.dev x", "merchant.4111111111111111;"] {
            await #expect(throws: AcquirerError(.invalidRequest, ""), "\(bad)") {
                try await f.acquirer.allowAppleMerchantID(bad, forMerchant: "m-a")
            }
        }
        await #expect(throws: AcquirerError(.unknownMerchant, "")) {
            try await f.acquirer.allowAppleMerchantID("merchant.dev.orchard.c", forMerchant: "m-nope")
        }
        #expect(try await f.store.merchantID(forAppleMerchantID: Self.merchantA) == "m-a")
        #expect(try await f.store.merchantID(forAppleMerchantID: Self.merchantB) == "m-b")
        #expect(try await f.store.merchantID(forAppleMerchantID: "merchant.dev.orchard.c") == nil)
    }
}
