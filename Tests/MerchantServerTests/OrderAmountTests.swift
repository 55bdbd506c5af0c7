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

    @Test("Decimal amounts with at most the currency's exponent; never rounded")
    func amounts() throws {
        let usd = try OrderCurrency(code: "USD")
        #expect(try OrderAmount(parsing: "9.99", currency: usd).minorUnits == 999)
        #expect(try OrderAmount(parsing: "10", currency: usd).minorUnits == 1000)
        #expect(try OrderAmount(parsing: "0.5", currency: usd).decimalString == "0.50")
        #expect(try OrderAmount(parsing: "500", currency: OrderCurrency(code: "JPY")).decimalString == "500")
        #expect(try OrderAmount(parsing: "1.250", currency: OrderCurrency(code: "BHD")).minorUnits == 1250)
        #expect(try OrderAmount(parsing: "9999999999.99", currency: usd).minorUnits == 999_999_999_999)
        for bad in ["9.999", "", ".5", "5.", "-1", "+1", "1,00", "1e3", "0", "0.00", "10000000000.00", " 1", "1.2.3"] {
            #expect(throws: MerchantServerError.self, "\(bad)") { try OrderAmount(parsing: bad, currency: usd) }
        }
        #expect(throws: MerchantServerError.self) {
            try OrderAmount(parsing: "5.5", currency: OrderCurrency(code: "JPY"))
        }
        #expect(throws: MerchantServerError.self) { try OrderCurrency(code: "usd") }
        #expect(try OrderCurrency(code: "AUD").numericString == "036")
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
        #expect(PaymentProcessor.mask("4895370012345678") == "489537******5678")
        #expect(PaymentProcessor.mask("4895370012345678901") == "489537*********8901")
        #expect(PaymentProcessor.mask("12345") == "*****")
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
