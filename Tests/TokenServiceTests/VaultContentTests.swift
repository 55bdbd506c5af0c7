import CardBasics
import Foundation
import Issuer
import NetworkTestSupport
import OrchardCrypto
import Testing
import TokenService

/// What the token service persists: DPANs in clear (it is the one place allowed to hold them), FPANs only
/// encrypted, CVVs nowhere.
@Suite("Vault contents at rest")
struct VaultContentTests {
    /// Every string and number in a JSON value; the field names go to `keys`.
    static func scalars(_ value: Any, into out: inout [String], keys: inout Set<String>) {
        if let dictionary = value as? [String: Any] {
            for (key, child) in dictionary {
                keys.insert(key)
                scalars(child, into: &out, keys: &keys)
            }
        } else if let array = value as? [Any] {
            for child in array { scalars(child, into: &out, keys: &keys) }
        } else {
            out.append("\(value)")
        }
    }

    @Test("P1: the vault holds no FPAN or CVV except encrypted")
    func noFPANOrCVVExceptEncrypted() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let watch = try h.makeDevice("watch-1", kind: "watch")
        let cards = ["4111111111111111", "5555555555554444", "4000056655665556"]
        var installed: [InstalledCard] = []
        for pan in cards {
            installed.append(try await h.provision(pan, on: phone))
            installed.append(try await h.provision(pan, on: watch))
        }
        // The step-up card, left pending (a session with card data), and a declined one.
        _ = try await h.checkCard("4000000000003220", on: phone)
        _ = try await h.checkCard("4000000000000002", on: phone)
        for card in installed.prefix(2) { _ = try await h.authorize(card, on: phone, amount: 100) }

        let snapshot = h.vault.snapshot()
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let json = try encoder.encode(snapshot)
        let text = String(decoding: json, as: UTF8.self)
        var values: [String] = []
        var keys: Set<String> = []
        Self.scalars(try JSONSerialization.jsonObject(with: json), into: &values, keys: &keys)
        // Stored response blobs (idempotency records) are JSON too: scan inside them as well.
        for record in snapshot.idempotencyRecords {
            Self.scalars(try JSONSerialization.jsonObject(with: Data(record.response)), into: &values, keys: &keys)
            let inner = String(decoding: record.response, as: UTF8.self)
            for pan in cards + ["4000000000003220", "4000000000000002"] {
                let leaked = inner.contains(pan)
                #expect(!leaked, "FPAN ending \(pan.suffix(4)) in a stored response")
            }
        }
        #expect(values.count > 100)
        let cvvs = try (cards + ["4000000000003220", "4000000000000002"]).map { try h.cvv($0) }
        for pan in cards + ["4000000000003220", "4000000000000002"] {
            let inText = text.contains(pan)
            let inValues = values.contains { $0.contains(pan) }
            #expect(!inText && !inValues, "FPAN ending \(pan.suffix(4)) in clear")
        }
        for cvv in cvvs {
            let stored = values.contains(cvv)
            #expect(!stored, "a stored value equals a CVV")
        }
        // No field is named for a card verification value (random identifiers may contain any letters).
        let namedField = keys.contains { $0.lowercased().contains("cvv") || $0.lowercased().contains("cvc") }
        #expect(!namedField && keys.contains("encryptedCard"))
        // The DPANs are there (the vault's job), and the FPANs are there encrypted: the HSM opens them.
        for card in installed {
            let present = text.contains(card.data.dpan.digits)
            #expect(present)
        }
        #expect(snapshot.cards.count == 3 && snapshot.sessions.count == 7)
        for record in snapshot.cards {
            let plain = try h.hsm.open(
                record.encryptedCard, key: h.keys.vaultKey,
                context: Array("orchard-vault/v1\u{0}card:\(record.cardID)".utf8))
            let digits = String(decoding: plain.unsafeCopyOfBytes(), as: UTF8.self)
            #expect(cards.contains { digits.contains($0) })
        }
    }
}
