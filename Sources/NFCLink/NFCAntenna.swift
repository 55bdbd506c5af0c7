import Foundation
public import OrchardRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// What a device does in a reader's field: the device side of the link calls it, one session at a time.
public protocol NFCTarget: Sendable {
    /// A reader's field came on with `polling`. Join (saying whether a card is already authorized) or
    /// refuse. A target that refuses must leave no field state behind: ``fieldOff()`` is called only after
    /// a join.
    func fieldOn(_ polling: NFCPolling) async -> NFCFieldAnswer

    /// Whether a card is authorized now (asked every ``NFCLinkLimits/readinessInterval`` while the device is
    /// in the field and not yet ready).
    func isAuthorized() async -> Bool

    /// Answers one command APDU from the field; a refusal makes the device leave the field.
    func transceive(_ command: [UInt8]) async throws(NFCRefusal) -> [UInt8]

    /// The field went away (the reader said so, closed the link, or went silent).
    func fieldOff() async
}

/// A target's answer to a field.
public enum NFCFieldAnswer: Sendable, Hashable {
    /// The device joins; `ready` when a card is already authorized.
    case join(ready: Bool)
    /// The device stays out of the field.
    case refuse(NFCRefusal)
}

extension NFCRefusal: Error {}

/// A device's NFC antenna: the device end of the link, a Unix socket (mode 0600) that readers connect to
/// when the device is held to them. Only phones and watches have one.
///
/// One field at a time: a second reader while a session runs is refused with `busy`. Each session runs on
/// a thread of its own and ends, with ``NFCTarget/fieldOff()``, when the reader switches the field off,
/// closes the link, breaks the protocol, or stays silent for ``NFCLinkLimits/idleTimeout``.
public final class NFCAntenna: @unchecked Sendable {
    // @unchecked: `listener`, `stopped`, `inSession` and `connecting` are guarded by `lock`; the rest is immutable.
    public let path: String
    public let kind: NFCDeviceKind
    private let target: any NFCTarget
    private let limits: NFCLinkLimits
    private let lock = NSLock()
    private var listener: Int32 = -1
    private var stopped = false
    private var inSession = false
    private var connecting = 0
    /// Connections that have not sent their polling yet, at most.
    static let maximumPendingConnections = 8
    private let acceptEnded = DispatchSemaphore(value: 0)

    /// Starts listening at `path` for `target`, a device of `kind`. Throws
    /// ``NFCLinkError/Code/deviceNotAllowed`` for a kind without an NFC controller (an iPad, a Mac), and
    /// ``NFCLinkError/Code/alreadyListening`` when a live antenna holds the path (a stale file is replaced).
    public init(
        path: String, kind: NFCDeviceKind, target: any NFCTarget, limits: NFCLinkLimits = NFCLinkLimits()
    ) throws(NFCLinkError) {
        guard kind.mayJoinField else {
            throw NFCLinkError(.deviceNotAllowed, "a \(kind) has no NFC antenna: only phones and watches join a field")
        }
        self.path = path
        self.kind = kind
        self.target = target
        self.limits = limits
        listener = try LinkSocket.listen(path)
        let thread = Thread { [self] in acceptLoop() }
        thread.name = "orchard-nfc-antenna"
        thread.start()
    }

    /// `DIR/devices/<name>/nfc.sock`: where a device's antenna listens.
    public static func path(forDevice name: String, in deployment: DeploymentDirectory) -> String {
        "\(deployment.path)/devices/\(name)/nfc.sock"
    }

    /// Whether an antenna listens at `path` (a device is near the reader).
    public static func isListening(at path: String) -> Bool { LinkSocket.isListening(path) }

    /// The devices of `deployment` whose antenna listens now, by name.
    public static func devicesInRange(of deployment: DeploymentDirectory) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: deployment.path + "/devices")) ?? []
        return names.sorted().filter { isListening(at: path(forDevice: $0, in: deployment)) }
    }

    /// Whether a reader's field is on now.
    public var isInField: Bool { lock.withLock { inSession } }

    /// Stops accepting readers and removes the socket file; a session in progress ends on its own thread.
    public func stop() {
        let fd: Int32 = lock.withLock {
            guard !stopped else { return -1 }
            stopped = true
            defer { listener = -1 }
            return listener
        }
        guard fd >= 0 else { return }
        unlink(path)
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
        acceptEnded.wait()
    }

    private func acceptLoop() {
        defer { acceptEnded.signal() }
        while true {
            let fd = lock.withLock { stopped ? -1 : listener }
            guard fd >= 0 else { return }
            let connection = accept(fd, nil, nil)
            if connection < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                return  // the listening socket was closed
            }
            // A connection counts as a reader only once its polling arrived (a probe that connects and leaves
            // takes no field); unannounced connections are capped.
            let admitted = lock.withLock { () -> Bool in
                guard connecting < Self.maximumPendingConnections, !stopped else { return false }
                connecting += 1
                return true
            }
            guard admitted else {
                close(connection)
                continue
            }
            let thread = Thread { [self] in
                serve(LinkSocket(fd: connection, maximumPayload: limits.maximumPayload))
            }
            thread.name = "orchard-nfc-field"
            thread.start()
        }
    }

    // MARK: A session

    private func serve(_ socket: LinkSocket) {
        defer { socket.close() }
        let polling: NFCPolling
        do throws(NFCLinkError) {
            defer { lock.withLock { connecting -= 1 } }
            let first = try socket.read(
                deadline: LinkClock.deadline(after: limits.joinTimeout), what: "waiting for the reader's polling")
            guard first.type == .poll else {
                throw NFCLinkError(.protocolViolation, "a session starts with the reader's polling")
            }
            polling = try first.decode(NFCPolling.self)
            guard polling.version == NFCLinkProtocol.version else {
                throw NFCLinkError(.protocolViolation, "the reader speaks link version \(polling.version)")
            }
        } catch {
            refuse(socket, NFCRefusal(code: error.code.description, message: error.message))
            return
        }
        let admitted = lock.withLock { () -> Bool in
            guard !inSession else { return false }
            inSession = true
            return true
        }
        guard admitted else {
            refuse(socket, NFCRefusal(code: "busy", message: "the device is in another reader's field"))
            return
        }
        defer { lock.withLock { inSession = false } }
        let target = target
        switch Self.wait({ await target.fieldOn(polling) }) {
        case .refuse(let refusal):
            refuse(socket, refusal)
            return
        case .join(let ready):
            defer { Self.wait { await target.fieldOff() } }
            do throws(NFCLinkError) {
                try socket.write(
                    try NFCFrame.json(.joined, NFCJoin(kind: kind, ready: ready)),
                    deadline: LinkClock.deadline(after: limits.exchangeTimeout))
                try exchange(socket, ready: ready)
            } catch {
                // The reader left, went silent or broke the protocol: the field is gone either way.
                if error.code == .protocolViolation || error.code == .frameTooLarge || error.code == .limitExceeded {
                    refuse(socket, NFCRefusal(code: error.code.description, message: error.message))
                }
            }
        }
    }

    /// The APDU loop: commands until the field goes off.
    private func exchange(_ socket: LinkSocket, ready initiallyReady: Bool) throws(NFCLinkError) {
        var ready = initiallyReady
        var exchanges = 0
        var idleDeadline = LinkClock.deadline(after: limits.idleTimeout)
        let target = target
        while true {
            let waitUntil =
                ready ? idleDeadline : min(idleDeadline, LinkClock.deadline(after: limits.readinessInterval))
            guard try socket.isReadable(until: waitUntil) else {
                if LinkClock.now() >= idleDeadline { throw NFCLinkError(.timedOut, "the reader went silent") }
                if Self.wait({ await target.isAuthorized() }) {
                    ready = true
                    try socket.write(NFCFrame(.ready), deadline: LinkClock.deadline(after: limits.exchangeTimeout))
                }
                continue
            }
            let frame = try socket.read(
                deadline: LinkClock.deadline(after: limits.exchangeTimeout), what: "reading the reader's frame")
            switch frame.type {
            case .fieldOff:
                return
            case .command:
                exchanges += 1
                guard exchanges <= limits.maximumExchanges else {
                    throw NFCLinkError(.limitExceeded, "more than \(limits.maximumExchanges) APDUs in one field")
                }
                let command = frame.payload
                let answer = Self.wait { () async -> Result<[UInt8], NFCRefusal> in
                    do throws(NFCRefusal) {
                        return .success(try await target.transceive(command))
                    } catch {
                        return .failure(error)
                    }
                }
                let deadline = LinkClock.deadline(after: limits.exchangeTimeout)
                switch answer {
                case .success(let response):
                    try socket.write(NFCFrame(.response, response), deadline: deadline)
                case .failure(let refusal):
                    try socket.write(try NFCFrame.json(.refused, refusal), deadline: deadline)
                    return
                }
                idleDeadline = LinkClock.deadline(after: limits.idleTimeout)
            default:
                throw NFCLinkError(.protocolViolation, "a reader does not send \(frame.type) frames")
            }
        }
    }

    private func refuse(_ socket: LinkSocket, _ refusal: NFCRefusal) {
        guard let frame = try? NFCFrame.json(.refused, refusal) else { return }
        try? socket.write(frame, deadline: LinkClock.deadline(after: limits.exchangeTimeout))
    }

    /// Runs `body` on the concurrency pool and blocks this session's thread (never a pool thread) until it
    /// returns. The task is user-initiated: the reader's field has deadlines, and at the default priority the
    /// answer would queue behind whatever bulk work fills the pool (on Linux each priority has threads of its own).
    private static func wait<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
        let box = ResultBox<T>()
        let done = DispatchSemaphore(value: 0)
        Task(priority: .userInitiated) {
            box.value = await body()
            done.signal()
        }
        done.wait()
        return box.value!
    }
}

/// A value handed from a task to a waiting thread (the semaphore orders the write before the read).
private final class ResultBox<T>: @unchecked Sendable {
    var value: T?
}
