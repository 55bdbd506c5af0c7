internal import CSQLiteCrashVFS
import Foundation

/// Test support, not shipped: simulated power loss and disk errors under SQLite (the C of `CSQLiteCrashVFS`).
///
/// ``install(under:)`` makes the "orchard-crash" VFS the process's default and simulates the SQLite files under a
/// directory: those keep their unsynced writes in memory, as the page cache does, and only what was synced is in
/// the real file, so a SIGKILL of the process is a power loss. Files elsewhere pass straight through, and every
/// effect is scoped to a path prefix (a test's own directory), so suites running in parallel in the same test
/// process are not disturbed (each test injects its faults under its own directory).
public enum CrashVFS {
    /// The operation a fault or a crash is attached to.
    public enum Operation: Sendable {
        case write
        case sync

        var code: Int32 {
            switch self {
            case .write: Int32(ORCHARD_CRASHVFS_WRITE)
            case .sync: Int32(ORCHARD_CRASHVFS_SYNC)
            }
        }
    }

    /// The error a fault gives.
    public enum DiskError: Sendable {
        /// `EIO`: SQLite sees `SQLITE_IOERR_WRITE` or `SQLITE_IOERR_FSYNC`.
        case io
        /// `ENOSPC`: a write fails with `SQLITE_FULL`, a sync with `SQLITE_IOERR_FSYNC`.
        case noSpace

        var errno: Int32 {
            switch self {
            case .io: EIO
            case .noSpace: ENOSPC
            }
        }
    }

    /// The environment variable a child process reads in ``installFromEnvironment()``: `1` installs the VFS for
    /// every file,
    /// `crash:sync:N:SEED` or `crash:write:N:SEED` also crashes the process (a torn power loss, exit status 137)
    /// at the start of its N+1-th sync or write.
    public static let environmentKey = "ORCHARD_CRASH_VFS"

    /// Installs the VFS as the default and simulates every SQLite file opened from now on under `prefix` (a
    /// directory, symbolic links resolved; "" for every file). Idempotent.
    public static func install(under prefix: String) {
        let rc = orchard_crashvfs_register()
        precondition(rc == 0, "the crash VFS could not be registered (SQLite \(rc))")
        let enrolled = orchard_crashvfs_enroll(resolved(prefix))
        precondition(enrolled == 0, "the crash VFS could not simulate \(prefix) (SQLite \(enrolled))")
    }

    /// `path` with symbolic links resolved, as SQLite names its files.
    public static func resolved(_ path: String) -> String {
        guard !path.isEmpty, let real = realpath(path, nil) else { return path }
        defer { free(real) }
        return String(cString: real)
    }

    /// Installs the VFS when ``environmentKey`` asks for it, and schedules the crash it names; returns whether
    /// it was installed.
    @discardableResult
    public static func installFromEnvironment() -> Bool {
        guard let value = ProcessInfo.processInfo.environment[environmentKey], !value.isEmpty, value != "0" else {
            return false
        }
        install(under: "")
        let parts = value.split(separator: ":")
        if parts.count == 4, parts[0] == "crash", let after = Int(parts[2]), let seed = UInt32(parts[3]) {
            crash(at: parts[1] == "write" ? .write : .sync, after: after, seed: seed)
        }
        return true
    }

    /// The environment value that makes a child crash at the start of its `after`+1-th `operation`.
    public static func crashEnvironment(at operation: Operation, after: Int, seed: UInt32) -> String {
        "crash:\(operation == .write ? "write" : "sync"):\(after):\(seed)"
    }

    /// Loses power for every file under `prefix`: unsynced writes are discarded (`tear` false) or torn sector by
    /// sector (kept, dropped or garbage, chosen by `seed`). Handles open on those files fail from now on: close
    /// every store on them before opening the files again. Returns how many files were affected.
    @discardableResult
    public static func powerLoss(under prefix: String, tear: Bool = false, seed: UInt32 = 1) -> Int {
        Int(orchard_crashvfs_power_loss(resolved(prefix), tear ? 1 : 0, seed))
    }

    /// Makes the `after`+1-th `operation` on a file under `prefix` fail with `error` (and, when `persistent`,
    /// every later one). A failed sync leaves its data readable but never written, as Linux does. Replaces the
    /// fault of the same prefix; faults under other prefixes (other tests) stay.
    public static func fail(
        _ operation: Operation, with error: DiskError, under prefix: String, after: Int = 0, persistent: Bool = false
    ) {
        orchard_crashvfs_fail(resolved(prefix), operation.code, error.errno, Int32(after), persistent ? 1 : 0)
    }

    /// Disarms the fault under `prefix`; its counters stay readable.
    public static func clearFault(under prefix: String) { orchard_crashvfs_clear_fault(resolved(prefix)) }

    /// How many times the fault under `prefix` fired.
    public static func faultHits(under prefix: String) -> Int { Int(orchard_crashvfs_fault_hits(resolved(prefix))) }

    /// How many writes and syncs were attempted on the files of the fault under `prefix` after it first fired.
    public static func operationsAfterFault(under prefix: String) -> Int {
        Int(orchard_crashvfs_operations_after_fault(resolved(prefix)))
    }

    /// Bytes written but not yet synced under `prefix`.
    public static func unsyncedBytes(under prefix: String) -> Int {
        Int(orchard_crashvfs_unsynced_bytes(resolved(prefix)))
    }

    /// Crashes this process (torn power loss, `_exit(137)`) at the start of its `after`+1-th `operation`.
    public static func crash(at operation: Operation, after: Int, seed: UInt32) {
        orchard_crashvfs_crash_at(operation.code, after, seed)
    }
}
