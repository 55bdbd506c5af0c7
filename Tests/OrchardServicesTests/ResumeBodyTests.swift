import Foundation
import OrchardHTTP
import OrchardStore
import PayAPI
import Testing

/// Leaving lost mode reads its attestation through the one strict decoder: a body that gives a key twice is
/// refused as every body is, before the device's outstanding challenge is spent.
@Suite("Pay server: the resume body", .serialized)
struct ResumeBodyTests {
    /// How many resume challenges the Pay server holds.
    static func outstandingChallenges(_ f: InAppFixture) async throws -> Int {
        let store = try f.payStore()
        let count = try await store.read { db in
            try db.queryFirst("SELECT count(*) FROM resume_challenges", []) { try $0.int(0) }
        }
        await store.close()
        return count ?? 0
    }

    @Test("A resume body giving a key twice is 400 duplicate_key, whatever the order, and leaves the challenge unspent")
    func resumeBodyWithAKeyTwice() async throws {
        let f = try await InAppFixture()
        let phone = try await f.device("phone-a")
        let challenge = try await phone.client.send(
            HTTPClientRequest(
                method: .post, url: f.base + PayAPI.Route.resumeChallenge(device: "phone-a"),
                headers: ["Content-Type": "application/json"], body: Data("{}".utf8)))
        try #require(challenge.status == .ok, "\(String(decoding: challenge.body, as: UTF8.self))")
        #expect(try await Self.outstandingChallenges(f) == 1)
        func resume(_ body: String) async throws -> HTTPResponse {
            try await phone.client.send(
                HTTPClientRequest(
                    method: .post, url: f.base + PayAPI.Route.lifecycle(device: "phone-a", action: .resume),
                    headers: ["Content-Type": "application/json"], body: Data(body.utf8)))
        }
        for body in [
            #"{"challenge":"AAE=","attestation":"MEQ=","challenge":"AAI="}"#,
            #"{"attestation":"MEQ=","challenge":"AAI=","attestation":"MEU="}"#,
        ] {
            let answer = try await resume(body)
            #expect(
                answer.status == .badRequest && InAppFixture.errorCode(answer) == "duplicate_key",
                "\(String(decoding: answer.body, as: UTF8.self))")
            #expect(try await Self.outstandingChallenges(f) == 1, "the challenge is still outstanding")
        }
        // Control: a well-formed body with a wrong attestation is refused and spends the challenge.
        let wrong = try await resume(#"{"attestation":"MEQ=","challenge":"AAE="}"#)
        #expect(wrong.status.code == 403, "\(String(decoding: wrong.body, as: UTF8.self))")
        #expect(try await Self.outstandingChallenges(f) == 0)
        await f.close()
    }
}
