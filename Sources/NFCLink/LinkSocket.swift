import Foundation
import OrchardRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// One end of the link: a connected AF_UNIX stream socket that reads and writes ``NFCFrame``s under
/// deadlines. Blocking calls, made only from the link's own threads (never from the concurrency pool).
///
/// `@unchecked Sendable`: it moves between the link's threads but is used by one at a time (a
/// ``LinkThread``'s jobs run one after another; a device session has a thread of its own).
final class LinkSocket: @unchecked Sendable {
    private(set) var fd: Int32
    private let maximumPayload: Int
    /// Bytes read past the last frame (a peer may send two frames in one segment).
    private var buffer: [UInt8] = []

    init(fd: Int32, maximumPayload: Int) {
        self.fd = fd
        self.maximumPayload = maximumPayload
    }

    deinit { close() }

    func close() {
        if fd >= 0 {
            Glibc.close(fd)
            fd = -1
        }
    }

    /// Writes a whole frame, with one `send` whenever the socket's buffer takes it; `MSG_NOSIGNAL`, so a peer
    /// that left gives ``NFCLinkError/Code/connectionLost`` rather than SIGPIPE.
    func write(_ frame: NFCFrame, deadline: UInt64) throws(NFCLinkError) {
        let bytes = try frame.encoded(maximumPayload: maximumPayload)
        var offset = 0
        while offset < bytes.count {
            try waitFor(events: Int16(POLLOUT), deadline: deadline, what: "writing a \(frame.type) frame")
            let written = bytes[offset...].withUnsafeBytes { raw in
                send(fd, raw.baseAddress, raw.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
            }
            if written < 0 {
                if errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK { continue }
                if errno == EPIPE || errno == ECONNRESET {
                    throw NFCLinkError(.connectionLost, "the peer left the field")
                }
                throw LinkSocket.failure("send")
            }
            offset += written
        }
    }

    /// Whether a frame (or the end of the stream) can be read before `deadline`, without consuming it.
    func isReadable(until deadline: UInt64) throws(NFCLinkError) -> Bool {
        if !buffer.isEmpty { return true }
        do {
            try waitFor(events: Int16(POLLIN), deadline: deadline, what: "")
            return true
        } catch  where error.code == .timedOut {
            return false
        }
    }

    /// Reads one frame. ``NFCLinkError/Code/connectionLost`` when the stream ends, ``NFCLinkError/Code/timedOut``
    /// at the deadline, ``NFCLinkError/Code/frameTooLarge`` for a length above the limit (nothing more is read).
    func read(deadline: UInt64, what: @autoclosure () -> String) throws(NFCLinkError) -> NFCFrame {
        while true {
            if let (frame, count) = try NFCFrame.decode(prefixOf: buffer, maximumPayload: maximumPayload) {
                buffer.removeFirst(count)
                return frame
            }
            try waitFor(events: Int16(POLLIN), deadline: deadline, what: what())
            var chunk = [UInt8](repeating: 0, count: 4096)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n == 0 {
                throw NFCLinkError(
                    .connectionLost, buffer.isEmpty ? "the peer left the field" : "the peer left inside a frame")
            }
            if n < 0 {
                if errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK { continue }
                if errno == ECONNRESET { throw NFCLinkError(.connectionLost, "the peer left the field") }
                throw LinkSocket.failure("recv")
            }
            buffer += chunk[0..<n]
        }
    }

    private func waitFor(events: Int16, deadline: UInt64, what: String) throws(NFCLinkError) {
        while true {
            let now = LinkClock.now()
            guard now < deadline else {
                throw NFCLinkError(.timedOut, what.isEmpty ? "the peer was silent" : "timed out \(what)")
            }
            let milliseconds = Int32(min((deadline - now + 999_999) / 1_000_000, 60_000))
            var descriptor = pollfd(fd: fd, events: events, revents: 0)
            let rc = poll(&descriptor, 1, milliseconds)
            if rc > 0 { return }  // readable, writable, or an error/hang-up the next call reports
            if rc < 0, errno != EINTR { throw LinkSocket.failure("poll") }
        }
    }

    // MARK: Addresses, connecting and listening

    /// Connects to the antenna at `path`: ``NFCLinkError/Code/notInField`` when nothing listens there.
    static func connect(_ path: String) throws(NFCLinkError) -> Int32 {
        do {
            return try UnixDomainSocket.connect(path)
        } catch {
            throw map(error, path)
        }
    }

    /// Binds and listens on `path`, mode 0600. A stale socket file is replaced; a live one is
    /// ``NFCLinkError/Code/alreadyListening``.
    static func listen(_ path: String) throws(NFCLinkError) -> Int32 {
        do {
            return try UnixDomainSocket.listen(path, backlog: 8)
        } catch {
            throw map(error, path)
        }
    }

    /// Whether something listens at `path`.
    static func isListening(_ path: String) -> Bool { UnixDomainSocket.isListening(path) }

    private static func map(_ failure: UnixDomainSocket.Failure, _ path: String) -> NFCLinkError {
        switch failure.kind {
        case .invalidPath: NFCLinkError(.invalidPath, "antenna: \(failure.message)")
        case .notListening: NFCLinkError(.notInField, "no device is in the field (nothing listens at \(path))")
        case .alreadyListening: NFCLinkError(.alreadyListening, "an antenna already listens at \(path)")
        case .system: NFCLinkError(.socketFailure, failure.message)
        }
    }

    static func failure(_ what: String) -> NFCLinkError {
        NFCLinkError(.socketFailure, "\(what) failed: \(String(cString: strerror(errno)))")
    }
}

/// Monotonic nanoseconds for the link's socket deadlines. Socket waits are real time by nature (the
/// kernel's `poll`), so this clock is not injected; timeouts are configured through ``NFCLinkLimits``.
enum LinkClock {
    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    static func deadline(after duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        let nanoseconds = max(0, seconds) * 1_000_000_000 + max(0, attoseconds) / 1_000_000_000
        return now() &+ UInt64(min(nanoseconds, Int64(Int32.max) * 1_000_000_000))
    }
}

/// A thread of the link's own that runs blocking jobs one after another, so blocking socket calls never
/// hold a thread of the concurrency pool (two on this machine; the other end may need both).
final class LinkThread: @unchecked Sendable {
    // @unchecked: `jobs` and `stopping` are guarded by `condition`.
    private let condition = NSCondition()
    private var jobs: [@Sendable () -> Void] = []
    private var stopping = false

    init(name: String) {
        let thread = Thread { [self] in loop() }
        thread.name = name
        thread.start()
    }

    private func loop() {
        while true {
            condition.lock()
            while jobs.isEmpty && !stopping { condition.wait() }
            if jobs.isEmpty {
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job()
        }
    }

    /// Runs `body` on the thread and returns its result to the awaiting task.
    func run<T: Sendable>(_ body: @escaping @Sendable () throws(NFCLinkError) -> T) async throws(NFCLinkError) -> T {
        let result: Result<T, NFCLinkError> = await withCheckedContinuation { continuation in
            let accepted = condition.withLock { () -> Bool in
                guard !stopping else { return false }
                jobs.append {
                    continuation.resume(returning: Result { () throws(NFCLinkError) -> T in try body() })
                }
                condition.signal()
                return true
            }
            if !accepted {
                continuation.resume(returning: .failure(NFCLinkError(.connectionLost, "the link is closed")))
            }
        }
        return try result.get()
    }

    /// Lets the queued jobs finish, then ends the thread.
    func stop() {
        condition.withLock {
            stopping = true
            condition.signal()
        }
    }
}
