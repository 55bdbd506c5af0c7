import Foundation
public import OrchardLogging
public import OrchardRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// The terminal's log, `DIR/logs/terminal.log`: JSON lines appended with `O_APPEND`, each in one
/// `write(2)`, so lines of several terminal processes never interleave. Card numbers reach it only masked
/// (``PrimaryAccountNumber``) and every line passes `OrchardLogging`'s scrubber.
public final class TerminalLogFile: LogSink, @unchecked Sendable {
    // @unchecked: the descriptor is written only under `lock` and closed in deinit.
    public let path: String
    private let descriptor: Int32
    private let lock = NSLock()

    public init(path: String) throws(TerminalError) {
        let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            throw TerminalError(.storeFailure, "cannot open the log \(path): \(String(cString: strerror(errno)))")
        }
        self.path = path
        descriptor = fd
    }

    deinit { close(descriptor) }

    /// A logger writing to `DIR/logs/terminal.log` (the directory is made 0700 if missing), at `level`, or else
    /// at the level `ORCHARD_TERMINAL_LOG_LEVEL` names, or else at info.
    public static func logger(
        for deployment: DeploymentDirectory, level: LogLevel? = nil
    ) throws(TerminalError)
        -> Logger
    {
        let level =
            level ?? ProcessInfo.processInfo.environment["ORCHARD_TERMINAL_LOG_LEVEL"].flatMap {
                try? LogLevel(parsing: $0)
            } ?? .info
        do {
            try SecureFile.createDirectory(deployment.logsPath, mode: 0o700)
        } catch {
            throw TerminalError(.storeFailure, "cannot create \(deployment.logsPath): \(error.message)")
        }
        let sink = try TerminalLogFile(path: deployment.logPath(for: .terminal))
        return Logger(label: "terminal", level: level, sink: sink)
    }

    public func emit(_ record: LogRecord) {
        let bytes = Array((record.jsonLine + "\n").utf8)
        lock.withLock {
            var offset = 0
            while offset < bytes.count {
                let written = bytes[offset...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
                if written > 0 {
                    offset += written
                } else if written < 0 && errno == EINTR {
                    continue
                } else {
                    return  // a full disk must not stop a payment; the line is dropped
                }
            }
        }
    }
}
