public import DeviceControlAPI
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Serves a device's control API (``DeviceControl``) as HTTP/1.1 JSON on a Unix socket, mode 0600, to
/// processes of this user only (each connection's peer is checked with `SO_PEERCRED`, which also covers the
/// moment between `bind` and `chmod` and a socket file whose mode was widened later; another user's
/// connection is answered 403 and closed): one request per connection, each connection on its own thread, at
/// most ``maximumConnections`` at once (more are answered 503), 5-second read and write timeouts, bounded heads
/// and bodies.
public final class ControlSocketServer: @unchecked Sendable {
    // @unchecked: `listener`, `active` and `stopped` are guarded by `lock`; the rest is immutable.
    public static let maximumConnections = 32

    public let path: String
    private let handler: @Sendable (ControlRequest) async -> ControlResponse
    private let peerUserID = geteuid()
    private let lock = NSLock()
    private var listener: Int32 = -1
    private var active = 0
    private var stopped = false
    private let finished = DispatchSemaphore(value: 0)

    /// Binds `path` (replacing a stale socket file; refusing a live one) and starts accepting.
    public init(path: String, handler: @escaping @Sendable (ControlRequest) async -> ControlResponse) throws {
        self.path = path
        self.handler = handler
        listener = try UnixSocket.listen(path)
        let thread = Thread { [self] in acceptLoop() }
        thread.name = "orchard-device-control"
        thread.start()
    }

    /// Serves `control` on `path`.
    public convenience init(path: String, control: DeviceControl) throws {
        try self.init(path: path) { request in await control.handle(request) }
    }

    /// Stops accepting, removes the socket file, and returns once the accept loop ended. Requests in
    /// progress finish on their own threads.
    public func stop() {
        let fd: Int32 = lock.withLock {
            guard !stopped else { return -1 }
            stopped = true
            let fd = listener
            listener = -1
            return fd
        }
        guard fd >= 0 else { return }
        unlink(path)
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
        finished.wait()
    }

    private func acceptLoop() {
        defer { finished.signal() }
        while true {
            let fd = lock.withLock { stopped ? -1 : listener }
            guard fd >= 0 else { return }
            let connection = accept(fd, nil, nil)
            if connection < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                return  // the listening socket was closed
            }
            let admitted = lock.withLock { () -> Bool in
                guard active < Self.maximumConnections else { return false }
                active += 1
                return true
            }
            guard admitted else {
                UnixSocket.setTimeouts(connection, seconds: 1)
                try? UnixSocket.writeAll(
                    connection, HTTPMessage.response(Self.error(503, "busy", "too many control connections")))
                close(connection)
                continue
            }
            let thread = Thread { [self] in
                if UnixSocket.peerUserID(connection) == peerUserID {
                    serve(connection)
                } else {
                    refuse(connection)
                }
                lock.withLock { active -= 1 }
            }
            thread.name = "orchard-device-connection"
            thread.start()
        }
    }

    private func serve(_ fd: Int32) {
        defer { close(fd) }
        UnixSocket.setTimeouts(fd, seconds: 5)
        let response: ControlResponse
        do throws(DeviceProcessError) {
            let (head, body) = try HTTPMessage.read(fd)
            guard head.startLine.count == 3, head.startLine[2] == "HTTP/1.1" || head.startLine[2] == "HTTP/1.0",
                head.startLine[1].hasPrefix("/")
            else {
                throw DeviceProcessError(.protocolError, "400 the request line is not METHOD /path HTTP/1.1")
            }
            let request = ControlRequest(method: head.startLine[0], path: head.startLine[1], body: Data(body))
            response = Self.wait { await self.handler(request) }
        } catch  where error.code == .protocolError {
            let status = Int(error.message.prefix(3)) ?? 400
            response = Self.error(status, "badRequest", String(error.message.dropFirst(4)))
        } catch {
            return  // timed out or reset: nothing to answer
        }
        try? UnixSocket.writeAll(fd, HTTPMessage.response(response))
    }

    /// Answers another user's connection 403 without handling its request (read first, with a short timeout, so
    /// the peer is sending no more when it reads the answer).
    private func refuse(_ fd: Int32) {
        defer { close(fd) }
        UnixSocket.setTimeouts(fd, seconds: 1)
        _ = try? HTTPMessage.read(fd)
        try? UnixSocket.writeAll(
            fd, HTTPMessage.response(Self.error(403, "forbidden", "the control socket serves its own user only")))
    }

    /// Runs `body` on the concurrency pool and blocks this (non-pool) connection thread until it returns. The
    /// task is user-initiated: the user or a command waits for the answer with a deadline, which bulk work at the
    /// default priority must not make it miss.
    private static func wait(_ body: @escaping @Sendable () async -> ControlResponse) -> ControlResponse {
        let box = ResponseBox()
        let done = DispatchSemaphore(value: 0)
        Task(priority: .userInitiated) {
            box.set(await body())
            done.signal()
        }
        done.wait()
        return box.get() ?? error(500, "internalFailure", "the device did not answer")
    }

    static func error(_ status: Int, _ code: String, _ message: String) -> ControlResponse {
        ControlResponse.error(status, code, message)
    }
}

/// A response handed from a task to the connection thread.
private final class ResponseBox: @unchecked Sendable {
    // @unchecked: `value` is guarded by `lock`.
    private let lock = NSLock()
    private var value: ControlResponse?
    func set(_ response: ControlResponse) { lock.withLock { value = response } }
    func get() -> ControlResponse? { lock.withLock { value } }
}

/// Sends one request to a device process's control socket.
public enum ControlSocketClient {
    /// Sends `request` and returns the answer. ``DeviceProcessError/Code/notRunning`` when no device process
    /// listens on `path` (the caller may then act on the device's store directly).
    public static func send(
        _ request: ControlRequest, to path: String, timeoutSeconds: Int = 30
    )
        throws(DeviceProcessError) -> ControlResponse
    {
        let fd = try UnixSocket.connect(path)
        defer { close(fd) }
        UnixSocket.setTimeouts(fd, seconds: timeoutSeconds)
        try UnixSocket.writeAll(fd, HTTPMessage.request(request))
        let (head, body) = try HTTPMessage.read(fd)
        guard head.startLine.count >= 2, head.startLine[0].hasPrefix("HTTP/1."), let status = Int(head.startLine[1])
        else { throw DeviceProcessError(.protocolError, "the device process answered a malformed status line") }
        return ControlResponse(status: status, body: Data(body))
    }

    /// ``send(_:to:timeoutSeconds:)`` from async code: the blocking socket calls run on a thread of their
    /// own, never on the concurrency pool or dispatch's worker threads (on two cores the answering side,
    /// if in this process, may need every one of them).
    public static func send(
        _ request: ControlRequest, to path: String, timeoutSeconds: Int = 30
    ) async
        -> Result<ControlResponse, DeviceProcessError>
    {
        await withCheckedContinuation { continuation in
            let thread = Thread {
                continuation.resume(
                    returning: Result { () throws(DeviceProcessError) in
                        try send(request, to: path, timeoutSeconds: timeoutSeconds)
                    })
            }
            thread.name = "orchard-device-control-client"
            thread.start()
        }
    }

    /// Sends the typed `request` and decodes its answer; a refusal is ``DeviceProcessError/Code/refused`` with the
    /// device's status and error body, an answer outside the contract ``DeviceProcessError/Code/protocolError``.
    public static func send<Request: DeviceControlRequest>(
        _ request: Request, to path: String, timeoutSeconds: Int = 30
    ) async -> Result<Request.Answer, DeviceProcessError> {
        let raw: ControlRequest
        switch Result(catching: { () throws(DeviceProcessError) in try ControlRequest(request) }) {
        case .success(let encoded): raw = encoded
        case .failure(let error): return .failure(error)
        }
        return await send(raw, to: path, timeoutSeconds: timeoutSeconds).flatMap { $0.answer(to: request) }
    }

    /// Whether a device process listens on `path`.
    public static func isRunning(at path: String) -> Bool {
        guard let fd = try? UnixSocket.connect(path) else { return false }
        close(fd)
        return true
    }
}

extension ControlRequest {
    /// The bytes of a typed request: its route, and its body as JSON (none for ``NoBody``).
    public init<Request: DeviceControlRequest>(_ request: Request) throws(DeviceProcessError) {
        var body = Data()
        if Request.Body.self != NoBody.self {
            do {
                body = try DeviceControlJSON.encoder().encode(request.body)
            } catch {
                throw DeviceProcessError(.protocolError, "the request cannot be encoded as JSON")
            }
        }
        self.init(method: request.route.method, path: request.route.path, body: body)
    }
}

extension ControlResponse {
    /// The typed answer to `request`, or the device's refusal (``DeviceProcessError/Code/refused``); anything else
    /// is ``DeviceProcessError/Code/protocolError``.
    public func answer<Request: DeviceControlRequest>(
        to request: Request
    ) -> Result<Request.Answer, DeviceProcessError> {
        let decoder = DeviceControlJSON.decoder()
        guard (200..<300).contains(status) else {
            guard let refusal = try? decoder.decode(DeviceControlErrorBody.self, from: body) else {
                return .failure(
                    DeviceProcessError(.protocolError, "the device answered \(status) without an error body"))
            }
            return .failure(DeviceProcessError(refusal: refusal.error, status: status))
        }
        guard let answer = try? decoder.decode(Request.Answer.self, from: body) else {
            let route = request.route
            return .failure(
                DeviceProcessError(.protocolError, "the answer to \(route.method) \(route.path) is not its contract's"))
        }
        return .success(answer)
    }
}

/// Waiting for SIGTERM or SIGINT, for the foreground device process.
public enum TerminationSignal {
    /// Returns the first SIGTERM or SIGINT received from now on (both are then ignored by default
    /// handling, so the process ends only when the caller returns).
    public static func wait() async -> Int32 {
        let holder = SignalSources()
        return await withCheckedContinuation { (continuation: CheckedContinuation<Int32, Never>) in
            holder.start(continuation)
        }
    }
}

private final class SignalSources: @unchecked Sendable {
    // @unchecked: `sources` and `resumed` are guarded by `lock`.
    private let lock = NSLock()
    private var sources: [any DispatchSourceSignal] = []
    private var resumed = false

    func start(_ continuation: CheckedContinuation<Int32, Never>) {
        lock.withLock {
            for number in [SIGTERM, SIGINT] {
                signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
                source.setEventHandler { [self] in
                    let first = lock.withLock { () -> Bool in
                        defer { resumed = true }
                        return !resumed
                    }
                    if first {
                        lock.withLock { for source in sources { source.cancel() } }
                        continuation.resume(returning: number)
                    }
                }
                sources.append(source)
                source.resume()
            }
        }
    }
}
