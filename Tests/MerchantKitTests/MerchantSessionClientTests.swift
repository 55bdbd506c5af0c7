import Foundation
import MerchantKit
import Testing

/// A transport that records what it was asked to send and answers a fixed response.
final class RecordingTransport: MerchantSessionTransport, @unchecked Sendable {
    private let lock = NSLock()
    private var sent: [(URL, [UInt8])] = []
    let answer: MerchantSessionResponse
    init(_ answer: MerchantSessionResponse) { self.answer = answer }
    var requests: [(URL, [UInt8])] { lock.withLock { sent } }

    func post(url: URL, body: [UInt8]) async throws -> MerchantSessionResponse {
        lock.withLock { sent.append((url, body)) }
        return answer
    }
}

@Suite("MerchantKit: merchant sessions")
struct MerchantSessionClientTests {
    static let session = Array(#"{"epochTimestamp":1,"nonce":"0a1b2c3d","weird" : [1, 2]}"#.utf8)

    static func client(_ transport: RecordingTransport) -> MerchantSessionClient {
        MerchantSessionClient(
            merchantIdentifier: "merchant.dev.orchard.demo", displayName: "Orchard Demo",
            sandboxGateways: ["apple-pay-gateway.orchard.test"], transport: transport)
    }

    @Test("W3: the session comes back untouched; the body is Apple's, sent to the validation URL")
    func untouched() async throws {
        let transport = RecordingTransport(MerchantSessionResponse(status: 200, body: Self.session))
        let session = try await Self.client(transport).session(
            validationURL: "https://apple-pay-gateway-cert.apple.com/paymentservices/startSession",
            domain: "store.orchard.test")
        #expect(session == Self.session)
        let (url, body) = try #require(transport.requests.first)
        #expect(url.absoluteString == "https://apple-pay-gateway-cert.apple.com/paymentservices/startSession")
        #expect(
            String(decoding: body, as: UTF8.self)
                == #"{"displayName":"Orchard Demo","initiative":"web","initiativeContext":"store.orchard.test","#
                + #""merchantIdentifier":"merchant.dev.orchard.demo"}"#)
    }

    @Test("W3: no SSRF: a validation URL that is not the gateway is refused before anything is sent")
    func ssrf() async throws {
        #expect(MerchantSessionClient.isAppleGateway("apple-pay-gateway.apple.com"))
        #expect(MerchantSessionClient.isAppleGateway("cn-apple-pay-gateway-sh-pod1.apple.com"))
        #expect(MerchantSessionClient.isAppleGateway("apple-pay-gateway-nc-pod5.apple.com"))
        let transport = RecordingTransport(MerchantSessionResponse(status: 200, body: Self.session))
        let client = Self.client(transport)
        for url in [
            "https://evil.example/paymentservices/paymentSession",
            "https://apple-pay-gateway.apple.com.evil.example/paymentservices/paymentSession",
            "https://apple-pay-gateway.apple.com@evil.example/paymentservices/paymentSession",
            "https://user:pw@apple-pay-gateway.apple.com/paymentservices/paymentSession",
            "http://apple-pay-gateway.apple.com/paymentservices/paymentSession",
            "https://apple-pay-gateway.apple.com:8443/paymentservices/paymentSession",
            "https://apple-pay-gateway.apple.com/paymentservices/paymentSession?x=1",
            "https://apple-pay-gateway.apple.com/internal/admin",
            "https://xapple-pay-gateway.apple.com/paymentservices/paymentSession",
            "https://apple-pay-gateway-.apple.com/paymentservices/paymentSession",
            "https://apple-pay-gateway-x.y.apple.com/paymentservices/paymentSession",
            "https://127.0.0.1/paymentservices/paymentSession", "not a url", "",
        ] {
            await #expect(throws: MerchantKitError(.validationURLRefused, "")) {
                _ = try await client.session(validationURL: url, domain: "store.orchard.test")
            }
        }
        // A domain with a scheme or path is refused too.
        await #expect(throws: MerchantKitError(.invalidConfiguration, "")) {
            _ = try await client.session(
                validationURL: "https://apple-pay-gateway.orchard.test/paymentservices/paymentSession",
                domain: "https://store.orchard.test/")
        }
        #expect(transport.requests.isEmpty)
    }

    @Test("A gateway refusal is sessionRequestFailed with Apple's statusMessage")
    func refusal() async throws {
        let transport = RecordingTransport(
            MerchantSessionResponse(
                status: 400,
                body: Array(#"{"statusMessage":"Payment Services Exception reason=\"x\"","statusCode":"400"}"#.utf8)))
        do {
            _ = try await Self.client(transport).session(
                validationURL: "https://apple-pay-gateway.orchard.test/paymentservices/paymentSession",
                domain: "store.orchard.test")
            Issue.record("a refusal was accepted")
        } catch {
            #expect(error.code == .sessionRequestFailed)
            #expect(error.message.contains("Payment Services Exception"))
        }
    }
}
