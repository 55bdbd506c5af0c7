import DeviceProcess
import Foundation
import OrchardFixtures
import Testing

/// Replays Tests/Fixtures/fuzz-regressions/FuzzAgentMessage and the target's seeds through the browser agent's
/// reading of a frame's bodies, as the fuzz target does (the first byte picks the route).
@Suite("Browser agent message fuzz regressions")
struct AgentMessageFuzzRegressionTests {
    static let expected: [String: String] = [
        "truncated-begin": "the body is {version, page, request}",
        "begin-without-request": "the body is {version, page, request}",
        "begin-version-as-string": "the body is {version, page, request}",
        "long-contact-field": "\"\(String(repeating: "x", count: 32))\" is not a valid contact field.",
        "applicationData-not-base64": "\"applicationData\" must be a Base64-encoded string.",
        "unknown-payment-type": "\"\(String(repeating: "k", count: 32))\" is not a payment type",
        "recurring-without-billing": "Missing 'regularBilling'.",
        "deferred-bad-date": "'deferredPaymentDate' must be a date.",
        "interval-count-zero": "'recurringPaymentIntervalCount' must be a positive whole number.",
        "multitoken-empty": "'multiTokenContexts' must be a non-empty list.",
        "hello-not-an-object": "the body is a page context",
        "active-card-number-merchant": "the body is {merchantIdentifier, page}",
        "answer-sequence-as-string": "the body is an answer",
    ]

    static func refusal(_ bytes: [UInt8]) -> String? {
        let routes = BrowserAgentMessage.routes
        return BrowserAgentMessage.refusal(of: Array(bytes.dropFirst()), route: routes[Int(bytes[0]) % routes.count])
    }

    @Test(
        "F1: the browser agent's fuzz corpus: every hostile body refused with its message (an echoed value cut to 32 characters), every seed taken"
    )
    func agentMessages() throws {
        let directory = "fuzz-regressions/FuzzAgentMessage"
        let names = try FileManager.default.contentsOfDirectory(atPath: Fixtures.path(directory)).sorted()
        #expect(Set(names) == Set(Self.expected.keys))
        for name in names {
            let bytes = Array(try Fixtures.data("\(directory)/\(name)"))
            #expect(Self.refusal(bytes) == Self.expected[name], "\(name)")
        }
        // The fuzz target's seeds are good bodies of each route.
        let seeds = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../Fuzz/seeds/FuzzAgentMessage").standardizedFileURL.path
        let seedNames = try FileManager.default.contentsOfDirectory(atPath: seeds)
        #expect(seedNames.count == 7)
        for name in seedNames {
            let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: seeds + "/" + name)))
            #expect(Self.refusal(bytes) == nil, "\(name)")
        }
    }
}
