import CommandTestSupport
import Foundation
import OrchardHTTP
import OrchardServices
import OrchardStore
import Testing

/// Two Pay server instances exchanging credentials at once on one PostgreSQL database: every
/// exchange counts an anonymous tally, which was one row per (channel, currency, band, day) updated by every
/// exchange; two instances' SERIALIZABLE transactions on it failed each other until `orchard bench inapp --instances
/// 2` got errors. The tallies are now split over shards, and a write that still kept conflicting answers 503 with
/// Retry-After, rolled back whole (the nonce not spent), so the client's retry gets its token.
@Suite(
    "Two Pay server instances exchange credentials at once", .serialized,
    .enabled(if: TestPostgreSQL.enabled, Comment(rawValue: TestPostgreSQL.installHint)))
struct SharedTallyTests {
    @Test("48 credentials at once over two instances: 48 tokens (a conflict: 503, retried), tallies summing to 48")
    func concurrentExchangesAllSucceed() async throws {
        let (f, second, base2) = try await MultiInstanceTests.twoInstances()
        let phone = try await f.device("phone-a")
        var sealed: [[UInt8]] = []
        for _ in 0..<48 { sealed.append(try f.credential(try await f.nonce(for: phone), signer: phone)) }
        // As a client does: a 503 (a write that kept conflicting, rolled back whole) is sent again after its
        // Retry-After, to the other instance; every other answer is final.
        let answers = try await withThrowingTaskGroup(of: [Int].self) { group in
            for (index, credential) in sealed.enumerated() {
                group.addTask {
                    var statuses: [Int] = []
                    for attempt in 0..<10 {
                        let base = (index + attempt) % 2 == 0 ? f.base : base2
                        let response = try await MultiInstanceTests.post(phone.client, base, credential)
                        statuses.append(response.status.code)
                        guard response.status.code == 503 else { break }
                        #expect(response.headers["Retry-After"] == "1")
                        try await Task.sleep(for: .seconds(1))
                    }
                    return statuses
                }
            }
            var all: [[Int]] = []
            for try await statuses in group { all.append(statuses) }
            return all
        }
        #expect(answers.allSatisfy { $0.last == 200 }, "\(answers.filter { $0.last != 200 })")
        #expect(answers.allSatisfy { $0.dropLast().allSatisfy { $0 == 503 } })
        let store = try f.payStore()
        let (total, shards) = try await store.read { db in
            (
                try db.queryFirst(
                    "SELECT CAST(SUM(purchases) AS BIGINT) FROM in_app_purchase_tallies", [], { try $0.int(0) }),
                try db.queryFirst(
                    "SELECT COUNT(DISTINCT tally_shard) FROM in_app_purchase_tallies", [], { try $0.int(0) })
            )
        }
        #expect(total == 48)
        #expect((shards ?? 0) > 1)  // 48 exchanges over 16 shards: more than one used
        await store.close()
        await second.stop()
        await f.close()
    }

    @Test("A write rolled back by serialization failures is a 503 with Retry-After 1; other store errors are not")
    func serializationFailureIsUnavailable() {
        #expect(StoreError(.serializationFailure, "conflict").retryAfterSeconds == 1)
        #expect(StoreError(.constraint, "duplicate").retryAfterSeconds == nil)
        #expect(StoreError(.unavailable, "stopped").retryAfterSeconds == StoreError.retryAfterDiskFailure)
    }
}
