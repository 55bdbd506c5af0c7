import CardBasics
import Foundation
import OrchardStore
package import TokenService

extension SQLiteTokenVaultStore {
    /// Inserts one token per `(reference, dpan)` pair, each `template` with those two fields replaced, and
    /// `records`, all in one transaction, through the vault's own upserts: how `orchard bench scale` fills the
    /// vault without provisioning a million cards. The template's own reference and DPAN must not occur
    /// elsewhere in its JSON.
    package func insertForBenchmark(
        tokens pairs: [(reference: String, dpan: String)], like template: TokenRecord, records: [IdempotencyRecord]
    ) async throws {
        let json = String(decoding: try RecordCoding.encode(template), as: UTF8.self)
        let tokens: [(TokenRecord, [UInt8])] = try pairs.map { pair in
            let text = json.replacingOccurrences(of: "\"\(template.tokenReference)\"", with: "\"\(pair.reference)\"")
                .replacingOccurrences(of: "\"\(template.dpan.digits)\"", with: "\"\(pair.dpan)\"")
            let bytes = Array(text.utf8)
            return (try RecordCoding.decode(TokenRecord.self, bytes), bytes)
        }
        let encoded = try records.map { ($0, try RecordCoding.encode($0)) }
        try await store.write { database in
            for (token, bytes) in tokens { try Self.upsert(token, bytes, in: database) }
            for (record, bytes) in encoded { try Self.upsert(record, bytes, in: database) }
        }
    }
}
