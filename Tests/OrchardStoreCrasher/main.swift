// Test support for OrchardStoreTests, not shipped: a process that writes money movements to a store and is
// killed with SIGKILL by the test at an awkward moment.
//
//   orchard-store-crasher DB hold   commits 10 transfers, prints "COMMITTED 10", then opens a transaction,
//                                   writes 200 more transfers (spilled to the WAL), prints "READY" and waits
//                                   to be killed without committing.
//   orchard-store-crasher DB loop   commits one transfer per transaction forever, printing "COMMITTED n"
//                                   after each commit returned.
//   orchard-store-crasher DB loop off   the same with `PRAGMA synchronous = OFF` (no sync ever): the store a
//                                   power-loss test must catch losing acknowledged transfers.
//
// With ORCHARD_CRASH_VFS set (SQLiteCrashVFS), SQLite runs over the crash VFS: a SIGKILL is then a power loss
// (every write not yet synced is lost), and `crash:sync:N:SEED` tears the unsynced writes at the N+1-th sync.
//
// A transfer is two ledger rows, -amount and +amount, so every committed state sums to zero with an even
// row count. The schema must match `CrashTests.migrations`.
import Foundation
import OrchardStore
import SQLiteCrashVFS

let migrations = [
    Migration(
        version: 1, name: "ledger",
        sql: """
            CREATE TABLE ledger (
                id INTEGER PRIMARY KEY,
                transfer INTEGER NOT NULL,
                account TEXT NOT NULL,
                amount INTEGER NOT NULL,
                memo BLOB NOT NULL
            );
            """
    )
]

func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

func transfer(_ database: Database, _ number: Int) throws {
    let amount = Int64(number % 997 + 1)
    let memo = SQLiteValue.blob([UInt8](repeating: UInt8(truncatingIfNeeded: number), count: 512))
    try database.execute(
        "INSERT INTO ledger (transfer, account, amount, memo) VALUES (?, 'A', ?, ?)",
        [.int(number), .integer(-amount), memo]
    )
    try database.execute(
        "INSERT INTO ledger (transfer, account, amount, memo) VALUES (?, 'B', ?, ?)",
        [.int(number), .integer(amount), memo]
    )
}

let arguments = CommandLine.arguments
guard arguments.count == 3 || (arguments.count == 4 && arguments[2] == "loop" && arguments[3] == "off"),
    ["hold", "loop"].contains(arguments[2])
else {
    FileHandle.standardError.write(Data("usage: orchard-store-crasher DB hold|loop [off]\n".utf8))
    exit(2)
}
CrashVFS.installFromEnvironment()

do {
    let store = try Store(path: arguments[1], options: StoreOptions(durability: .full), migrations: migrations)
    // A tiny page cache makes SQLite spill uncommitted pages into the WAL before the commit, so the kill
    // leaves uncommitted frames on disk that recovery must ignore.
    try await store.onWriter { database in try database.executeScript("PRAGMA cache_size = 8") }
    if arguments.count == 4 {
        try await store.onWriter { database in try database.executeScript("PRAGMA synchronous = OFF") }
    }
    let first =
        try await store.read { database in
            try database.queryFirst("SELECT coalesce(max(transfer), 0) FROM ledger") { try $0.int(0) }
        } ?? 0
    if arguments[2] == "hold" {
        try await store.write { database in
            for number in first + 1...first + 10 { try transfer(database, number) }
        }
        say("COMMITTED \(first + 10)")
        try await store.write { database in
            for number in first + 11...first + 210 { try transfer(database, number) }
            say("READY")
            while true { sleep(60) }
        }
    } else {
        var number = first
        while true {
            number += 1
            let next = number
            try await store.write { database in try transfer(database, next) }
            say("COMMITTED \(next)")
        }
    }
} catch {
    FileHandle.standardError.write(Data("orchard-store-crasher: \(error)\n".utf8))
    exit(1)
}
