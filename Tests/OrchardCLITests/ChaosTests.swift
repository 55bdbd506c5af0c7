import CommandTestSupport
import Foundation
import OrchardCrypto
import OrchardStore
import Testing

/// `orchard chaos` as CI runs it: every party a process, one killed each cycle, the invariants across
/// the stores; and a positive control that the checks find a lost payment.
@Suite("orchard chaos", .serialized)
struct ChaosTests {
    @Test("R1: five cycles of kills end with 0 lost, 0 duplicated, 0 unreconciled; a deleted hold is found lost")
    func shortRunThenALostPayment() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("orchard-chaos-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let run = try await orchard([
            "chaos", "--data-dir", directory, "--cycles", "5", "--payments", "2", "--seed", "24",
        ])
        #expect(run.status == 0, "\(run.stderr.suffix(2000))")
        let last = run.stderr.split(separator: "\n").last.map(String.init) ?? ""
        #expect(last == "chaos: 5 cycles, 10 payments, 0 lost, 0 duplicated, 0 unreconciled (seed 24)", "\(last)")
        let summary = try run.json()
        #expect((summary["kills"] as? [String: Int])?.values.reduce(0, +) == 5)
        #expect(summary["violations"] as? [String] == [])
        let journal = try String(contentsOfFile: directory + "/chaos/journal.jsonl", encoding: .utf8)
        #expect(journal.split(separator: "\n").count >= 20)  // each operation journalled before and after

        // The positive control: the issuer loses the hold of an approved tap; the next run finds it lost.
        let terminal = try Database(
            path: directory + "/terminal.sqlite", options: StoreOptions(durability: .full), access: .readOnly)
        let approved = try #require(
            try terminal.queryFirst("SELECT stan FROM transactions WHERE state = 'approved'", []) { try $0.string(0) })
        let issuer = try Database(path: directory + "/issuer.sqlite", options: StoreOptions(durability: .full))
        let ids = try issuer.query("SELECT network_transaction_id FROM authorizations", []) { try $0.string(0) }
        // The acquirer's network transaction ID: hex of the first 16 bytes of SHA-256 of its idempotency key.
        let id =
            "orchard-acquirer:"
            + Hex.encode(SHA256.hash(Array("terminal:T0001:\(approved)".utf8)).prefix(16), lowercase: true)
        #expect(ids.contains(id))
        try issuer.execute("DELETE FROM authorizations WHERE network_transaction_id = ?", [.text(id)])
        let second = try await orchard([
            "chaos", "--data-dir", directory, "--cycles", "1", "--payments", "1", "--seed", "25",
        ])
        #expect(second.status == 1)
        let lines = second.stderr.split(separator: "\n")
        #expect(lines.last?.hasPrefix("chaos: 1 cycles, 1 payments, 1 lost") == true, "\(lines.suffix(3))")
        #expect(lines.dropLast().last?.hasPrefix("error: ") == true && second.stderr.contains("--seed 25"))
    }
}
