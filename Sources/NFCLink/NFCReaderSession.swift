public import EMV
import Foundation

/// The reader's end of one tap: the field is on from ``open(antenna:polling:limits:)`` until ``close()``.
///
/// It is an `EMV` ``CardTransport``: the terminal kernel sends its APDUs through it. Guarantees:
/// - the device must join within ``NFCLinkLimits/joinTimeout`` and answer each APDU within
///   ``NFCLinkLimits/exchangeTimeout``, or the call fails with ``NFCLinkError/Code/timedOut``;
/// - a device that is not a phone or a watch is refused (``NFCLinkError/Code/deviceNotAllowed``) and the field
///   goes off before any APDU;
/// - at most ``NFCLinkLimits/maximumExchanges`` APDUs per tap;
/// - the round-trip time of every exchange is kept (``exchangeDurations``) for latency measurements.
public final class NFCReaderSession: CardTransport, @unchecked Sendable {
    // @unchecked: `socket` is used only inside jobs of `thread`, which run one at a time; the mutable
    // fields are guarded by `lock`.
    /// The antenna's path.
    public let path: String
    /// The device's answer to the field: its kind and whether it was ready when it joined.
    public let join: NFCJoin
    private let limits: NFCLinkLimits
    private let socket: LinkSocket
    private let thread: LinkThread
    private let lock = NSLock()
    private var ready: Bool
    private var exchanges = 0
    private var closed = false
    private var durations: [Duration] = []

    private init(path: String, join: NFCJoin, limits: NFCLinkLimits, socket: LinkSocket, thread: LinkThread) {
        self.path = path
        self.join = join
        self.limits = limits
        self.socket = socket
        self.thread = thread
        ready = join.ready
    }

    deinit { thread.stop() }

    /// Switches the field on at the antenna `path`: announces `polling` and waits for the device to join.
    ///
    /// Throws ``NFCLinkError/Code/notInField`` when no device listens there, ``NFCLinkError/Code/refused``
    /// when the device refuses (its code in ``NFCLinkError/peerCode``), ``NFCLinkError/Code/deviceNotAllowed``
    /// for a device that is not a phone or a watch.
    public static func open(
        antenna path: String, polling: NFCPolling, limits: NFCLinkLimits = NFCLinkLimits()
    ) async throws(NFCLinkError) -> NFCReaderSession {
        let thread = LinkThread(name: "orchard-nfc-reader")
        do {
            let (socket, join) = try await thread.run { () throws(NFCLinkError) -> (LinkSocket, NFCJoin) in
                let socket = LinkSocket(fd: try LinkSocket.connect(path), maximumPayload: limits.maximumPayload)
                let deadline = LinkClock.deadline(after: limits.joinTimeout)
                try socket.write(try NFCFrame.json(.poll, polling), deadline: deadline)
                let answer = try socket.read(deadline: deadline, what: "waiting for a device to join the field")
                switch answer.type {
                case .joined:
                    let join = try answer.decode(NFCJoin.self)
                    guard join.version == NFCLinkProtocol.version else {
                        try? socket.write(NFCFrame(.fieldOff), deadline: LinkClock.deadline(after: .milliseconds(100)))
                        throw NFCLinkError(.protocolViolation, "the device speaks link version \(join.version)")
                    }
                    guard join.kind.mayJoinField else {
                        // Refused before any APDU: the field goes off at once.
                        try? socket.write(NFCFrame(.fieldOff), deadline: LinkClock.deadline(after: .milliseconds(100)))
                        throw NFCLinkError(
                            .deviceNotAllowed, "a \(join.kind) tried to join the field: only phones and watches pay")
                    }
                    return (socket, join)
                case .refused:
                    let refusal = try answer.decode(NFCRefusal.self)
                    throw NFCLinkError(
                        .refused, "the device refused the field: \(refusal.message)", peerCode: refusal.code)
                default:
                    throw NFCLinkError(.protocolViolation, "the device answered the field with a \(answer.type) frame")
                }
            }
            return NFCReaderSession(path: path, join: join, limits: limits, socket: socket, thread: thread)
        } catch {
            thread.stop()
            throw error
        }
    }

    /// Whether a card is authorized on the device (it joined ready, or sent ``NFCFrameType/ready`` since).
    public var isReady: Bool { lock.withLock { ready } }

    /// The round-trip time of each APDU exchange so far, in order.
    public var exchangeDurations: [Duration] { lock.withLock { durations } }

    /// Waits up to `timeout` for the user to authorize a card on the device. Returns whether the device is
    /// ready; throws when it refuses or leaves meanwhile.
    public func waitUntilReady(timeout: Duration) async throws(NFCLinkError) -> Bool {
        if isReady { return true }
        try checkOpen()
        let socket = socket
        let became = try await thread.run { () throws(NFCLinkError) -> Bool in
            let deadline = LinkClock.deadline(after: timeout)
            guard try socket.isReadable(until: deadline) else { return false }
            let frame = try socket.read(deadline: deadline, what: "waiting for the device to be ready")
            switch frame.type {
            case .ready: return true
            case .refused:
                let refusal = try frame.decode(NFCRefusal.self)
                throw NFCLinkError(.refused, "the device left the field: \(refusal.message)", peerCode: refusal.code)
            default:
                throw NFCLinkError(.protocolViolation, "a \(frame.type) frame arrived before any command")
            }
        }
        if became { lock.withLock { ready = true } }
        return became
    }

    /// Sends one command APDU's bytes and returns the response's bytes (data ‖ SW1 SW2).
    public func transceive(_ command: [UInt8]) async throws(NFCLinkError) -> [UInt8] {
        try checkOpen()
        let count = lock.withLock { () -> Int in
            exchanges += 1
            return exchanges
        }
        guard count <= limits.maximumExchanges else {
            throw NFCLinkError(.limitExceeded, "more than \(limits.maximumExchanges) APDUs in one tap")
        }
        let socket = socket
        let limits = limits
        let (response, becameReady, elapsed) = try await thread.run {
            () throws(NFCLinkError) -> ([UInt8], Bool, UInt64) in
            let start = LinkClock.now()
            let deadline = LinkClock.deadline(after: limits.exchangeTimeout)
            try socket.write(NFCFrame(.command, command), deadline: deadline)
            var becameReady = false
            while true {
                let frame = try socket.read(deadline: deadline, what: "waiting for the device's response APDU")
                switch frame.type {
                case .response:
                    guard frame.payload.count >= 2 else {
                        throw NFCLinkError(.protocolViolation, "a response APDU has at least its status word")
                    }
                    return (frame.payload, becameReady, LinkClock.now() - start)
                case .ready:
                    becameReady = true  // the authorization arrived while the reader was already sending
                case .refused:
                    let refusal = try frame.decode(NFCRefusal.self)
                    throw NFCLinkError(
                        .refused, "the device left the field: \(refusal.message)", peerCode: refusal.code)
                default:
                    throw NFCLinkError(.protocolViolation, "a \(frame.type) frame arrived instead of a response")
                }
            }
        }
        lock.withLock {
            if becameReady { ready = true }
            durations.append(.nanoseconds(Int64(elapsed)))
        }
        return response
    }

    /// ``CardTransport``: the kernel's APDUs.
    public func transmit(_ command: CommandAPDU) async throws -> ResponseAPDU {
        let bytes = try await transceive(try command.encoded())
        do {
            return try ResponseAPDU(bytes: bytes)
        } catch {
            throw NFCLinkError(.protocolViolation, "the device's response is not an APDU")
        }
    }

    /// Switches the field off: tells the device and waits (at most ``NFCLinkLimits/exchangeTimeout``) until
    /// it has left the field and closed the link, so the device is free for the next tap. Idempotent.
    public func close() async {
        let first = lock.withLock { () -> Bool in
            defer { closed = true }
            return !closed
        }
        guard first else { return }
        let socket = socket
        let limits = limits
        _ = try? await thread.run { () throws(NFCLinkError) in
            // The device closes the link once it has left the field: waiting for that makes the next tap
            // find it ready rather than still busy with this one.
            let deadline = LinkClock.deadline(after: limits.exchangeTimeout)
            if (try? socket.write(NFCFrame(.fieldOff), deadline: deadline)) != nil {
                while (try? socket.read(deadline: deadline, what: "waiting for the device to leave")) != nil {}
            }
            socket.close()
        }
        thread.stop()
    }

    private func checkOpen() throws(NFCLinkError) {
        guard !lock.withLock({ closed }) else { throw NFCLinkError(.connectionLost, "the field is off") }
    }
}
