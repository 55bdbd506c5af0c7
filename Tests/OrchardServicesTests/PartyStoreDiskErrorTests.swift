import Foundation
import MerchantServer
import NetworkServer
import OrchardCrypto
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import OrchardStore
import PayServer
import SQLiteCrashVFS
import Testing

/// Every party's SQLite file, opened as its service opens it (its options, its migrations), on a failing disk (the
/// crash VFS): a failed fsync is not acknowledged, the store then refuses every write without touching the file,
/// the error answers 503 with `Retry-After`, and the file opens cleanly again after a restart.
@Suite("R4: each party's store on a failing disk", .serialized)
struct PartyStoreDiskErrorTests {
    enum Party: String, CaseIterable, Sendable {
        case pay, merchant, tokenVault, issuer, acquirer

        func open(_ directory: DeploymentDirectory) async throws -> Store {
            switch self {
            case .pay: try PayStore.open(in: directory)
            case .merchant: try MerchantService.openStore(in: directory)
            case .tokenVault: try SQLiteTokenVaultStore(path: directory.databasePath(for: .network)).store
            case .issuer:
                // A fixed storage key: the same one opens the file again after the simulated failure.
                try await SQLiteIssuerStore.open(
                    path: directory.databasePath(for: .issuer),
                    key: IssuerStorageKey(secret: SecureBytes([UInt8](repeating: 0x2A, count: 32)))
                ).store
            case .acquirer: try SQLiteAcquirerStore(path: directory.databasePath(for: .acquirer)).store
            }
        }
    }

    static func probe(_ store: Store, _ number: Int) async throws {
        try await store.write { database in
            try database.execute("CREATE TABLE IF NOT EXISTS r4_probe (n INTEGER PRIMARY KEY)")
            try database.execute("INSERT INTO r4_probe (n) VALUES (?)", [.int(number)])
        }
    }

    static func probes(_ store: Store) async throws -> [Int] {
        try await store.read { database in
            #expect(try database.integrityCheck() == [])
            return try database.query("SELECT n FROM r4_probe ORDER BY n") { try $0.int(0) }
        }
    }

    @Test(
        "R4: a failed fsync under each party's store: no ack, writes refused with 503, restart recovers",
        arguments: Party.allCases)
    func failedSync(party: Party) async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("orchard-r4-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = DeploymentDirectory(path: path)
        CrashVFS.install(under: path)
        let store = try await party.open(directory)
        try await Self.probe(store, 1)

        CrashVFS.fail(.sync, with: .io, under: path)
        defer { CrashVFS.clearFault(under: path) }
        var failure: (any Error)?
        do { try await Self.probe(store, 2) } catch { failure = error }
        #expect((failure as? StoreError)?.code == .io, "\(party): \(String(describing: failure))")
        do {
            try await Self.probe(store, 3)
            Issue.record("\(party): a write was accepted after the failed fsync")
        } catch let error as StoreError {
            #expect(error.code == .unavailable)
            #expect(error.retryAfterSeconds == StoreError.retryAfterDiskFailure)
        }
        #expect(CrashVFS.operationsAfterFault(under: path) == 0, "\(party) went on writing after the failed fsync")
        await store.close()

        CrashVFS.clearFault(under: path)
        CrashVFS.powerLoss(under: path)
        let reopened = try await party.open(directory)
        #expect(try await Self.probes(reopened) == [1], "\(party)")
        try await Self.probe(reopened, 4)
        await reopened.close()
    }
}
