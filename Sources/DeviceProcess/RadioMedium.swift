import Device
import DeviceControlAPI
import Foundation
import OrchardCrypto
import OrchardRuntime
import RelayAPI
import SecureElement
import Synchronization
import Wallet

#if canImport(Glibc)
    import Glibc
#endif

/// The device's radio on the simulated medium (docs/handoff.md, "Proximity"): a datagram socket under
/// `DIR/run/radio/ROOM/` with a random name, to which every device in the room sends its advertisements. There is no
/// central party: a device sends its own advertisement to each socket in its room's directory and reads those sent
/// to it. Each advertisement is sealed under the device's advertising key (which only the account's devices got,
/// over the relay) with a rotating identifier; what the device hears is counted by a ``ProximityTracker``.
///
/// The device's room is its setting (`orchard device move`), read at each advertisement: a move takes effect within
/// one interval, and a device that moved hears no one until devices of its new room are heard.
final class RadioMedium: Sendable {
    /// How often the device advertises: a fifth of the window, at least 100 ms.
    let interval: Duration
    /// How long the rotating identifier lasts before it changes.
    static let rotation: UInt64 = 15 * 60 * 1000

    private let device: Device
    private let deployment: DeploymentDirectory
    private let clock: any DeviceClock
    private let random: any RandomSource
    private let trace: @Sendable (String) -> Void
    private let state: Mutex<State>
    private let task = Mutex<Task<Void, Never>?>(nil)

    private struct State: Sendable {
        var tracker: ProximityTracker
        var room: String?
        var socket: Int32 = -1
        var path: String?
        var identifier: [UInt8] = []
        var identifierSince: UInt64 = 0
        var counter: UInt64 = 0
        var keys: [String: SymmetricKey] = [:]
        var ignored = ProximityAnswer.IgnoredCounts()
    }

    /// `DIR/run/radio/ROOM`: the sockets of the devices in `room`.
    static func roomDirectory(_ room: String, in deployment: DeploymentDirectory) -> String {
        deployment.path + "/run/radio/" + room
    }

    init(
        device: Device, deployment: DeploymentDirectory, window: Duration, clock: any DeviceClock = SystemClock(),
        random: any RandomSource = SystemRandom(), trace: @escaping @Sendable (String) -> Void
    ) {
        self.device = device
        self.deployment = deployment
        self.clock = clock
        self.random = random
        self.trace = trace
        let milliseconds =
            UInt64(window.components.seconds) * 1000 + UInt64(window.components.attoseconds / 1_000_000_000_000_000)
        interval = .milliseconds(max(100, milliseconds / 5))
        let started = UInt64(max(0, clock.now().timeIntervalSince1970 * 1000))
        state = Mutex(State(tracker: ProximityTracker(windowMilliseconds: milliseconds, notBefore: started)))
    }

    /// Starts advertising and listening.
    func start() {
        let started = Task { [self] in
            var next = ContinuousClock.now
            while !Task.isCancelled {
                if ContinuousClock.now >= next {
                    await advertise()
                    next = ContinuousClock.now + interval
                }
                drain()
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
        task.withLock { $0 = started }
    }

    /// Stops advertising and removes the device's socket.
    func stop() async {
        let running = task.withLock { task in
            defer { task = nil }
            return task
        }
        running?.cancel()
        await running?.value
        state.withLock { state in Self.close(&state) }
    }

    /// The room, whether the radio is on, the devices heard within the window and the counts of those ignored.
    func answer() async -> ProximityAnswer {
        let room = await device.wallet.currentSettings.room
        let now = monotonicMilliseconds()
        return state.withLock { state in
            ProximityAnswer(
                room: state.room ?? room, listening: state.socket >= 0,
                nearby: state.tracker.near(at: now).map {
                    ProximityAnswer.NearbyDevice(
                        device: $0.device, kind: $0.kind, heardMillisecondsAgo: Int(now - $0.heardAt))
                }, ignored: state.ignored)
        }
    }

    /// The devices heard within the window, with their kinds.
    func near() -> [(device: String, kind: String)] {
        let now = monotonicMilliseconds()
        return state.withLock { state in state.tracker.near(at: now).map { ($0.device, $0.kind) } }
    }

    // MARK: Advertising

    private func advertise() async {
        let room = await device.wallet.currentSettings.room
        let own: SymmetricKey
        let peers: [String: SymmetricKey]
        do {
            own = try await device.secureEnclave.advertisingKey()
            peers = try await device.secureEnclave.peerAdvertisingKeys()
        } catch {
            trace("radio: \(error)")
            return
        }
        let wall = UInt64(max(0, clock.now().timeIntervalSince1970 * 1000))
        let kind = device.profile.kind.rawValue
        let (advertisement, targets): (ProximityAdvertisement?, [String]) = state.withLock { state in
            state.keys = peers
            if state.room != room || state.socket < 0 {
                Self.close(&state)
                state.tracker.forgetNearby()
                do {
                    try bind(&state, room: room)
                } catch {
                    trace("radio: \(error)")
                    return (nil, [])
                }
                state.identifierSince = 0
            }
            if state.identifier.isEmpty || wall &- state.identifierSince >= Self.rotation || state.identifierSince == 0
            {
                state.identifier = random.bytes(ProximityAdvertisement.identifierByteCount)
                state.identifierSince = max(wall, 1)
            }
            state.counter = max(state.counter + 1, wall)
            let body = ProximityAdvertisement.Body(counter: state.counter, kind: kind)
            let sealed = try? ProximityCipher.seal(body, key: own, identifier: state.identifier, random: random)
            return (sealed, Self.sockets(in: room, deployment: deployment).filter { $0 != state.path })
        }
        guard let advertisement else { return }
        let bytes = advertisement.encoded
        let socket = state.withLock { $0.socket }
        for target in targets {
            guard var address = try? UnixDomainSocket.address(target) else { continue }
            let sent = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(
                        socket, bytes, bytes.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL), $0,
                        socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            // Nothing reads there: the socket of a device process that was killed. Any device may sweep it.
            if sent < 0, errno == ECONNREFUSED { unlink(target) }
        }
    }

    /// The sockets of a room (any device's, including this one's).
    static func sockets(in room: String, deployment: DeploymentDirectory) -> [String] {
        let directory = roomDirectory(room, in: deployment)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasSuffix(".sock") }.sorted().map { directory + "/" + $0 }
    }

    private func bind(_ state: inout State, room: String) throws {
        let directory = Self.roomDirectory(room, in: deployment)
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let path = directory + "/" + Hex.encode(random.bytes(8), lowercase: true) + ".sock"
        var address = try UnixDomainSocket.address(path)
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw DeviceProcessError(.socketFailure, "the radio's socket could not be made") }
        let bound = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0 else {
            Glibc.close(fd)
            throw DeviceProcessError(.socketFailure, "the radio's socket could not be bound in room \(room)")
        }
        state.socket = fd
        state.path = path
        state.room = room
        trace("radio: in room \(room)")
    }

    private static func close(_ state: inout State) {
        if state.socket >= 0 { Glibc.close(state.socket) }
        if let path = state.path { unlink(path) }
        state.socket = -1
        state.path = nil
    }

    // MARK: Listening

    /// Reads every datagram waiting and counts it.
    private func drain() {
        var buffer = [UInt8](repeating: 0, count: 512)
        while true {
            let wall = UInt64(max(0, clock.now().timeIntervalSince1970 * 1000))
            let now = monotonicMilliseconds()
            let heard: Bool = state.withLock { state in
                guard state.socket >= 0 else { return false }
                let count = buffer.withUnsafeMutableBytes {
                    recv(state.socket, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT))
                }
                guard count >= 0 else { return false }
                switch state.tracker.hear(Array(buffer[0..<count]), keys: state.keys, wall: wall, monotonic: now) {
                case .counted: break
                case .foreign: state.ignored.foreign += 1
                case .replayed: state.ignored.replayed += 1
                case .stale: state.ignored.stale += 1
                }
                return true
            }
            if !heard { return }
        }
    }

    private func monotonicMilliseconds() -> UInt64 { clock.nanoseconds() / 1_000_000 }
}
