import Foundation

#if canImport(Glibc)
    // `package`: ``Subprocess/spawn(_:_:environment:actions:)`` takes Glibc's file actions.
    package import Glibc
#endif

/// A child process started with `posix_spawn`: its standard output and error appended to files (or discarded),
/// its standard input a given byte string (or empty). Reaped by a thread of its own, so waiting never blocks the
/// concurrency pool. Foundation's `Process` is not used: with many children its dispatch sources crashed
/// libdispatch's event loop (docs/ARCHITECTURE.md).
public final class Subprocess: @unchecked Sendable {
    /// How a child ended.
    public enum Termination: Sendable, Hashable, CustomStringConvertible {
        case exited(Int32)
        case signalled(Int32)

        public var description: String {
            switch self {
            case .exited(let status): "exited \(status)"
            case .signalled(let signal): "signal \(signal)"
            }
        }
    }

    public let pid: Int32
    // Guarded by `lock`.
    private let lock = NSCondition()
    private var termination: Termination?
    private var waiters: [CheckedContinuation<Termination, Never>] = []

    /// Starts `executable` with `arguments`; `environment` replaces nothing and adds to this process's. Output goes
    /// to the files `stdoutPath` and `stderrPath` (appended, created 0600) or nowhere; `stdin` (at most 64 KiB)
    /// is the child's whole standard input. The descriptors of `inherited` become the child's 3, 4, … in order (a
    /// pipe to the child, such as Chromium's `--remote-debugging-pipe`); no other descriptor is passed.
    /// - Throws: ``RuntimeError/Code/io`` when the child cannot be started.
    public init(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:], stdin: [UInt8]? = nil,
        stdoutPath: String? = nil, stderrPath: String? = nil, inherited: [Int32] = []
    ) throws(RuntimeError) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // Each first to a number above every source and target, then to its target: no dup2 overwrites a source
        // not yet moved.
        let lifted = max(inherited.max() ?? 0, Int32(2 + inherited.count)) + 1
        for (index, descriptor) in inherited.enumerated() {
            posix_spawn_file_actions_adddup2(&actions, descriptor, lifted + Int32(index))
        }
        for index in inherited.indices {
            posix_spawn_file_actions_adddup2(&actions, lifted + Int32(index), 3 + Int32(index))
            posix_spawn_file_actions_addclose(&actions, lifted + Int32(index))
        }
        var inputReadEnd: Int32?
        defer { if let inputReadEnd { close(inputReadEnd) } }
        if let stdin {
            guard stdin.count <= 65_536 else { throw RuntimeError(.io, "stdin is at most 64 KiB") }
            var fds: [Int32] = [0, 0]
            guard pipe(&fds) == 0 else { throw RuntimeError(.io, "pipe failed: errno \(errno)") }
            _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
            _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
            // The pipe holds 64 KiB: written whole before the child starts, then closed (end of input).
            _ = stdin.withUnsafeBytes { write(fds[1], $0.baseAddress, $0.count) }
            close(fds[1])
            inputReadEnd = fds[0]
            posix_spawn_file_actions_adddup2(&actions, fds[0], 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        for (target, path) in [(Int32(1), stdoutPath), (Int32(2), stderrPath)] {
            if let path {
                posix_spawn_file_actions_addopen(&actions, target, path, O_WRONLY | O_CREAT | O_APPEND, 0o600)
            } else {
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", O_WRONLY, 0)
            }
        }
        var variables = ProcessInfo.processInfo.environment
        for (key, value) in environment { variables[key] = value }
        let (child, result) = Self.spawn(executable, arguments, environment: variables, actions: &actions)
        guard result == 0 else { throw RuntimeError(.io, "cannot start \(executable): errno \(result)") }
        pid = child
        let reaper = Thread { [self] in reap() }
        reaper.name = "subprocess-\(child)"
        reaper.start()
    }

    /// `posix_spawn` of `executable` with exactly `environment`: the child's pid, or 0 and the error number.
    package static func spawn(
        _ executable: String, _ arguments: [String], environment: [String: String],
        actions: inout posix_spawn_file_actions_t
    ) -> (pid: Int32, error: Int32) {
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var child: Int32 = 0
        let result = posix_spawn(&child, executable, &actions, nil, argv, envp)
        return (result == 0 ? child : 0, result)
    }

    private func reap() {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        // WIFEXITED / WEXITSTATUS / WTERMSIG, spelled out (the C macros do not import).
        let ended: Termination =
            (status & 0x7F) == 0 ? .exited((status >> 8) & 0xFF) : .signalled(status & 0x7F)
        lock.lock()
        termination = ended
        let waiting = waiters
        waiters = []
        lock.broadcast()
        lock.unlock()
        for waiter in waiting { waiter.resume(returning: ended) }
    }

    /// Whether the child has not been reaped yet.
    public var isRunning: Bool { lock.withLock { termination == nil } }

    /// Sends `signal` unless the child was already reaped (its pid may belong to another process by then).
    public func send(_ signal: Int32) {
        lock.withLock { if termination == nil { _ = Glibc.kill(pid, signal) } }
    }

    /// Suspends until the child ended, without blocking a thread of the concurrency pool.
    public func exit() async -> Termination {
        await withCheckedContinuation { continuation in
            lock.lock()
            if let termination {
                lock.unlock()
                continuation.resume(returning: termination)
            } else {
                waiters.append(continuation)
                lock.unlock()
            }
        }
    }

    /// The child's end, or nil when it did not end within `seconds` (then it is killed with SIGKILL and reaped).
    public func exit(within seconds: Double) async -> Termination? {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let ended = lock.withLock({ termination }) { return ended }
            try? await Task.sleep(for: .milliseconds(20))
        }
        send(SIGKILL)
        _ = await exit()
        return nil
    }
}
