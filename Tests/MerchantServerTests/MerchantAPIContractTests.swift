import CardBasics
import Foundation
import MerchantAPI
import OrchardCrypto
import OrchardHTTP
import PaymentToken
import Testing

@testable import MerchantServer

/// The app's side of the merchant server's routes (`MerchantAPI`, which apps import) against the merchant server's
/// side of the same JSON: what the app writes the server reads, field for field; what the server answers over
/// HTTPS the app decodes; the wire keys are pinned; bad applicationData is refused with a typed error and changes
/// nothing; a payment is bound to the app's own applicationData.
@Suite("Merchant wire format: app and merchant server agree", .serialized)
struct MerchantAPIContractTests {
    static func encoded(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    static func keys(_ response: HTTPResponse) -> Set<String> { Set(MerchantSandbox.json(response).keys) }

    @Test("Golden JSON: the routes and the exact wire keys of every body")
    func golden() throws {
        #expect(MerchantAPI.Route.orders == "/v1/orders")
        #expect(MerchantAPI.Route.order("ord_a") == "/v1/orders/ord_a")
        #expect(MerchantAPI.Route.payment("ord_a") == "/v1/orders/ord_a/payment")
        #expect(MerchantAPI.Route.orderPattern == "/v1/orders/:orderID")
        #expect(MerchantAPI.Route.paymentPattern == "/v1/orders/:orderID/payment")

        #expect(
            try Self.encoded(
                MerchantAPI.CreateOrder(
                    item: "Coffee", amount: "9.99", currency: "USD", applicationData: Data("app".utf8)))
                == #"{"amount":"9.99","applicationData":"YXBw","currency":"USD","item":"Coffee"}"#)
        #expect(
            try Self.encoded(MerchantAPI.CreateOrder(item: "Tea", amount: "4.50"))
                == #"{"amount":"4.50","item":"Tea"}"#)
        #expect(
            try Self.encoded(
                MerchantAPI.OrderCreated(
                    orderID: "ord_a", merchantIdentifier: "merchant.x", countryCode: "US", currency: "USD",
                    total: "9.99", supportedNetworks: ["visa"], merchantCapabilities: ["supports3DS"],
                    applicationData: "YXBw"))
                == #"{"applicationData":"YXBw","countryCode":"US","currency":"USD","#
                + #""merchantCapabilities":["supports3DS"],"merchantIdentifier":"merchant.x","orderID":"ord_a","#
                + #""supportedNetworks":["visa"],"total":"9.99"}"#)
        let result = MerchantAPI.PaymentResult(
            orderID: "ord_a", outcome: "approved", responseCode: "00", reason: "approved",
            maskedPAN: "489537******1234", transactionIdentifier: "AB", approvalCode: "A1B2C3")
        #expect(
            try Self.encoded(result)
                == #"{"approvalCode":"A1B2C3","maskedPAN":"489537******1234","orderID":"ord_a","outcome":"approved","#
                + #""reason":"approved","responseCode":"00","transactionIdentifier":"AB"}"#)
        let fulfilment = MerchantAPI.Fulfilment(
            recipientName: "A D", addressLines: ["1 Loop"], locality: "C", administrativeArea: "CA", postalCode: "9",
            countryCode: "US", receiptEmail: "a@x", shippingMethodIdentifier: "p", shippingMethodLabel: "P")
        #expect(
            try Self.encoded(fulfilment)
                == #"{"addressLines":["1 Loop"],"administrativeArea":"CA","countryCode":"US","locality":"C","#
                + #""postalCode":"9","receiptEmail":"a@x","recipientName":"A D","shippingMethodIdentifier":"p","#
                + #""shippingMethodLabel":"P"}"#)
        #expect(
            try Self.encoded(
                MerchantAPI.OrderStatus(
                    orderID: "ord_a", merchantIdentifier: "merchant.x", item: "Coffee", currency: "USD",
                    total: "9.99", applicationData: "YXBw", status: "open", createdAt: "t",
                    paymentStatus: nil, payment: nil, fulfilment: nil))
                == #"{"applicationData":"YXBw","createdAt":"t","currency":"USD","item":"Coffee","#
                + #""merchantIdentifier":"merchant.x","orderID":"ord_a","status":"open","total":"9.99"}"#)
        #expect(
            try Self.encoded(MerchantAPI.ErrorBody(code: MerchantAPI.ErrorCode.orderMismatch, message: "m"))
                == #"{"error":{"code":"orderMismatch","message":"m"}}"#)

        // The payment body: the token's bytes as received, then the contacts in both name forms.
        let submission = MerchantAPI.PaymentSubmission(
            token: Data(#"{"b": 1,  "a":2}"#.utf8),
            shippingContact: MerchantAPI.Contact(
                name: .init(full: "Alice Doe"),
                postalAddress: .init(street: "1 Loop", city: "C", state: "CA", postalCode: "9", country: "US")),
            billingContact: MerchantAPI.Contact(name: .init(givenName: "Alice", familyName: "Doe")),
            shippingMethod: MerchantAPI.ShippingMethod(identifier: "p", label: "P", amount: "0.00"))
        #expect(
            String(decoding: try submission.body(), as: UTF8.self)
                == #"{"token":{"b": 1,  "a":2},"billingContact":{"name":{"familyName":"Doe","givenName":"Alice"}},"#
                + #""shippingContact":{"name":"Alice Doe","postalAddress":{"city":"C","country":"US","#
                + #""postalCode":"9","state":"CA","street":"1 Loop"}},"#
                + #""shippingMethod":{"amount":"0.00","identifier":"p","label":"P"}}"#)
        #expect(
            String(decoding: try MerchantAPI.PaymentSubmission(token: Data("{}".utf8)).body(), as: UTF8.self)
                == #"{"token":{}}"#)
        for notAnObject in ["[]", "5", "{", ""] {
            #expect(throws: EncodingError.self) {
                try MerchantAPI.PaymentSubmission(token: Data(notAnObject.utf8)).body()
            }
        }
    }

    @Test("The app's order is read by the server as sent; bad applicationData is a typed refusal")
    func orderReadAsSent() throws {
        let data = Data((0..<300).map { UInt8($0 % 256) })
        let read = try PaymentProcessor.decodeCreateOrder(
            JSONEncoder().encode(
                MerchantAPI.CreateOrder(item: "Coffee", amount: "12.50", currency: "EUR", applicationData: data)))
        #expect(read.item == "Coffee" && read.amount.minorUnits == 1250 && read.amount.currency.code == "EUR")
        #expect(read.applicationData == Array(data))
        let plain = try PaymentProcessor.decodeCreateOrder(
            JSONEncoder().encode(MerchantAPI.CreateOrder(item: "Tea", amount: "1")))
        #expect(plain.applicationData == nil && plain.amount.currency.code == "USD")

        let largest = Data(repeating: 0xA5, count: MerchantAPI.maxApplicationDataBytes)
        #expect(try PaymentProcessor.decodeApplicationData(largest.base64EncodedString()).count == 64 * 1024)
        for text in Self.badApplicationData {
            #expect(throws: MerchantServerError(.invalidApplicationData, "")) {
                try PaymentProcessor.decodeApplicationData(text)
            }
        }
    }

    /// applicationData texts the merchant refuses: not canonical base64, empty, or over 64 KiB decoded.
    static let badApplicationData = [
        "YXBw ", " YXBw", "YX Bw", "YXBw\n", "YXB=", "YQ", "YR==", "YXBw====", "YX-w", "YX_w", "!!!!", "",
        Data(repeating: 1, count: MerchantAPI.maxApplicationDataBytes + 1).base64EncodedString(),
        String(repeating: "A", count: 200_000),
    ]

    @Test("Over HTTPS: bad applicationData (base64, size, type) is 400 invalidApplicationData; no order is stored")
    func badApplicationDataChangesNothing() async throws {
        let s = try await MerchantSandbox()
        let before = try s.storedOrders()
        for text in Self.badApplicationData {
            let response = try await s.send(
                MerchantAPI.CreateOrder(item: "Coffee", amount: "9.99", currency: "USD", applicationDataBase64: text))
            #expect(response.status == .badRequest, "\(text.prefix(20))")
            let error = try JSONDecoder().decode(MerchantAPI.ErrorBody.self, from: response.body).error
            #expect(error.code == MerchantAPI.ErrorCode.invalidApplicationData)
            #expect(error.message.contains("send the base64 of 1 byte to 64 KiB"), "\(error.message)")
        }
        // The wrong JSON type.
        for value in ["5", "[\"YXBw\"]", "{}", "true"] {
            let response = try await s.merchantClient.send(
                HTTPClientRequest(
                    method: .post, url: s.merchantBase + MerchantAPI.Route.orders,
                    headers: ["Content-Type": "application/json"],
                    body: Data(#"{"item":"Coffee","amount":"9.99","applicationData":\#(value)}"#.utf8)))
            #expect(response.status == .badRequest)
            #expect(MerchantSandbox.errorCode(response) == MerchantAPI.ErrorCode.invalidApplicationData, "\(value)")
        }
        #expect(try s.storedOrders() == before)
        // The largest taken: 64 KiB, stored as sent.
        let largest = Data((0..<MerchantAPI.maxApplicationDataBytes).map { UInt8(truncatingIfNeeded: $0 * 7) })
        let order = try await s.createOrder(applicationData: largest)
        #expect(order.applicationData == Array(largest))
        #expect(try s.storedOrders()[order.id] == Array(largest))
        // An explicit null is no applicationData: the order's own.
        let null = try await s.merchantClient.send(
            HTTPClientRequest(
                method: .post, url: s.merchantBase + MerchantAPI.Route.orders,
                headers: ["Content-Type": "application/json"],
                body: Data(#"{"item":"Coffee","amount":"9.99","applicationData":null}"#.utf8)))
        let created = try JSONDecoder().decode(MerchantAPI.OrderCreated.self, from: null.body)
        #expect(created.applicationData == Data("{\"orderID\":\"\(created.orderID)\"}".utf8).base64EncodedString())
        await s.close()
    }

    @Test(
        "Over HTTPS: the server's answers decode as the contract's; the payment is bound to the app's applicationData"
    )
    func boundToTheAppsApplicationData() async throws {
        let s = try await MerchantSandbox()
        try await s.provisionPhone()
        // The app's own data: not the merchant's JSON, with bytes no text form would keep.
        let appData = Data("basket:42;".utf8) + Data((0..<200).map { UInt8(255 - $0) })
        let createdResponse = try await s.send(
            MerchantAPI.CreateOrder(item: "Coffee", amount: "9.99", currency: "USD", applicationData: appData))
        try #require(createdResponse.status == .created)
        #expect(
            Self.keys(createdResponse) == [
                "orderID", "merchantIdentifier", "countryCode", "currency", "total", "supportedNetworks",
                "merchantCapabilities", "applicationData",
            ])
        let created = try JSONDecoder().decode(MerchantAPI.OrderCreated.self, from: createdResponse.body)
        #expect(created.applicationData == appData.base64EncodedString())
        #expect(created.total == "9.99" && created.currency == "USD")
        #expect(try s.storedOrders()[created.orderID] == Array(appData))

        // A token for other data: refused, typed; nothing charged, the order stays open with no payment.
        let other = try await s.token(amount: 999, applicationData: Array("{\"orderID\":\"\(created.orderID)\"}".utf8))
        let refused = try await s.pay(created.orderID, token: other)
        #expect(refused.status == .unprocessableContent)
        #expect(Self.keys(refused) == ["error"])
        let problem = try JSONDecoder().decode(MerchantAPI.ErrorBody.self, from: refused.body).error
        #expect(problem.code == MerchantAPI.ErrorCode.orderMismatch)
        #expect(try s.issuerAuthorizations().isEmpty)
        let open = try JSONDecoder().decode(MerchantAPI.OrderStatus.self, from: try await s.order(created.orderID).body)
        #expect(open.status == "open" && open.paymentStatus == nil && open.payment == nil)

        // The token for the app's data: the typed submission is read by the server field for field, then paid.
        let token = try await s.token(amount: 999, applicationData: Array(appData))
        let parsedToken = try PaymentToken(jsonBytes: Array(token.utf8))
        #expect(parsedToken.paymentData.header.applicationData == SHA256.hash(Array(appData)))
        let submission = MerchantAPI.PaymentSubmission(
            token: Data(token.utf8), shippingContact: MerchantServerTests.shippingContact,
            billingContact: MerchantServerTests.billingContact, shippingMethod: MerchantServerTests.shippingMethod)
        let read = try PaymentProcessor.parseSubmission(try submission.body())
        #expect(read.token.json.serializedBytes == parsedToken.json.serializedBytes)
        #expect(read.transactionID == parsedToken.paymentData.header.transactionIdHex)
        let expected = MerchantAPI.Fulfilment(
            recipientName: "Alice Doe", addressLines: ["1 Infinite Loop"], locality: "Cupertino",
            administrativeArea: "CA", postalCode: "95014", countryCode: "US", receiptEmail: "alice@example.com",
            shippingMethodIdentifier: "pickup", shippingMethodLabel: "Pick up in store")
        #expect(read.fulfilment == expected)

        let paid = try await s.pay(created.orderID, body: try submission.body())
        try #require(paid.status == .ok, "\(String(decoding: paid.body, as: UTF8.self))")
        #expect(
            Self.keys(paid) == [
                "orderID", "outcome", "responseCode", "reason", "maskedPAN", "transactionIdentifier", "approvalCode",
            ])
        let result = try JSONDecoder().decode(MerchantAPI.PaymentResult.self, from: paid.body)
        #expect(result.isApproved && result.responseCode == "00" && result.orderID == created.orderID)
        #expect(result.transactionIdentifier == parsedToken.transactionIdentifier)
        #expect(try s.issuerAuthorizations().count == 1)

        let statusResponse = try await s.order(created.orderID)
        #expect(
            Self.keys(statusResponse) == [
                "orderID", "merchantIdentifier", "item", "currency", "total", "applicationData", "status",
                "createdAt", "paymentStatus", "payment", "fulfilment",
            ])
        let status = try JSONDecoder().decode(MerchantAPI.OrderStatus.self, from: statusResponse.body)
        #expect(status.status == "paid" && status.paymentStatus == "approved" && status.payment == result)
        #expect(status.applicationData == created.applicationData && status.fulfilment == expected)

        // Errors of other routes decode as the contract's too.
        let unknown = try await s.order("ord_nosuchorder")
        #expect(
            try JSONDecoder().decode(MerchantAPI.ErrorBody.self, from: unknown.body).error.code
                == MerchantAPI.ErrorCode.orderNotFound)
        await s.close()
    }
}
