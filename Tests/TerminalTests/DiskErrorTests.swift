import Foundation
import OrchardRuntime
import SQLiteCrashVFS
import Terminal
import Testing

/// The terminal's store (`terminal.sqlite`) on a failing disk (the crash VFS).
@Suite("R4: the terminal's store on a failing disk", .serialized)
struct TerminalDiskErrorTests {
    @Test("R4: a failed fsync under the terminal's store: not saved, nothing written after it; reopened, it recovers")
    func failedSync() async throws {
        let directory = try TemporaryDirectory()
        CrashVFS.install(under: directory.path)
        let path = directory.deployment.databasePath(for: .terminal)
        let store = try TerminalDatabase(path: path)
        try await store.saveTerminal(try TerminalSettings(terminalID: "T-DISK-1"))

        CrashVFS.fail(.sync, with: .io, under: directory.path)
        defer { CrashVFS.clearFault(under: directory.path) }
        await #expect(throws: TerminalError.self) {
            try await store.saveTerminal(try TerminalSettings(terminalID: "T-DISK-2"))
        }
        do {
            try await store.saveTerminal(try TerminalSettings(terminalID: "T-DISK-3"))
            Issue.record("a write was accepted after the failed fsync")
        } catch let error as TerminalError {
            #expect(error.code == .storeFailure && error.message.contains("stopped writing after a disk error"))
        }
        #expect(CrashVFS.operationsAfterFault(under: directory.path) == 0, "the terminal wrote after the failed fsync")
        await store.close()

        CrashVFS.clearFault(under: directory.path)
        CrashVFS.powerLoss(under: directory.path)
        let reopened = try TerminalDatabase(path: path)
        #expect(try await reopened.terminals().map(\.terminalID) == ["T-DISK-1"])
        try await reopened.saveTerminal(try TerminalSettings(terminalID: "T-DISK-4"))
        await reopened.close()
    }
}
