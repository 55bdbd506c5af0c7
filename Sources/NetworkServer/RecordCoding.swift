import Foundation
import OrchardStore

/// Records are kept as JSON in a `record` column, with the columns the queries need beside it (identifiers,
/// unique lookup keys). The JSON is the domain type's own `Codable` form, so what lands on disk is exactly
/// what the domain library chose to persist: for the vault, a DPAN and an encrypted FPAN, never a CVV.
enum RecordCoding {
    static func encode(_ value: some Encodable) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return Array(try encoder.encode(value))
    }

    static func decode<T: Decodable>(_ type: T.Type, _ bytes: [UInt8]) throws -> T {
        try JSONDecoder().decode(type, from: Data(bytes))
    }

    /// The options every party's file uses (docs/deployment.md: money and card data are `.full` with
    /// `secureDelete`).
    static let options = StoreOptions(durability: .full, secureDelete: true)
}

extension Store {
    /// The decoded records of `sql`'s first column.
    func records<T: Decodable & Sendable>(
        _ type: T.Type, _ sql: String, _ arguments: [SQLiteValue]
    ) async throws
        -> [T]
    {
        try await read { database in
            try database.query(sql, arguments) { row in try RecordCoding.decode(type, try row.blob(0)) }
        }
    }

    /// The decoded record of `sql`'s first row, if any.
    func record<T: Decodable & Sendable>(
        _ type: T.Type, _ sql: String, _ arguments: [SQLiteValue]
    ) async throws
        -> T?
    {
        try await records(type, sql, arguments).first
    }
}
