import Foundation
import OrchardRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// A real PostgreSQL server from Debian's packages, started once per test run for every suite that needs one:
/// `initdb` and `pg_ctl -w start` from `pg_config --bindir`, on a temporary data directory owned by `postgres`
/// (through `runuser -u postgres` when the tests run as root, as PostgreSQL refuses root), listening only on a
/// Unix socket in that directory, on a free port number. Stopped (immediate shutdown) when the test process exits.
///
/// Suites that use it are `.serialized` and give every test a schema of its own (``freshSchema(_:)``).
public final class TestPostgreSQL: Sendable {
    /// What tells the developer how to get PostgreSQL, in skip messages and CI failures.
    public static let installHint =
        "PostgreSQL is not installed: run scripts/bootstrap (apt-get install postgresql libpq-dev) to run the "
        + "tests on PostgreSQL"

    /// The temporary directory: `data/` (the cluster), the socket, `server.log`.
    public let directory: String
    public let port: Int
    private let bin: String

    /// The `postgresql://` URL of database `postgres` as user `postgres`, over the Unix socket.
    public var url: String { "postgresql://postgres@/postgres?host=\(directory)&port=\(port)" }

    /// Whether the tests must run on PostgreSQL: always with `CI=true`, else when it is installed.
    public static var enabled: Bool { isCI || binDirectory() != nil }

    static var isCI: Bool { ProcessInfo.processInfo.environment["CI"] == "true" }

    private static let starter = Starter()

    /// The server of this test run, started on first use. Throws when PostgreSQL is missing (the CI must fail
    /// then) or does not start. Callers that come while it starts wait for the same start, suspended: `initdb`
    /// takes seconds, and a test that blocked a thread of the concurrency pool for them (two such tests on two
    /// cores) would stall every other test of the run.
    public static func shared() async throws -> TestPostgreSQL {
        try await starter.server()
    }

    /// Starts the server once; every caller awaits that one start.
    private actor Starter {
        private var start: Task<TestPostgreSQL, any Error>?

        func server() async throws -> TestPostgreSQL {
            if let start { return try await start.value }
            let start = Task { () async throws -> TestPostgreSQL in
                guard let bin = binDirectory() else { throw CommandTestFailure(installHint) }
                let server = try await TestPostgreSQL(bin: bin)
                runningPostmaster = server.directory
                atexit { TestPostgreSQL.stopAtExit() }
                return server
            }
            self.start = start
            return try await start.value
        }
    }

    /// A schema name no other test uses.
    public static func freshSchema(_ prefix: String = "t") -> String {
        "\(prefix)_\(UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: ""))"
    }

    private init(bin: String) async throws {
        self.bin = bin
        let base = FileManager.default.temporaryDirectory.path
        directory = "\(base)/orchard-pg-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        port = try Self.freePort()
        let asRoot = getuid() == 0
        if asRoot {
            guard let account = getpwnam("postgres") else {
                throw CommandTestFailure("the tests run as root and there is no postgres user to run PostgreSQL")
            }
            guard chown(directory, account.pointee.pw_uid, account.pointee.pw_gid) == 0 else {
                throw CommandTestFailure("cannot give \(directory) to postgres: errno \(errno)")
            }
        }
        try await run(
            asRoot, "\(bin)/initdb",
            ["-D", "\(directory)/data", "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"])
        // Trust on the private socket, except for the role that proves passwords come from a passfile.
        try "local all \(Self.passwordRole) scram-sha-256\nlocal all all trust\n".write(
            toFile: "\(directory)/data/pg_hba.conf", atomically: false, encoding: .utf8)
        // The server outlives pg_ctl and runs as long as the tests: it must hold none of their descriptors (a socket
        // a test waits to see closed), so every descriptor above stderr is closed before pg_ctl runs.
        try await run(
            asRoot, "/bin/bash",
            [
                "-c",
                "for fd in /proc/$$/fd/*; do n=${fd##*/}; if [ \"$n\" -gt 2 ]; then eval \"exec $n>&-\"; fi; done "
                    + "2>/dev/null; exec \"$@\"",
                "orchard-test-postgresql", "\(bin)/pg_ctl",
                "-w", "-D", "\(directory)/data", "-l", "\(directory)/server.log", "-o",
                "-k \(directory) -p \(port) -c listen_addresses= -c fsync=off -c max_connections=200", "start",
            ])
    }

    /// A role that logs in only with its password (``password``), for the passfile tests.
    public static let passwordRole = "orchard_pw"
    /// Its password (a test value).
    public static let password = "pw-9d2f-not-a-secret"

    /// A new empty database and its URL (as `postgres`, or as ``passwordRole`` when `role` is set, which owns it).
    public func freshDatabase(role: String? = nil) async throws -> String {
        let name = TestPostgreSQL.freshSchema("d")
        let asRoot = getuid() == 0
        if let role {
            try await run(
                asRoot, "\(bin)/psql",
                [
                    "-h", directory, "-p", "\(port)", "-U", "postgres", "-d", "postgres", "-v", "ON_ERROR_STOP=1",
                    "-c",
                    "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '\(role)') THEN "
                        + "CREATE ROLE \(role) LOGIN PASSWORD '\(Self.password)'; END IF; END $$",
                ])
        }
        try await run(
            asRoot, "\(bin)/createdb",
            ["-h", directory, "-p", "\(port)", "-U", "postgres"] + (role.map { ["-O", $0] } ?? []) + [name])
        return "postgresql://\(role ?? "postgres")@/\(name)?host=\(directory)&port=\(port)"
    }

    private func run(_ asRoot: Bool, _ executable: String, _ arguments: [String]) async throws {
        let child =
            asRoot
            ? try ChildProcess(
                "/usr/sbin/runuser", ["-u", "postgres", "--", executable] + arguments, stdout: .capture,
                stderr: .capture)
            : try ChildProcess(executable, arguments, stdout: .capture, stderr: .capture)
        let ended = await child.exit()
        guard ended == .exited(0) else {
            throw CommandTestFailure("\(executable) \(ended): \(child.stderr) \(child.stdout)")
        }
    }

    /// `pg_config --bindir`, when PostgreSQL's server programs are there.
    static func binDirectory() -> String? {
        guard let child = try? ChildProcess("/usr/bin/env", ["pg_config", "--bindir"], stdout: .capture),
            child.waitUntilExit() == .exited(0)
        else { return nil }
        let bin = child.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        return FileManager.default.isExecutableFile(atPath: "\(bin)/initdb")
            && FileManager.default.isExecutableFile(atPath: "\(bin)/pg_ctl") ? bin : nil
    }

    private static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw CommandTestFailure("socket failed: errno \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else { throw CommandTestFailure("bind failed: errno \(errno)") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { throw CommandTestFailure("getsockname failed: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// The data directory of the server to stop at exit.
    private nonisolated(unsafe) static var runningPostmaster: String?

    /// Immediate shutdown (SIGQUIT to the postmaster, whose pid heads `postmaster.pid`), then the directory goes.
    private static func stopAtExit() {
        guard let directory = runningPostmaster,
            let text = try? String(contentsOfFile: "\(directory)/data/postmaster.pid", encoding: .utf8),
            let line = text.split(separator: "\n").first, let pid = Int32(line)
        else { return }
        kill(pid, SIGQUIT)
        // The server removes its files as it stops; what it still holds open goes with the directory.
        for _ in 0..<100 where kill(pid, 0) == 0 { usleep(20_000) }
        try? FileManager.default.removeItem(atPath: directory)
    }
}
