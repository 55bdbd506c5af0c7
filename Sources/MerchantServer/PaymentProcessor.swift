import AcquirerAPI
import CardBasics
import Foundation
import MerchantAPI
import MerchantKit
import OrchardCrypto
import OrchardHTTP
import OrchardLogging
import OrchardRuntime
import OrchardStore
import PaymentCredential
import PaymentToken
import Synchronization

/// The demo merchant's orders and in-app payments (docs/merchant-server.md).
///
/// A payment: the token is parsed strictly; a token whose transactionId is on record gets the first answer
/// again (same order, same token bytes) or is refused; otherwise it is verified and decrypted by MerchantKit
/// (signature, chain to the deployment's token root, freshness, the merchant's processing key) and checked
/// against the order (applicationData hash, amount, currency). Then ONE write transaction records the charge
/// (`charging`, the DPAN masked) and claims the order; only then the acquirer is asked, with an idempotency key
/// derived from the order and its attempt number. The decision is recorded in one transaction with the answer,
/// which is replayed for a resubmission. A charge without an answer is reversed with the same key; a charge
/// left unresolved by a stopped process is reversed when its token comes again or at the next start.
final class PaymentProcessor: Sendable {
    static let countryCode = "US"
    static let supportedNetworks = [CardNetwork.visa, .mastercard].map(\.name)
    static let merchantCapabilities = ["supports3DS", "supportsCredit", "supportsDebit"]
    /// Largest payment request body: a token is at most 64 KiB; contacts add little.
    static let bodyLimits = JSONLimits(maxBytes: 96 * 1024, maxDepth: 16)

    let merchantIdentifier: String
    private let store: Store
    private let decryptor: PaymentTokenDecryptor
    private let gateway: any AcquirerGateway
    private let clock: any WallClock
    private let random: any RandomSource
    private let logger: Logger
    /// Transaction IDs whose charge a request of this process is driving.
    private let inFlight = Mutex<Set<String>>([])

    init(
        merchantIdentifier: String, store: Store, decryptor: PaymentTokenDecryptor, gateway: any AcquirerGateway,
        clock: any WallClock, random: any RandomSource, logger: Logger
    ) {
        self.merchantIdentifier = merchantIdentifier
        self.store = store
        self.decryptor = decryptor
        self.gateway = gateway
        self.clock = clock
        self.random = random
        self.logger = logger
    }

    // MARK: Routes

    func addRoutes(to router: inout Router) {
        // Under load a payment for an order already made goes ahead of new orders (docs/overload.md).
        router.classify(MerchantAPI.Declared.payment, as: .payment)
        router.classify(MerchantAPI.Declared.orders, as: .orderCreation)
        router.add(MerchantAPI.Declared.orders) { [self] request in try await createOrder(request.body) }
        router.add(MerchantAPI.Declared.payment) { [self] request in
            try await pay(orderID: try Self.parameter(request), body: request.body)
        }
        router.add(MerchantAPI.Declared.order) { [self] request in
            try await orderStatus(try Self.parameter(request))
        }
    }

    // Synchronous helpers: Swift 6.3 release builds crash on some typed-throws calls made directly in async
    // closures, so route bodies call these.
    static func parameter(_ request: HTTPRequest) throws -> String {
        do {
            return try request.parameter(MerchantAPI.Route.orderIDParameter)
        } catch {
            throw MerchantServerError(.malformedRequest, "the path has no order ID")
        }
    }

    static func json(_ value: some Encodable, status: HTTPStatus = .ok) throws -> HTTPResponse {
        try HTTPResponse.json(value, status: status)
    }

    // MARK: Orders

    /// `POST /v1/orders`: a new open order with a fresh order ID and its applicationData (the app's, else the
    /// order's own), stored in one insert before the answer.
    func createOrder(_ body: Data) async throws -> HTTPResponse {
        let input = try Self.decodeCreateOrder(body)
        let orderID = Self.newOrderID(random)
        let order = MerchantOrderStore.Order(
            orderID: orderID, item: input.item, amount: input.amount,
            applicationData: input.applicationData ?? Self.applicationData(orderID: orderID), createdAt: clock.now(),
            state: .open, chargeAttempts: 0, fulfilment: nil)
        try await store.write { db in try MerchantOrderStore.insert(order, in: db) }
        logger.info(
            "order created",
            metadata: [
                "order_id": .string(orderID), "amount_minor": .integer(Int(order.amount.minorUnits)),
                "currency": .string(order.amount.currency.code),
            ])
        return try Self.json(created(order), status: .created)
    }

    func created(_ order: MerchantOrderStore.Order) -> MerchantAPI.OrderCreated {
        MerchantAPI.OrderCreated(
            orderID: order.orderID, merchantIdentifier: merchantIdentifier, countryCode: Self.countryCode,
            currency: order.amount.currency.code, total: order.amount.decimalString,
            supportedNetworks: Self.supportedNetworks,
            merchantCapabilities: Self.merchantCapabilities,
            applicationData: Data(order.applicationData).base64EncodedString())
    }

    struct NewOrder {
        let item: String
        let amount: Money
        /// The app's applicationData, if it sent one.
        let applicationData: [UInt8]?
    }

    static func decodeCreateOrder(_ body: Data) throws -> NewOrder {
        let input: MerchantAPI.CreateOrder
        if let duplicate = DuplicateJSONKeys.first(in: body) {
            throw MerchantServerError(.malformedRequest, "field '\(duplicate)' appears twice; send each field once")
        }
        do {
            input = try JSONDecoder().decode(MerchantAPI.CreateOrder.self, from: body)
        } catch DecodingError.typeMismatch(_, let context)
            where context.codingPath.first?.stringValue == "applicationData"
        {
            throw invalidApplicationData("applicationData is not a JSON string")
        } catch {
            throw MerchantServerError(
                .malformedRequest,
                "the body is {\"item\": string, \"amount\": decimal string such as \"9.99\", \"currency\": \"USD\", "
                    + "\"applicationData\"?: base64}")
        }
        let item = input.item.trimmingCharacters(in: .whitespaces)
        guard (1...128).contains(item.count),
            !item.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else {
            throw MerchantServerError(.malformedRequest, "an item is 1 to 128 characters without control characters")
        }
        let amount: Money
        do {
            amount = try Money(parsing: input.amount, currency: try Currency(input.currency ?? "USD"))
        } catch {
            throw MerchantServerError(.malformedRequest, error.message)
        }
        return NewOrder(
            item: item, amount: amount, applicationData: try input.applicationData.map(decodeApplicationData))
    }

    /// The app's applicationData: canonical base64 (the standard alphabet, padded, no whitespace, zero padding
    /// bits) of 1 byte to 64 KiB. Only one spelling per byte string is taken, so the text the app sent and the
    /// bytes it hashes cannot differ.
    static func decodeApplicationData(_ text: String) throws -> [UInt8] {
        // Longer text cannot decode to 64 KiB or less: refused before decoding it.
        guard text.utf8.count <= (MerchantAPI.maxApplicationDataBytes + 2) / 3 * 4 else {
            throw invalidApplicationData("applicationData decodes to over 64 KiB")
        }
        guard let bytes = StrictEncoding.base64Decode(text) else {
            throw invalidApplicationData(
                "applicationData is not canonical base64 (standard alphabet, '=' padding, no whitespace or line "
                    + "breaks)")
        }
        guard !bytes.isEmpty else { throw invalidApplicationData("applicationData is empty") }
        guard bytes.count <= MerchantAPI.maxApplicationDataBytes else {
            throw invalidApplicationData("applicationData decodes to over 64 KiB")
        }
        return bytes
    }

    private static func invalidApplicationData(_ problem: String) -> MerchantServerError {
        MerchantServerError(
            .invalidApplicationData,
            problem + "; send the base64 of 1 byte to 64 KiB, or leave applicationData out for the order's own")
    }

    /// `ord_` and 26 lower-case letters (122 bits): unguessable, and with no digits, so the acquirer idempotency
    /// key made from it never looks like a card number.
    static func newOrderID(_ random: any RandomSource) -> String {
        var letters: [UInt8] = []
        while letters.count < 26 {
            for byte in random.bytes(32) where byte < 234 && letters.count < 26 {
                letters.append(UInt8(ascii: "a") + byte % 26)
            }
        }
        return "ord_" + String(decoding: letters, as: UTF8.self)
    }

    /// The applicationData of an order whose app sent none: the UTF-8 JSON `{"orderID":"<orderID>"}`. The order
    /// ID is unique and unguessable, so a token whose header carries this data's hash was made for this order and
    /// no other.
    static func applicationData(orderID: String) -> [UInt8] {
        Array("{\"orderID\":\"\(orderID)\"}".utf8)
    }

    /// The acquirer idempotency key of the order's `attempt`-th charge: a retry of one charge reaches the
    /// acquirer's first answer; a new token after a decline or reversal is a new attempt.
    static func idempotencyKey(orderID: String, attempt: Int) -> String { "order-\(orderID)-\(attempt)" }

    /// `GET /v1/orders/{orderID}`.
    func orderStatus(_ orderID: String) async throws -> HTTPResponse {
        let found = try await store.read { db -> (MerchantOrderStore.Order, MerchantOrderStore.Payment?)? in
            guard let order = try MerchantOrderStore.order(orderID, in: db) else { return nil }
            return (order, try MerchantOrderStore.latestPayment(orderID: orderID, in: db))
        }
        guard let (order, payment) = found else { throw Self.unknownOrder() }
        let result: MerchantAPI.PaymentResult? = payment.flatMap { payment in
            guard payment.answerStatus == 200, let answer = payment.answer else { return nil }
            // try?: a stored answer that does not decode leaves the status without a result.
            return try? JSONDecoder().decode(MerchantAPI.PaymentResult.self, from: Data(answer.utf8))
        }
        let paymentStatus: String? = payment.map { payment in
            switch payment.state {
            case .charging, .reversing: return "processing"
            case .approved: return "approved"
            case .declined: return "declined"
            case .reversed: return "reversed"
            case .refused: return "failed"
            }
        }
        let status: String
        switch order.state {
        case .open: status = "open"
        case .charging: status = "processing"
        case .paid: status = "paid"
        }
        let fulfilment = order.fulfilment.flatMap {
            // try?: a stored fulfilment that does not decode is shown as none.
            try? JSONDecoder().decode(MerchantAPI.Fulfilment.self, from: Data($0.utf8))
        }
        return try Self.json(
            MerchantAPI.OrderStatus(
                orderID: order.orderID, merchantIdentifier: merchantIdentifier, item: order.item,
                currency: order.amount.currency.code, total: order.amount.decimalString,
                applicationData: Data(order.applicationData).base64EncodedString(),
                status: status, createdAt: Self.rfc3339(order.createdAt), paymentStatus: paymentStatus,
                payment: result, fulfilment: fulfilment))
    }

    static func unknownOrder() -> MerchantServerError {
        MerchantServerError(.orderNotFound, "no order with this ID")
    }

    static func rfc3339(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }

    // MARK: Payments

    /// A payment request body, parsed.
    struct Submission: Sendable {
        let token: PaymentToken
        /// SHA-256 of the token's JSON as parsed (members in their order, no insignificant whitespace).
        let tokenHash: [UInt8]
        let fulfilment: MerchantAPI.Fulfilment?

        var transactionID: String { token.paymentData.header.transactionIdHex }
        var transactionIdentifier: String { token.transactionIdentifier ?? transactionID.uppercased() }
    }

    /// `POST /v1/orders/{orderID}/payment`.
    func pay(orderID: String, body: Data, web: Bool = false) async throws -> HTTPResponse {
        let submission = try Self.parseSubmission(body)
        guard let order = try await store.read({ db in try MerchantOrderStore.order(orderID, in: db) }) else {
            throw Self.unknownOrder()
        }
        let transactionID = submission.transactionID
        if let existing = try await store.read({ db in
            try MerchantOrderStore.payment(transactionID: transactionID, in: db)
        }) {
            return try await resubmitted(existing, submission: submission, order: order)
        }
        let verified = try Self.verify(submission.token, for: order, decryptor: decryptor)
        guard claim(transactionID) else {
            throw MerchantServerError(.paymentInProgress, "this token is being charged; ask again for its outcome")
        }
        defer { release(transactionID) }
        let key = try await begin(
            order: order, submission: submission, maskedPAN: PrimaryAccountNumber.mask(verified.dpan))
        var request = AcquirerCharge(
            merchantID: merchantIdentifier, idempotencyKey: key, dpan: verified.dpan, expiryYear: verified.expiryYear,
            expiryMonth: verified.expiryMonth, amountMinorUnits: order.amount.minorUnits,
            currency: order.amount.currency.numericString, cryptogram: verified.cryptogram,
            applicationTransactionCounter: verified.atc,
            transactionData: RemoteTransactionData(
                merchantIdentifier: merchantIdentifier, amount: order.amount.minorUnits,
                currency: order.amount.currency.numericCode
            ).encoded,
            eci: verified.eci, appleMerchantID: merchantIdentifier)
        request.web = web
        return try await charge(request, order: order, submission: submission)
    }

    /// What the merchant needs from a verified, decrypted token to charge it.
    struct VerifiedPayment: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
        let dpan: String
        let expiryYear: Int
        let expiryMonth: Int
        let cryptogram: [UInt8]
        let atc: UInt16
        let eci: String?

        var description: String { "VerifiedPayment(\(PrimaryAccountNumber.mask(dpan)))" }
        var debugDescription: String { description }
        var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
    }

    static func parseSubmission(_ body: Data) throws -> Submission {
        let root: JSONValue
        do {
            root = try StrictJSONParser.parse(Array(body), limits: bodyLimits)
        } catch {
            throw MerchantServerError(
                .malformedRequest, "the body is not a JSON object within 96 KiB: \(error.message)")
        }
        guard case .object = root, let tokenJSON = root["token"], case .object = tokenJSON else {
            throw MerchantServerError(
                .malformedRequest, "the body is {\"token\": <the PKPaymentToken object>, \"shippingContact\"?, ...}")
        }
        let serialized = tokenJSON.serializedBytes
        let token: PaymentToken
        do {
            token = try PaymentToken(jsonBytes: serialized)
        } catch {
            throw MerchantServerError(
                .malformedRequest, "the token is not an Apple Pay payment token: \(error.message)")
        }
        let fulfilment = try fulfilment(
            shipping: root["shippingContact"], billing: root["billingContact"], method: root["shippingMethod"])
        return Submission(
            token: token, tokenHash: SHA256.hash(token.json.serializedBytes),
            fulfilment: fulfilment)
    }

    /// What the merchant keeps of the approved contacts and shipping method (``MerchantAPI/Fulfilment``), or nil
    /// when that is nothing. Refuses members that are not objects of the documented form, strings over 256
    /// bytes and more than 4 address lines.
    static func fulfilment(
        shipping shippingJSON: JSONValue?, billing billingJSON: JSONValue?, method methodJSON: JSONValue? = nil
    ) throws -> MerchantAPI.Fulfilment? {
        let shipping: MerchantAPI.Contact? = try decodeMember(shippingJSON, "shippingContact")
        let billing: MerchantAPI.Contact? = try decodeMember(billingJSON, "billingContact")
        let method: MerchantAPI.ShippingMethod? = try decodeMember(methodJSON, "shippingMethod")
        for contact in [shipping, billing].compactMap({ $0 }) {
            guard contact.strings.allSatisfy({ $0.utf8.count <= 256 }), (contact.addressLines?.count ?? 0) <= 4 else {
                throw MerchantServerError(
                    .malformedRequest, "a contact field is longer than 256 bytes or has over 4 address lines")
            }
        }
        for text in [method?.identifier, method?.label].compactMap({ $0 }) where text.utf8.count > 256 {
            throw MerchantServerError(.malformedRequest, "a shipping method field is longer than 256 bytes")
        }
        let fulfilment = MerchantAPI.Fulfilment(
            recipientName: shipping?.recipientName, addressLines: shipping?.lines, locality: shipping?.city,
            administrativeArea: shipping?.area, postalCode: shipping?.postal, countryCode: shipping?.country,
            receiptEmail: shipping?.emailAddress ?? billing?.emailAddress,
            shippingMethodIdentifier: method?.identifier, shippingMethodLabel: method?.label)
        return fulfilment.isEmpty ? nil : fulfilment
    }

    private static func decodeMember<T: Decodable>(_ value: JSONValue?, _ name: String) throws -> T? {
        guard let value, value != .null else { return nil }
        do {
            return try JSONDecoder().decode(T.self, from: Data(value.serializedBytes))
        } catch {
            throw MerchantServerError(.malformedRequest, "\(name) is not an object of the documented form")
        }
    }

    /// MerchantKit's verification and decryption against `order`, then the 3-D Secure fields the charge needs.
    static func verify(
        _ token: PaymentToken, for order: MerchantOrderStore.Order, decryptor: PaymentTokenDecryptor
    ) throws -> VerifiedPayment {
        let result: PaymentTokenDecryptor.Result
        do {
            result = try decryptor.decrypt(
                token,
                order: ExpectedOrder(
                    applicationData: order.applicationData, amount: order.amount.minorUnits,
                    currencyCode: order.amount.currency.numericString))
        } catch {
            if error.code == .orderMismatch { throw MerchantServerError(.orderMismatch, error.message) }
            throw MerchantServerError(.tokenRejected, "\(error.code): \(error.message)")
        }
        let payment = result.payment
        guard case .threeDSecure(let cryptogramText, let eci) = payment.credential,
            let cryptogram = StrictEncoding.base64Decode(cryptogramText),
            // try?: a cryptogram that does not parse is the refusal below.
            let remote = try? RemoteCryptogram(bytes: cryptogram)
        else {
            throw MerchantServerError(.tokenRejected, "the token carries no remote (3-D Secure) cryptogram")
        }
        let dpan = payment.applicationPrimaryAccountNumber
        let expiry = Array(payment.applicationExpirationDate.utf8)
        guard (12...19).contains(dpan.utf8.count), dpan.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
            expiry.count == 6, expiry.allSatisfy({ (0x30...0x39).contains($0) }),
            let year = Int(String(decoding: expiry[0..<2], as: UTF8.self)),
            let month = Int(String(decoding: expiry[2..<4], as: UTF8.self)), (1...12).contains(month)
        else {
            throw MerchantServerError(.tokenRejected, "the token's account number or expiry is malformed")
        }
        return VerifiedPayment(
            dpan: dpan, expiryYear: 2000 + year, expiryMonth: month, cryptogram: cryptogram, atc: remote.atc, eci: eci)
    }

    /// Records the charge (`charging`) and claims the order, in one write transaction; returns the acquirer
    /// idempotency key.
    func begin(
        order: MerchantOrderStore.Order, submission: Submission, maskedPAN: String
    ) async throws -> String {
        let injected = clock.now()
        return try await store.write { db in
            // On a shared (PostgreSQL) store the charge is dated on the database's clock, which every instance ages
            // it on (``isDrivenElsewhere(_:databaseNow:)``).
            let shared = try db.databaseClockMicroseconds()
            let now = shared.map { Date(timeIntervalSince1970: Double($0) / 1e6) } ?? injected
            if try MerchantOrderStore.payment(transactionID: submission.transactionID, in: db) != nil {
                throw MerchantServerError(.paymentInProgress, "this token was submitted meanwhile; ask again")
            }
            guard let current = try MerchantOrderStore.order(order.orderID, in: db) else { throw Self.unknownOrder() }
            switch current.state {
            case .paid:
                throw MerchantServerError(.orderAlreadyPaid, "this order was already paid with another token")
            case .charging:
                throw MerchantServerError(.paymentInProgress, "another payment for this order is on its way")
            case .open:
                break
            }
            let attempt = current.chargeAttempts + 1
            let key = Self.idempotencyKey(orderID: order.orderID, attempt: attempt)
            try db.execute(
                "UPDATE orders SET state = 'charging', charge_attempts = ? WHERE order_id = ?",
                [.int(attempt), .text(order.orderID)])
            try db.execute(
                """
                INSERT INTO order_payments (transaction_id, order_id, token_hash, idempotency_key, state, masked_pan,
                                            transaction_identifier, received_at)
                VALUES (?, ?, ?, ?, 'charging', ?, ?, ?)
                """,
                [
                    .text(submission.transactionID), .text(order.orderID), .blob(submission.tokenHash), .text(key),
                    .text(maskedPAN), .text(submission.transactionIdentifier), .milliseconds(now),
                ])
            return key
        }
    }

    /// Sends the charge and records its outcome.
    func charge(
        _ charge: AcquirerCharge, order: MerchantOrderStore.Order, submission: Submission
    ) async throws -> HTTPResponse {
        let transactionID = submission.transactionID
        switch await gateway.authorize(charge) {
        case .answered(let decision):
            let result = MerchantAPI.PaymentResult(
                orderID: order.orderID, outcome: decision.isApproved ? "approved" : "declined",
                responseCode: decision.responseCode,
                reason: decision.isApproved
                    ? "approved" : (decision.declineReason ?? Self.reason(decision.responseCode)),
                maskedPAN: charge.maskedDPAN, transactionIdentifier: submission.transactionIdentifier,
                approvalCode: decision.isApproved ? decision.approvalCode : nil)
            let answer = try Self.encode(result)
            let fulfilment = try submission.fulfilment.map { try Self.encode($0) }
            let now = clock.now()
            let recorded = try await store.write { db -> Bool in
                // Only a charge still `charging`: another instance that took it over (reversing it) decides.
                let changed = try db.execute(
                    """
                    UPDATE order_payments SET state = ?, decided_at = ?, answer_status = 200, answer = ?
                    WHERE transaction_id = ? AND state = 'charging'
                    """,
                    [
                        .text(decision.isApproved ? "approved" : "declined"), .milliseconds(now), .text(answer),
                        .text(transactionID),
                    ])
                guard changed > 0 else { return false }
                if decision.isApproved {
                    try db.execute(
                        """
                        UPDATE orders SET state = 'paid', paid_transaction_id = ?, fulfilment = ? WHERE order_id = ?
                        """, [.text(transactionID), .optional(fulfilment), .text(order.orderID)])
                } else {
                    try db.execute("UPDATE orders SET state = 'open' WHERE order_id = ?", [.text(order.orderID)])
                }
                return true
            }
            guard recorded else {
                logger.warning(
                    "the acquirer answered a charge another instance took over: its outcome stands",
                    metadata: ["order_id": .string(order.orderID)])
                return try await recordedOutcome(transactionID)
            }
            logger.notice(
                "payment \(result.outcome)",
                metadata: [
                    "order_id": .string(order.orderID), "card": .string(charge.maskedDPAN),
                    "response_code": .string(decision.responseCode), "reason": .string(result.reason),
                ])
            return try Self.json(result)
        case .refused(let status, let message):
            let error = MerchantServerError(
                .acquirerRefused, "the acquirer refused the authorization request (\(status)): \(message)")
            try await finish(transactionID, order: order, state: .refused, error: error)
            logger.error("the acquirer refused a charge", metadata: ["order_id": .string(order.orderID)])
            throw error
        case .notDelivered(let why):
            // Nothing reached the acquirer: forget the charge; the same token may come again.
            try await store.write { db in
                let deleted = try db.execute(
                    "DELETE FROM order_payments WHERE transaction_id = ? AND state = 'charging'",
                    [.text(transactionID)])
                guard deleted > 0 else { return }
                try db.execute(
                    "UPDATE orders SET state = 'open', charge_attempts = charge_attempts - 1 WHERE order_id = ?",
                    [.text(order.orderID)])
            }
            logger.warning("the acquirer is unreachable", metadata: ["order_id": .string(order.orderID)])
            throw MerchantServerError(.acquirerUnavailable, "\(why); nothing was charged, try again")
        case .noAnswer(let why):
            logger.warning(
                "no answer to a charge: reversing it",
                metadata: ["order_id": .string(order.orderID), "why": .string(why)])
            return try await reverse(transactionID, key: charge.idempotencyKey, order: order)
        }
    }

    /// Reverses the charge of `key` and records the outcome. The order stays claimed until the acquirer
    /// acknowledged the reversal.
    func reverse(_ transactionID: String, key: String, order: MerchantOrderStore.Order) async throws -> HTTPResponse {
        let pending = try await store.write { db in
            try db.execute(
                """
                UPDATE order_payments SET state = 'reversing'
                WHERE transaction_id = ? AND state IN ('charging', 'reversing')
                """, [.text(transactionID)])
        }
        // Decided meanwhile (by the instance that charged it): that outcome stands, nothing is reversed.
        guard pending > 0 else { return try await recordedOutcome(transactionID) }
        let outcome = await gateway.reverse(
            merchantID: merchantIdentifier, idempotencyKey: key, amountMinorUnits: order.amount.minorUnits,
            currency: order.amount.currency.numericString, reason: "timeout")
        switch outcome {
        case .answered:
            let error = MerchantServerError(
                .acquirerUnavailable,
                "the acquirer did not answer the charge, so it was reversed: nothing was charged; pay again")
            try await finish(transactionID, order: order, state: .reversed, error: error)
            logger.notice("charge reversed", metadata: ["order_id": .string(order.orderID)])
            throw error
        case .notDelivered(let why), .noAnswer(let why), .refused(_, let why):
            logger.error(
                "a reversal is pending", metadata: ["order_id": .string(order.orderID), "why": .string(why)])
            throw MerchantServerError(
                .acquirerUnavailable,
                "the acquirer did not answer the charge and its reversal is pending (\(why)); "
                    + "submit the same token again")
        }
    }

    /// Records a final error answer for the payment and reopens the order.
    private func finish(
        _ transactionID: String, order: MerchantOrderStore.Order, state: MerchantOrderStore.PaymentState,
        error: MerchantServerError
    ) async throws {
        let answer = try Self.encode(MerchantAPI.ErrorBody(code: error.code.rawValue, message: error.message))
        let status = error.httpStatus.code
        let now = clock.now()
        try await store.write { db in
            let changed = try db.execute(
                """
                UPDATE order_payments SET state = ?, decided_at = ?, answer_status = ?, answer = ?
                WHERE transaction_id = ? AND state IN ('charging', 'reversing')
                """, [.text(state.rawValue), .milliseconds(now), .int(status), .text(answer), .text(transactionID)])
            guard changed > 0 else { return }
            try db.execute("UPDATE orders SET state = 'open' WHERE order_id = ?", [.text(order.orderID)])
        }
    }

    /// The answer on record for a charge another instance decided: replayed when final, else still in progress.
    private func recordedOutcome(_ transactionID: String) async throws -> HTTPResponse {
        let payment = try await store.read { db in
            try MerchantOrderStore.payment(transactionID: transactionID, in: db)
        }
        guard let payment, payment.state.isFinal, let status = payment.answerStatus, let answer = payment.answer else {
            throw MerchantServerError(.paymentInProgress, "this token is being charged; ask again for its outcome")
        }
        return try Self.replay(status: status, answer: answer)
    }

    /// How long a charge left `charging` on a shared store may still be driven by the instance that began it (its
    /// acquirer call, failed over between the network's instances, ends well within it). Until then another instance
    /// neither reverses it nor takes it over: its own in-flight set does not know another process's requests.
    static let sharedChargeGrace: TimeInterval = 60

    /// Whether `payment` may be in the hands of another instance on the same PostgreSQL database: `charging`, and
    /// begun less than ``sharedChargeGrace`` ago by the database's clock (`databaseNow`; nil on SQLite, where one
    /// process owns the store and its in-flight set is the whole truth).
    static func isDrivenElsewhere(_ payment: MerchantOrderStore.Payment, databaseNow: Date?) -> Bool {
        guard let databaseNow, payment.state == .charging else { return false }
        return databaseNow.timeIntervalSince(payment.receivedAt) < sharedChargeGrace
    }

    /// A token whose transactionId is on record: the first answer again (same order, same token), the
    /// completion of a charge left unresolved, or a refusal.
    func resubmitted(
        _ existing: MerchantOrderStore.Payment, submission: Submission, order: MerchantOrderStore.Order
    ) async throws -> HTTPResponse {
        guard existing.orderID == order.orderID else {
            throw MerchantServerError(.tokenAlreadyUsed, "this token was already submitted for another order")
        }
        guard existing.tokenHash == submission.tokenHash else {
            throw MerchantServerError(
                .tokenAlreadyUsed, "another token with this transactionId was already submitted for this order")
        }
        if existing.state.isFinal, let status = existing.answerStatus, let answer = existing.answer {
            return try Self.replay(status: status, answer: answer)
        }
        guard !Self.isDrivenElsewhere(existing, databaseNow: try await store.databaseClock()),
            claim(existing.transactionID)
        else {
            throw MerchantServerError(.paymentInProgress, "this token is being charged; ask again for its outcome")
        }
        defer { release(existing.transactionID) }
        // Charging with no request of this process on it (the process stopped before the outcome), or a
        // reversal pending: the outcome is unknown, so the charge is reversed.
        return try await reverse(existing.transactionID, key: existing.idempotencyKey, order: order)
    }

    /// Reverses every charge left `charging` or `reversing` that no request of this process drives: a stopped
    /// process left it, or the acquirer did not take its reversal. Run once the server listens and then
    /// periodically; a reversal that fails again stays `reversing` for the next pass. On a store shared by several
    /// instances a `charging` payment younger than ``sharedChargeGrace`` is left alone (another instance may be
    /// charging it); and every outcome is recorded only over the state it was decided from, so an instance's late
    /// answer never overwrites another's reversal, nor a reversal an approval.
    func resolveUnfinished() async {
        // try?: the failure is logged below and the next pass retries.
        guard let pending = try? await store.read({ db in try MerchantOrderStore.unresolvedPayments(in: db) }) else {
            logger.warning("reconciliation: the payments could not be read; the next pass retries")
            return
        }
        // On a shared store, a recent charge may be another instance's request in flight: left to it for now.
        let databaseNow: Date?
        do {
            databaseNow = try await store.databaseClock()
        } catch {
            logger.warning("reconciliation: the database's clock could not be read; the next pass retries")
            return
        }
        for payment in pending
        where !Self.isDrivenElsewhere(payment, databaseNow: databaseNow) && claim(payment.transactionID) {
            defer { release(payment.transactionID) }
            let order: MerchantOrderStore.Order?
            do {
                order = try await store.read({ db in try MerchantOrderStore.order(payment.orderID, in: db) })
            } catch {
                logger.warning(
                    "reconciliation: the order of a charge without an outcome could not be read; the next pass retries",
                    metadata: ["order_id": .string(payment.orderID), "state": .string(payment.state.rawValue)])
                continue
            }
            guard let order else {
                logger.warning(
                    "reconciliation: a charge without an outcome names no stored order; it is left as it is",
                    metadata: ["order_id": .string(payment.orderID), "state": .string(payment.state.rawValue)])
                continue
            }
            logger.notice(
                "reconciliation: a charge without an outcome is reversed",
                metadata: ["order_id": .string(order.orderID), "state": .string(payment.state.rawValue)])
            do {
                _ = try await reverse(payment.transactionID, key: payment.idempotencyKey, order: order)
            } catch is MerchantServerError {
                // The answer a client would get (reversed, or the reversal pending): `reverse` logged the outcome.
            } catch {
                logger.warning(
                    "reconciliation: the reversal could not be recorded (\(type(of: error))); the next pass retries",
                    metadata: ["order_id": .string(order.orderID)])
            }
        }
    }

    static func replay(status: Int, answer: String) throws -> HTTPResponse {
        if status == 200 {
            return HTTPResponse(status: .ok, headers: ["Content-Type": "application/json"], body: Data(answer.utf8))
        }
        // try?: a stored answer that does not decode is the error below.
        guard let wire = try? JSONDecoder().decode(MerchantAPI.ErrorBody.self, from: Data(answer.utf8)) else {
            throw MerchantServerError(.internalFailure, "a stored answer is unreadable")
        }
        throw MerchantServerError(.init(wire.error.code), wire.error.message)
    }

    static func encode(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    private func claim(_ transactionID: String) -> Bool {
        inFlight.withLock { $0.insert(transactionID).inserted }
    }

    private func release(_ transactionID: String) {
        _ = inFlight.withLock { $0.remove(transactionID) }
    }

    /// A reason for a decline whose answer named none.
    static func reason(_ responseCode: String) -> String {
        switch responseCode {
        case "05": "doNotHonour"
        case "12": "invalidTransaction"
        case "14": "invalidCardNumber"
        case "51": "insufficientFunds"
        case "54": "expiredCard"
        case "57": "notPermitted"
        case "61": "exceedsAmountLimit"
        case "62": "restrictedCard"
        case "88": "cryptographicFailure"
        case "91": "issuerUnavailable"
        default: "declined"
        }
    }
}
