public import Device
import Foundation
public import OrchardCrypto
public import OrchardRuntime
public import RelayAPI
import SecureElement
import Synchronization

/// The device process's end of Handoff on the relay (docs/handoff.md): one loop that long-polls the device's relay
/// queue and handles each ``HandoffMessage``, and sends this device's advertising key to each device it trusts.
///
/// - Advertising keys: sent to each trusted device not sent to yet by this process; those received are recorded in
///   the Secure Enclave, so the radio recognises their advertisements.
/// - Discovery: a request is answered with what `answerDiscovery` gives (a phone's or watch's cards, or a refusal);
///   answers to this device's own requests (``discover(_:timeout:)``) are handed to the waiting request.
///
/// The relay carries everything end to end encrypted and signed (frames, vouching): the Pay server learns neither a
/// key nor a card.
public final class HandoffRelay: Sendable {
    /// Answers a discovery request from `requester` (a device the relay authenticated).
    public typealias DiscoveryAnswerer = @Sendable (_ requester: String, _ requestID: String) async -> HandoffMessage
    /// Answers a payment request from `requester`: waits for the user, then gives the result to send back.
    public typealias PaymentAnswerer =
        @Sendable (_ requester: String, _ request: HandoffMessage) async -> HandoffMessage
    /// Takes what a requester says of a payment it asked for after the request (its cancellation, its page's
    /// verdict).
    public typealias PaymentFollowUp = @Sendable (_ requester: String, _ message: HandoffMessage) async -> Void

    private struct State {
        var sentTo: Set<String> = []
        var cursor: Int64 = 0
        /// Requests waiting for answers: request ID → answers by device.
        var waiting: [String: [String: HandoffMessage]] = [:]
    }

    private let device: Device
    private let deployment: DeploymentDirectory
    private let random: any RandomSource
    private let answerDiscovery: DiscoveryAnswerer
    private let answerPayment: PaymentAnswerer
    private let followPayment: PaymentFollowUp
    private let trace: @Sendable (String) -> Void
    private let payServer: (@Sendable () -> PayServerClient?)?
    private let waitSeconds: Int
    private let state = Mutex(State())
    private let task = Mutex<Task<Void, Never>?>(nil)
    /// The last send: each send waits for the one before, so frames to a device leave in the order of their
    /// sequence numbers (the recipient refuses an older one after a newer).
    private let lastSend = Mutex<Task<Void, any Error>?>(nil)

    /// - Parameters:
    ///   - payServer: the device's client of the Pay server; nil: the instances running for the deployment
    ///     (`DIR/run/`), as a device process finds them.
    ///   - waitSeconds: how long each long poll of the relay queue waits (a Pay server stopping waits for it).
    public init(
        device: Device, deployment: DeploymentDirectory, random: any RandomSource = SystemRandom(),
        payServer: (@Sendable () -> PayServerClient?)? = nil,
        waitSeconds: Int = PayServerClient.maximumRelayWaitSeconds,
        answerDiscovery: @escaping DiscoveryAnswerer, answerPayment: @escaping PaymentAnswerer,
        followPayment: @escaping PaymentFollowUp = { _, _ in }, trace: @escaping @Sendable (String) -> Void
    ) {
        self.followPayment = followPayment
        self.payServer = payServer
        self.waitSeconds = waitSeconds
        self.device = device
        self.deployment = deployment
        self.random = random
        self.answerDiscovery = answerDiscovery
        self.answerPayment = answerPayment
        self.trace = trace
    }

    /// Starts the loop: a round whenever a frame arrives or the long poll ends, on one connection while it works;
    /// after a failure (no Pay server yet, the device not approved) a pause of 1 s, doubling up to 16 s.
    public func start() {
        let started = Task { [self] in
            var failures = 0
            var connection: (PayServerClient, DeviceRelay)?
            while !Task.isCancelled {
                do {
                    let current = try connection ?? self.connection()
                    connection = current
                    try await round(current.0, current.1)
                    failures = 0
                } catch {
                    if failures == 0, !Task.isCancelled, !(error is CancellationError) {
                        trace("handoff relay: \(error)")
                    }
                    connection = nil
                    try? await Task.sleep(for: .seconds(1 << min(failures, 4)))
                    failures += 1
                }
            }
        }
        task.withLock { $0 = started }
    }

    /// Stops the loop.
    public func stop() {
        task.withLock { $0?.cancel() }
    }

    private func connection() throws -> (PayServerClient, DeviceRelay) {
        guard let client = payServer?() ?? NotificationPoller.client(for: device.name, in: deployment) else {
            throw PayClientError(.protocolViolation, "no Pay server runs for the deployment")
        }
        return (client, DeviceRelay(deviceID: device.name, client: client, enclave: device.secureEnclave))
    }

    private func round(_ client: PayServerClient, _ relay: DeviceRelay) async throws {
        guard try await client.relayDirectory().devices.contains(where: { $0.deviceID == device.name }) else {
            throw PayClientError(.untrustedRelayKey, "this device has not published its relay keys (approve it)")
        }
        let sent = state.withLock { $0.sentTo }
        let pending = try await relay.trust().trusted.map(\.deviceID).filter { !sent.contains($0) }
        if !pending.isEmpty {
            let key = try await device.secureEnclave.advertisingKey()
            let message = HandoffMessage(kind: .advertisingKey, advertisingKey: key.bytes.unsafeCopyOfBytes())
            for peer in pending {
                try await send(message, to: peer, relay: relay)
                state.withLock { _ = $0.sentTo.insert(peer) }
            }
        }
        let receipt = try await relay.receive(
            after: state.withLock { $0.cursor }, waitSeconds: waitSeconds)
        for (id, error) in receipt.refused { trace("handoff relay: frame \(id) refused: \(error)") }
        for message in receipt.accepted {
            guard
                let handoff = try? message.plaintext.withUnsafeBytes({
                    try JSONDecoder().decode(HandoffMessage.self, from: Data($0))
                })
            else { continue }
            try await handle(handoff, from: message.sender, relay: relay)
        }
        state.withLock { $0.cursor = receipt.lastID }
    }

    /// Sends `message` to `peer` after every send started before it.
    private func send(_ message: HandoffMessage, to peer: String, relay: DeviceRelay) async throws {
        let plaintext = SecureBytes(try JSONEncoder().encode(message))
        let sending = lastSend.withLock { last in
            let previous = last
            let next = Task<Void, any Error> {
                _ = await previous?.result
                try await relay.send(plaintext, to: peer)
            }
            last = next
            return next
        }
        try await sending.value
    }

    private func handle(_ message: HandoffMessage, from sender: String, relay: DeviceRelay) async throws {
        switch message.kind {
        case .advertisingKey:
            guard let bytes = message.advertisingKey, bytes.count == 32 else { return }
            try await device.secureEnclave.recordAdvertisingKey(SymmetricKey(SecureBytes(bytes)), of: sender)
            trace("radio: \(sender)'s advertising key received over the relay")
        case .discoveryRequest:
            guard let requestID = message.requestID else { return }
            trace("handoff relay: \(sender) asks which cards this device offers")
            let answer = await answerDiscovery(sender, requestID)
            try await send(answer, to: sender, relay: relay)
        case .paymentRequest:
            guard message.requestID != nil else { return }
            trace("handoff relay: \(sender) asks this device for a payment")
            // The user takes their time: the loop goes on receiving meanwhile.
            Task {
                let answer = await answerPayment(sender, message)
                do {
                    try await send(answer, to: sender, relay: relay)
                } catch {
                    trace("handoff relay: the payment's result could not be sent to \(sender): \(error)")
                }
            }
        case .paymentCancel, .paymentComplete:
            guard message.requestID != nil else { return }
            trace("handoff relay: \(sender) \(message.kind == .paymentCancel ? "cancels" : "completes") its payment")
            await followPayment(sender, message)
        case .discoveryAnswer, .paymentResult:
            guard let requestID = message.requestID else { return }
            state.withLock { state in
                // Only an answer to a request of this device that still waits counts.
                guard state.waiting[requestID] != nil else { return }
                state.waiting[requestID]?[sender] = message
            }
        }
    }

    /// Sends `message` (a payment's cancellation or verdict) to `device`, a trusted device of the account.
    public func tell(_ message: HandoffMessage, to device: String) async throws {
        let (_, relay) = try connection()
        try await send(message, to: device, relay: relay)
    }

    /// Sends a payment request (its ``HandoffMessage/requestID`` set) to `device` and waits up to `timeout` for its
    /// result; nil when none came in time. A cancelled task stops waiting (CancellationError).
    public func pay(_ request: HandoffMessage, to device: String, timeout: Duration) async throws -> HandoffMessage? {
        guard let requestID = request.requestID else { return nil }
        state.withLock { $0.waiting[requestID] = [:] }
        defer { _ = state.withLock { $0.waiting.removeValue(forKey: requestID) } }
        let (_, relay) = try connection()
        try await send(request, to: device, relay: relay)
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let answer = state.withLock({ $0.waiting[requestID]?[device] }) { return answer }
            try await Task.sleep(for: .milliseconds(5))
        }
        return nil
    }

    /// Asks each of `devices` (trusted devices of the account) for the cards it offers and waits, up to `timeout`,
    /// until all have answered; returns the answers by device (a device that did not answer in time is absent).
    public func discover(_ devices: [String], timeout: Duration) async throws -> [String: HandoffMessage] {
        let requestID = Hex.encode(random.bytes(16), lowercase: true)
        state.withLock { $0.waiting[requestID] = [:] }
        defer { _ = state.withLock { $0.waiting.removeValue(forKey: requestID) } }
        let (_, relay) = try connection()
        let request = HandoffMessage(kind: .discoveryRequest, requestID: requestID)
        for device in devices { try await send(request, to: device, relay: relay) }
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let answers = state.withLock { $0.waiting[requestID] ?? [:] }
            if Set(answers.keys).isSuperset(of: devices) { return answers }
            try await Task.sleep(for: .milliseconds(5))
        }
        return state.withLock { $0.waiting[requestID] ?? [:] }
    }
}
