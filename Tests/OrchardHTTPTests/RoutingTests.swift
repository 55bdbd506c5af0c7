import CardBasics
import Foundation
import OrchardLogging
import OrchardRuntime
import Testing

@testable import OrchardHTTP

@Suite("Routing and messages")
struct RoutingTests {
    func router() -> Router {
        var router = Router()
        router.get("/merchants/:id") { _ in .text("param") }
        router.get("/merchants/self") { _ in .text("literal") }
        router.post("/merchants/:id/sessions") { _ in .text("post") }
        router.get("/") { _ in .text("root") }
        return router
    }

    func handlerName(_ match: Router.Match) async throws -> String? {
        guard case .found(let route, _) = match else { return nil }
        let request = HTTPRequest(
            method: .get, path: "/", query: nil, headers: [:], body: Data(), requestID: UUID(), clientCertificate: nil,
            remoteAddress: "", logger: .disabled)
        return String(decoding: try await route.handler(request).body, as: UTF8.self)
    }

    @Test func pathParametersAreDecoded() throws {
        guard case .found(_, let parameters) = router().match(.post, path: "/merchants/m%201/sessions") else {
            Issue.record("no match")
            return
        }
        #expect(parameters == ["id": "m 1"])
    }

    @Test func literalSegmentsWinOverParametersWhateverTheOrder() async throws {
        #expect(try await handlerName(router().match(.get, path: "/merchants/self")) == "literal")
        #expect(try await handlerName(router().match(.get, path: "/merchants/other")) == "param")
        #expect(try await handlerName(router().match(.get, path: "/")) == "root")
        #expect(try await handlerName(router().match(.head, path: "/merchants/x")) == "param")
    }

    @Test func unknownPathIs404AndWrongMethodIs405() {
        guard case .notFound = router().match(.get, path: "/nothing/here") else {
            Issue.record("expected 404")
            return
        }
        guard case .notFound = router().match(.get, path: "/merchants//sessions") else {
            Issue.record("an empty parameter must not match")
            return
        }
        guard case .methodNotAllowed(let allowed) = router().match(.delete, path: "/merchants/x/sessions") else {
            Issue.record("expected 405")
            return
        }
        #expect(allowed == [.post])
    }

    @Test func clientCertificateRequirement() throws {
        let certificate = ClientCertificate(
            derRepresentation: [1], subject: "CN=a", issuer: "CN=root", commonName: "a", organization: nil,
            organizationalUnit: nil, serialNumber: "01")
        #expect(throws: Never.self) { try ClientCertificateRequirement.none.verify(nil) }
        #expect(throws: HTTPError(.clientCertificateRequired, "")) {
            try ClientCertificateRequirement.required.verify(nil)
        }
        #expect(throws: Never.self) { try ClientCertificateRequirement.required.verify(certificate) }
        let onlyB = ClientCertificateRequirement.required { $0.commonName == "b" }
        #expect(throws: HTTPError(.clientCertificateNotAllowed, "")) { try onlyB.verify(certificate) }
        #expect(HTTPError(.clientCertificateRequired, "").httpStatus == .unauthorized)
        #expect(HTTPError(.clientCertificateNotAllowed, "").httpStatus == .forbidden)
    }

    struct Order: Codable, Sendable {
        let amount: Int
        let currency: String
        let items: [Item]
        struct Item: Codable, Sendable {
            let sku: String
        }
    }

    func request(body: String) -> HTTPRequest {
        HTTPRequest(
            method: .post, path: "/", query: "a=1&b=x%2Fy&c=a+b&flag", headers: [:], body: Data(body.utf8),
            requestID: UUID(), clientCertificate: nil, remoteAddress: "", logger: .disabled)
    }

    @Test(arguments: [
        ("", "the request body is empty; send a JSON object"),
        ("{\"amount\":", "the request body is not valid JSON"),
        ("[1]", "the request body must be a JSON object"),
        ("{\"currency\":\"EUR\",\"items\":[]}", "missing field 'amount'"),
        ("{\"amount\":\"12\",\"currency\":\"EUR\",\"items\":[]}", "field 'amount' must be an integer"),
        ("{\"amount\":1,\"currency\":\"EUR\",\"items\":[{\"sku\":5}]}", "field 'items[0].sku' must be a string"),
        ("{\"amount\":1,\"currency\":null,\"items\":[]}", "field 'currency' must not be null (expected a string)"),
        ("{\"amount\":1,\"currency\":\"EUR\",\"items\":{}}", "field 'items' must be an array"),
        ("{\"amount\":1,\"currency\":\"EUR\",\"items\":[3]}", "field 'items[0]' must be an object"),
    ])
    func malformedJSONGetsAClearMessage(body: String, message: String) {
        do {
            _ = try request(body: body).decodeJSON(Order.self)
            Issue.record("decoded \(body)")
        } catch {
            #expect(error.code == .invalidJSON)
            #expect(error.httpStatus == .badRequest)
            #expect(error.message == message)
        }
    }

    /// A key given twice in one object is refused (JSONDecoder would keep one of the values
    /// silently), with a typed 400 naming the field and never its values.
    @Test(
        "S9: A key twice in one object is refused with duplicate_key (400), at the top, nested, escaped or in an array",
        arguments: [
            (#"{"amount":1,"currency":"EUR","items":[],"amount":100000}"#, "amount"),
            (#"{"amount":1,"currency":"EUR","items":[{"sku":"a","sku":"b"}]}"#, "items[0].sku"),
            (#"{"amount":1,"currency":"EUR","items":[],"\u0061mount":2}"#, "amount"),
            (#"{"amount":1,"currency":"EUR","items":[],"extra":{"x":{"y":1,"y":2}}}"#, "extra.x.y"),
        ])
    func duplicateKeysAreRefused(body: String, field: String) {
        do {
            _ = try request(body: body).decodeJSON(Order.self)
            Issue.record("decoded \(body)")
        } catch {
            #expect(error.code == .duplicateKey && error.httpStatus == .badRequest)
            #expect(error.message == "field '\(field)' appears twice in one object; send each field once")
            #expect(!error.message.contains("100000"))
        }
    }

    @Test("The same key in sibling objects, and keys that only look alike, are not duplicates")
    func siblingKeysAreNotDuplicates() throws {
        let body = #"{"amount":1,"currency":"EUR","items":[{"sku":"a"},{"sku":"b"}],"Amount":2,"amount ":3}"#
        #expect(try request(body: body).decodeJSON(Order.self).items.count == 2)
        #expect(DuplicateJSONKeys.first(in: Data(#"{"a":"}\"{","b":[{"a":1}],"c":{"a":{}}}"#.utf8)) == nil)
        #expect(DuplicateJSONKeys.first(in: Data(#"{"a":1,"a""#.utf8)) == "a")
        #expect(DuplicateJSONKeys.first(in: Data("not json".utf8)) == nil)
    }

    @Test("Duplicate keys: string values are skipped, not built, with the same verdicts on escapes and malformed input")
    func duplicateKeyScanSkipsValues() {
        func first(_ json: String) -> String? { DuplicateJSONKeys.first(in: Data(json.utf8)) }
        // Values with every escape, quotes and braces inside, then a duplicate after them.
        #expect(first(#"{"a":"x\"}\\\/\b\f\n\r\t\u00e9{","b":"é","a":2}"#) == "a")
        // An escaped key equals its plain spelling, in either order; a non-ASCII key is found too.
        #expect(first(#"{"ab":1,"a\u0062":2}"#) == "ab")
        #expect(first(#"{"a\u0062":1,"ab":2}"#) == "ab")
        #expect(first(#"{"clé":1,"x":"","clé":2}"#) == "clé")
        // Malformed values end the scan without a verdict (the decoder refuses them): a bad escape, a short or
        // non-hex \u, an unterminated string.
        #expect(first(#"{"a":"\q","a":1}"#) == nil)
        #expect(first(#"{"a":"\u12","a":1}"#) == nil)
        #expect(first(#"{"a":"\u12zz","a":1}"#) == nil)
        #expect(first(#"{"a":"open"#) == nil)
        #expect(first(#"{"a":"x\"#) == nil)
    }

    @Test func decodingErrorsNeverQuoteCardNumbers() {
        struct Card: Decodable { let pan: PrimaryAccountNumber }
        do {
            _ = try request(body: #"{"pan":"4111111111111111x"}"#).decodeJSON(Card.self)
            Issue.record("accepted")
        } catch {
            #expect(error.message.hasPrefix("field 'pan' is invalid"))
            #expect(!error.message.contains("4111111111111111"))
        }
    }

    @Test func queryItemsArePercentDecoded() {
        let items = request(body: "").queryItems
        #expect(items.map(\.name) == ["a", "b", "c", "flag"])
        #expect(items.map(\.value) == ["1", "x/y", "a b", ""])
        #expect(request(body: "").queryValue("b") == "x/y")
    }

    @Test func jsonOutputHasSortedKeysAndUnescapedSlashes() throws {
        struct Out: Encodable {
            let zeta = 1
            let alpha = "https://a/b"
        }
        let response = try HTTPResponse.json(Out(), status: .created)
        #expect(response.status == .created)
        #expect(response.headers["content-type"] == "application/json")
        #expect(String(decoding: response.body, as: UTF8.self) == #"{"alpha":"https://a/b","zeta":1}"#)
    }

    @Test func headersAreCaseInsensitiveAndDescriptionHidesValues() {
        var headers: HTTPHeaders = ["Authorization": "secret", "X-A": "1"]
        headers.add("x-a", "2")
        #expect(headers["AUTHORIZATION"] == "secret")
        #expect(headers.values("X-a") == ["1", "2"])
        headers.set("X-A", "3")
        #expect(headers.values("x-a") == ["3"])
        #expect(!"\(headers)".contains("secret"))
    }

    @Test func requestIDsAreVersion4UUIDs() {
        let ids = (0..<100).map { _ in UUID.random() }
        #expect(Set(ids).count == 100)
        for id in ids {
            let text = id.uuidString
            #expect(text[text.index(text.startIndex, offsetBy: 14)] == "4")
            #expect("89AB".contains(text[text.index(text.startIndex, offsetBy: 19)]))
            #expect(id.lowercasedString == text.lowercased())
        }
        let known = UUID(uuidString: "0A1B2C3D-4E5F-4A6B-8C7D-8E9FA0B1C2D3")!
        #expect(known.lowercasedString == "0a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3")
    }
}

@Suite("Error mapping")
struct ErrorMappingTests {
    struct MerchantUnknown: Error, HTTPResponseError {
        var httpStatus: HTTPStatus { .notFound }
        var httpErrorCode: String { "unknown_merchant" }
        var httpErrorMessage: String { "no merchant with this identifier" }
    }

    struct StoreBroken: Error, CustomStringConvertible {
        var description: String { "disk full while writing card 4111111111111111" }
    }

    @Test func domainErrorsAnswerTheirOwnStatusAndCode() throws {
        let sink = InMemoryLogSink()
        let response = ErrorMapping.response(
            for: MerchantUnknown(), requestID: UUID(), logger: Logger(label: "t", sink: sink))
        #expect(response.status == .notFound)
        let body = try JSONDecoder().decode(ErrorBody.self, from: response.body)
        #expect(body.error.code == "unknown_merchant")
        #expect(body.error.message == "no merchant with this identifier")
        #expect(sink.records.isEmpty)  // a 4xx is the caller's business, not an incident
    }

    @Test func anythingElseIsAnOpaque500LoggedWithTheRequestID() throws {
        let sink = InMemoryLogSink()
        let id = UUID()
        let response = ErrorMapping.response(for: StoreBroken(), requestID: id, logger: Logger(label: "t", sink: sink))
        #expect(response.status == .internalServerError)
        let text = String(decoding: response.body, as: UTF8.self)
        #expect(
            text
                == #"{"error":{"code":"internal_error","message":"internal error (request id "#
                + id.uuidString.lowercased() + #")"}}"#
        )
        #expect(!text.contains("disk"))
        let line = try #require(sink.lines.first)
        #expect(line.contains(id.uuidString.lowercased()))
        #expect(line.contains("disk full"))
        #expect(line.contains("411111******1111"))
        #expect(!line.contains("4111111111111111"))
    }

    struct DiskStopped: Error, HTTPUnavailableError, CustomStringConvertible {
        var stopped: Bool
        var retryAfterSeconds: Int? { stopped ? 30 : nil }
        var description: String { "the store stopped writing after a disk error" }
    }

    @Test("R4: a store stopped by a disk error answers 503 with Retry-After and says so in the log")
    func unavailableAnswers503WithRetryAfter() throws {
        let sink = InMemoryLogSink()
        let id = UUID()
        let response = ErrorMapping.response(
            for: DiskStopped(stopped: true), requestID: id, logger: Logger(label: "t", sink: sink))
        #expect(response.status == .serviceUnavailable)
        #expect(response.headers["Retry-After"] == "30")
        let body = try JSONDecoder().decode(ErrorBody.self, from: response.body)
        #expect(body.error.code == "service_unavailable")
        #expect(!body.error.message.contains("disk"))
        let line = try #require(sink.lines.first)
        #expect(line.contains("stopped writing after a disk error") && line.contains(id.uuidString.lowercased()))
        // The same type without the signal is an ordinary opaque 500.
        let other = ErrorMapping.response(
            for: DiskStopped(stopped: false), requestID: id, logger: Logger(label: "t", sink: sink))
        #expect(other.status == .internalServerError && other.headers["Retry-After"] == nil)
    }

    @Test func internalHTTPErrorsAreOpaqueToo() throws {
        let sink = InMemoryLogSink()
        let response = ErrorMapping.response(
            for: HTTPError(.tlsFailure, "secret detail"), requestID: UUID(), logger: Logger(label: "t", sink: sink))
        #expect(response.status == .internalServerError)
        #expect(!String(decoding: response.body, as: UTF8.self).contains("secret detail"))
        #expect(sink.lines.first?.contains("secret detail") == true)
    }
}
