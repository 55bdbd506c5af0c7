internal import CHTTPShims
internal import CShims
import Foundation
public import OrchardLogging

/// Delivers SIGTERM and SIGINT to Swift on one thread.
///
/// The C handler only writes the signal number to a pipe (the one async-signal-safe thing to do);
/// a dedicated thread reads the pipe and resumes whoever waits in ``next()``. A signal that arrives
/// while nobody waits is kept for the next caller.
public final class ShutdownSignals: @unchecked Sendable {
    // Thread-safety: `waiting` and `pending` are guarded by `lock`.
    private let lock = NSLock()
    private var waiting: [UInt64: CheckedContinuation<Int32?, Never>] = [:]
    private var nextWaiter: UInt64 = 0
    private var pending: [Int32] = []

    /// The process's only instance: installing the handlers twice would be pointless.
    public static let shared: ShutdownSignals = {
        let signals = ShutdownSignals()
        signals.install()
        return signals
    }()

    private init() {}

    private func install() {
        // SIGPIPE is ignored for the whole process: a peer closing its socket must not end it.
        signal(SIGPIPE, SIG_IGN)
        let fd = orchard_signal_pipe_open()
        guard fd >= 0, orchard_signal_pipe_watch(SIGTERM) == 0, orchard_signal_pipe_watch(SIGINT) == 0 else {
            // Without the pipe the default actions stay in place: the process still stops on SIGTERM,
            // only not gracefully. Not input-derived, and nothing better can be done.
            FileHandle.standardError.write(Data("warning: cannot install shutdown signal handlers\n".utf8))
            return
        }
        let thread = Thread { [self] in
            orchard_name_current_thread("orchard-signals")
            var byte: UInt8 = 0
            while true {
                let n = read(fd, &byte, 1)
                if n == 1 {
                    deliver(Int32(byte))
                } else if n < 0 && errno == EINTR {
                    continue
                } else {
                    return
                }
            }
        }
        thread.start()
    }

    private func deliver(_ signal: Int32) {
        let resumed = lock.withLock { () -> [CheckedContinuation<Int32?, Never>] in
            if waiting.isEmpty {
                pending.append(signal)
                return []
            }
            defer { waiting.removeAll() }
            return Array(waiting.values)
        }
        for continuation in resumed { continuation.resume(returning: signal) }
    }

    /// Waits for the next SIGTERM or SIGINT and returns its number; `nil` if the task is cancelled first.
    public func next() async -> Int32? {
        let id = lock.withLock { () -> UInt64 in
            nextWaiter += 1
            return nextWaiter
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Int32?, Never>) in
                let ready = lock.withLock { () -> Int32?? in
                    if !pending.isEmpty { return .some(pending.removeFirst()) }
                    if Task.isCancelled { return .some(nil) }
                    waiting[id] = continuation
                    return .none
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let continuation = lock.withLock { waiting.removeValue(forKey: id) }
            continuation?.resume(returning: nil)
        }
    }
}

/// Something ``ServiceRunner`` stops on SIGTERM or SIGINT: an ``HTTPServer``, or any long-running
/// component of a party (a background job, a queue consumer).
public protocol ManagedService: AnyObject, Sendable {
    /// Stops gracefully, within the service's own deadline; returns once stopped.
    func shutdown() async
    /// Cuts a graceful shutdown short (called on a second signal).
    func forceShutdown()
}

extension HTTPServer: ManagedService {}

/// Runs services until SIGTERM or SIGINT, then shuts them down gracefully.
public enum ServiceRunner {
    /// Waits for SIGTERM or SIGINT, then shuts every service down concurrently (a server stops
    /// accepting and finishes in-flight requests within its deadline). A second signal during the
    /// drain abandons what is left. Returns when all services stopped (or at once if the calling task
    /// is cancelled before a signal); the caller then exits 0.
    public static func runUntilSignalled(_ services: [any ManagedService], logger: Logger) async {
        let signals = ShutdownSignals.shared
        guard let first = await signals.next() else { return }
        logger.notice("received \(signalName(first)); shutting down gracefully")
        let force = Task {
            guard let second = await signals.next() else { return }
            logger.warning("received \(signalName(second)) again; abandoning in-flight requests")
            for service in services { service.forceShutdown() }
        }
        await withTaskGroup(of: Void.self) { group in
            for service in services { group.addTask { await service.shutdown() } }
        }
        force.cancel()
    }

    static func signalName(_ signal: Int32) -> String {
        switch signal {
        case SIGTERM: "SIGTERM"
        case SIGINT: "SIGINT"
        default: "signal \(signal)"
        }
    }
}
