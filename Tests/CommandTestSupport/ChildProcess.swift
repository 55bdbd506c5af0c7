import Foundation
import OrchardRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// A child process for tests: started with `posix_spawn`, its output read by plain blocking reads and its exit
/// reaped by `waitpid`, each on a thread of its own.
///
/// Why not Foundation's `Process`: on Linux it watches children and pipes with dispatch sources, and with many
/// children starting and ending at once in one test process libdispatch's event loop crashed (signal 11 in
/// `_dispatch_event_loop_drain`, twice in fresh-clone CI runs). Nothing here registers a dispatch source.
public final class ChildProcess: @unchecked Sendable {
    // @unchecked: the mutable state (`termination`, `waiters`, the captured bytes) is guarded by `lock`.

    /// Where a child's stdout or stderr goes (stdin is `/dev/null` unless a file is named, so a child never waits
    /// for input).
    public enum Output: Sendable {
        case discard
        /// Kept in memory: ``stdout`` / ``stderr`` return what arrived so far.
        case capture
        /// Appended to the file at this path (created 0600 if missing).
        case file(String)
    }

    /// How a child ended.
    public enum Termination: Sendable, Hashable, CustomStringConvertible {
        case exited(Int32)
        case signalled(Int32)

        /// The exit status, or nil when a signal ended it.
        public var status: Int32? {
            if case .exited(let status) = self { return status }
            return nil
        }

        public var description: String {
            switch self {
            case .exited(let status): "exited \(status)"
            case .signalled(let signal): "signal \(signal)"
            }
        }
    }

    public let pid: Int32
    /// Held from a start's first pipe to its spawn: another start's child cannot inherit a pipe before it is
    /// marked close-on-exec.
    private static let spawning = NSLock()
    private let lock = NSCondition()
    private var termination: Termination?
    private var waiters: [CheckedContinuation<Termination, Never>] = []
    private var captured: [[UInt8]] = [[], []]
    private var reading = [false, false]
    private var linesRead = 0
    private var open: Int { reading.filter { $0 }.count }

    /// Starts `executable` with `arguments`; `environment` is added to this process's (nil values remove). Its
    /// standard input is `stdin` (then closed; at most 64 KiB), or empty.
    public init(
        _ executable: String, _ arguments: [String], environment: [String: String?] = [:],
        stdin: [UInt8]? = nil, stdout: Output = .discard, stderr: Output = .discard
    ) throws {
        Self.spawning.lock()
        defer { Self.spawning.unlock() }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // The read end of the stdin pipe, which the parent closes once the child has its copy.
        var inputReadEnd: Int32?
        if let stdin {
            guard stdin.count <= 65_536 else { throw CommandTestFailure("stdin is at most 64 KiB") }
            var fds: [Int32] = [0, 0]
            guard pipe(&fds) == 0 else { throw CommandTestFailure("pipe failed: errno \(errno)") }
            _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
            _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
            posix_spawn_file_actions_adddup2(&actions, fds[0], 0)
            // The pipe holds 64 KiB: written whole before the child starts, then closed (end of input).
            _ = stdin.withUnsafeBytes { write(fds[1], $0.baseAddress, $0.count) }
            close(fds[1])
            inputReadEnd = fds[0]
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        defer { if let inputReadEnd { close(inputReadEnd) } }

        var readEnds: [(index: Int, fd: Int32)] = []
        var parentCloses: [Int32] = []
        defer { for fd in parentCloses { close(fd) } }
        for (index, output) in [stdout, stderr].enumerated() {
            let target = Int32(index + 1)
            switch output {
            case .discard:
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", O_WRONLY, 0)
            case .file(let path):
                posix_spawn_file_actions_addopen(&actions, target, path, O_WRONLY | O_CREAT | O_APPEND, 0o600)
            case .capture:
                var fds: [Int32] = [0, 0]
                // Close-on-exec (set under `spawning`, which every start holds), so no other child inherits this
                // pipe and holds it open past our child's exit.
                guard pipe(&fds) == 0 else {
                    for end in readEnds { close(end.fd) }
                    throw CommandTestFailure("pipe failed: errno \(errno)")
                }
                _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
                _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
                posix_spawn_file_actions_adddup2(&actions, fds[1], target)
                readEnds.append((index, fds[0]))
                parentCloses.append(fds[1])
            }
        }

        var variables = ProcessInfo.processInfo.environment
        // Every service a test starts logs at debug level, so the log scans (LogScan, V2) see everything.
        for (key, value) in LogScan.debugLogEnvironment where variables[key] == nil { variables[key] = value }
        for (key, value) in environment { variables[key] = value }
        let (child, result) = Subprocess.spawn(
            executable, arguments, environment: variables.compactMapValues { $0 }, actions: &actions)
        guard result == 0 else {
            for end in readEnds { close(end.fd) }
            throw CommandTestFailure("cannot start \(executable): errno \(result)")
        }
        pid = child
        for end in readEnds { reading[end.index] = true }
        for end in readEnds {
            let thread = Thread { [self] in drain(end.fd, into: end.index) }
            thread.name = "child-\(child)-\(end.index == 0 ? "stdout" : "stderr")"
            thread.start()
        }
        let reaper = Thread { [self] in reap() }
        reaper.name = "child-\(child)-reaper"
        reaper.start()
    }

    /// What the child wrote to stdout so far (``Output/capture`` only).
    public var stdout: String { lock.withLock { String(decoding: captured[0], as: UTF8.self) } }
    /// What the child wrote to stderr so far (``Output/capture`` only).
    public var stderr: String { lock.withLock { String(decoding: captured[1], as: UTF8.self) } }

    /// The next line of the captured stdout, waiting for it on the calling thread; nil once stdout ended without
    /// another complete line.
    public func nextLine() -> String? {
        lock.lock()
        defer { lock.unlock() }
        while true {
            let rest = captured[0][linesRead...]
            if let newline = rest.firstIndex(of: 0x0A) {
                linesRead = newline + 1
                return String(decoding: rest[..<newline], as: UTF8.self)
            }
            if !reading[0] { return nil }
            lock.wait()
        }
    }

    /// Whether the child has not ended yet, or its captured output has not reached its end.
    public var isRunning: Bool { lock.withLock { termination == nil || open > 0 } }

    /// How it ended, once it has and its captured output reached its end.
    public var ended: Termination? { lock.withLock { open == 0 ? termination : nil } }

    /// Sends `signal` unless the child was already reaped (its pid may belong to another process by then).
    public func send(_ signal: Int32) {
        lock.withLock { if termination == nil { _ = Glibc.kill(pid, signal) } }
    }

    /// SIGTERM.
    public func terminate() { send(SIGTERM) }

    /// SIGKILL, then waits for it to be reaped.
    public func kill() {
        send(SIGKILL)
        waitUntilExit()
    }

    /// Blocks the calling thread until the child ended and its captured output reached its end.
    @discardableResult
    public func waitUntilExit() -> Termination {
        lock.lock()
        defer { lock.unlock() }
        while termination == nil || open > 0 { lock.wait() }
        return termination!
    }

    /// Suspends until the child ended and its captured output reached its end, without blocking a thread of the
    /// concurrency pool.
    public func exit() async -> Termination {
        await withCheckedContinuation { continuation in
            lock.lock()
            if let termination, open == 0 {
                lock.unlock()
                continuation.resume(returning: termination)
            } else {
                waiters.append(continuation)
                lock.unlock()
            }
        }
    }

    private func drain(_ fd: Int32, into index: Int) {
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count > 0 {
                lock.withLock {
                    captured[index] += buffer[0..<count]
                    lock.broadcast()
                }
            } else if count < 0 && errno == EINTR {
                continue
            } else {
                break
            }
        }
        close(fd)
        finish { reading[index] = false }
    }

    private func reap() {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else {
                finish { termination = .exited(-1) }
                return
            }
        }
        // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift cannot import as macros.
        let ended: Termination = status & 0x7F == 0 ? .exited((status >> 8) & 0xFF) : .signalled(status & 0x7F)
        finish { termination = ended }
    }

    /// Applies `change`, then wakes whoever waits if the child is now fully done.
    private func finish(_ change: () -> Void) {
        lock.lock()
        change()
        var ready: [CheckedContinuation<Termination, Never>] = []
        var result: Termination?
        if let termination, open == 0 {
            ready = waiters
            waiters = []
            result = termination
        }
        lock.broadcast()
        lock.unlock()
        if let result { for waiter in ready { waiter.resume(returning: result) } }
    }
}
