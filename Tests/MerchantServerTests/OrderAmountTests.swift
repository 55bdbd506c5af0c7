import CardBasics
import Foundation
import MerchantAPI
import OrchardCrypto
import PaymentToken
import Testing

@testable import MerchantServer

@Suite("Merchant server: amounts, order IDs, request parsing")
struct OrderAmountTests {
    func fulfilment(shipping: String?, billing: String?) throws -> MerchantAPI.Fulfilment? {
        let parse = { (text: String?) throws -> JSONValue? in
            try text.map { try StrictJSONParser.parse(Array($0.utf8), limits: .paymentToken) }
        }
        return try PaymentProcessor.fulfilment(shipping: try parse(shipping), billing: try parse(billing))
    }

    func createOrder(amount: String, currency: String? = nil) throws -> PaymentProcessor.NewOrder {
        try PaymentProcessor.decodeCreateOrder(
            JSONEncoder().encode(MerchantAPI.CreateOrder(item: "Coffee", amount: amount, currency: currency)))
    }

    @Test("An order's amount is read with CardBasics' one parser; its refusals are the merchant's typed errors")
    func amounts() throws {
        #expect(try createOrder(amount: "9.99").amount == Money(minorUnits: 999, currency: Currency("USD")))
        #expect(try createOrder(amount: "500", currency: "JPY").amount.decimalString == "500")
        #expect(try createOrder(amount: "1.25", currency: "BHD").amount.decimalString == "1.250")
        #expect(try createOrder(amount: "1.25", currency: "978").amount.currency.code == "EUR")
        for (bad, currency) in [("9.999", "USD"), ("0", "USD"), ("5.5", "JPY"), ("1", "XXX"), ("-1", "USD")] {
            #expect(throws: MerchantServerError(.malformedRequest, ""), "\(bad) \(currency)") {
                try createOrder(amount: bad, currency: currency)
            }
        }
    }

    @Test("S9: an order body giving a key twice (two amounts) is refused, whatever the order")
    func anOrderWithAKeyTwiceIsRefused() {
        for body in [
            #"{"item":"Coffee","amount":"0.01","amount":"999.00"}"#,
            #"{"amount":"999.00","item":"Coffee","amount":"0.01"}"#,
        ] {
            #expect(throws: MerchantServerError(.malformedRequest, "")) {
                try PaymentProcessor.decodeCreateOrder(Data(body.utf8))
            }
        }
    }

    @Test("Order IDs: 26 letters, no digit runs; applicationData and idempotency keys follow from them")
    func orderIDs() {
        let random = InsecureDeterministicRandom(seed: Array("order ids".utf8))
        var seen = Set<String>()
        for _ in 0..<200 {
            let id = PaymentProcessor.newOrderID(random)
            #expect(id.hasPrefix("ord_") && id.count == 30)
            #expect(id.dropFirst(4).allSatisfy { ("a"..."z").contains($0) })
            seen.insert(id)
        }
        #expect(seen.count == 200)
        #expect(
            PaymentProcessor.applicationData(orderID: "ord_abc") == Array("{\"orderID\":\"ord_abc\"}".utf8))
        #expect(PaymentProcessor.idempotencyKey(orderID: "ord_abc", attempt: 2) == "order-ord_abc-2")
        #expect(PrimaryAccountNumber.mask("4895370012345678") == "489537******5678")
        #expect(PrimaryAccountNumber.mask("4895370012345678901") == "489537*********8901")
        #expect(PrimaryAccountNumber.mask("12345") == "*****")
    }

    @Test("A charge and a verified payment never print the DPAN")
    func redaction() {
        let charge = AcquirerCharge(
            merchantID: "m", idempotencyKey: "k", dpan: "4895370012345678", expiryYear: 2030, expiryMonth: 1,
            amountMinorUnits: 1, currency: "840", cryptogram: [1, 2], applicationTransactionCounter: 1,
            transactionData: [], eci: "05", appleMerchantID: "merchant.m")
        let verified = PaymentProcessor.VerifiedPayment(
            dpan: "4895370012345678", expiryYear: 2030, expiryMonth: 1, cryptogram: [9, 9], atc: 1, eci: nil)
        var dumped = ""
        dump(charge, to: &dumped)
        dump(verified, to: &dumped)
        for text in ["\(charge)", String(reflecting: charge), "\(verified)", String(reflecting: verified), dumped] {
            #expect(!text.contains("4895370012345678"))
        }
        #expect("\(charge)".contains("489537******5678"))
    }

    @Test("Contacts: flat (Apple Pay JS) and nested (PassKit) forms keep the same fulfilment fields")
    func contacts() throws {
        let flat = try fulfilment(
            shipping: """
                {"givenName":"A","familyName":"B","addressLines":["1 Main St"],"locality":"X",\
                "administrativeArea":"CA","postalCode":"1","countryCode":"us","phoneNumber":"555"}
                """, billing: #"{"emailAddress":"a@b.c"}"#)
        let nested = try fulfilment(
            shipping: """
                {"name":{"givenName":"A","familyName":"B"},"postalAddress":{"street":"1 Main St","city":"X",\
                "state":"CA","postalCode":"1","isoCountryCode":"US"},"phoneNumber":"555"}
                """, billing: #"{"emailAddress":"a@b.c"}"#)
        // AppPayments.PaymentContact: the name as one string, the country as `country`.
        let app = try fulfilment(
            shipping: """
                {"name":"A B","emailAddress":"a@b.c","phoneNumber":"555","postalAddress":{"street":"1 Main St",\
                "city":"X","state":"CA","postalCode":"1","country":"US"}}
                """, billing: nil)
        #expect(flat == nested && nested == app)
        #expect(flat?.recipientName == "A B" && flat?.countryCode == "US" && flat?.receiptEmail == "a@b.c")
        #expect(try fulfilment(shipping: nil, billing: nil) == nil)
        #expect(throws: MerchantServerError.self) { try fulfilment(shipping: "[1]", billing: nil) }
        let long = String(repeating: "x", count: 300)
        #expect(throws: MerchantServerError.self) {
            try fulfilment(shipping: "{\"locality\":\"\(long)\"}", billing: nil)
        }
    }
}
