import Foundation
package import OrchardCrypto

#if canImport(Glibc)
    import Glibc
#endif

/// The ports `init` gives a deployment. A deployment binds them later (at `up`, `serve`, `demo`, often minutes
/// later), so "free now" is not enough:
/// - they are chosen outside the kernel's ephemeral range (`/proc/sys/net/ipv4/ip_local_port_range`), which the
///   kernel hands to every outgoing connection and every bind to port 0 in the meantime;
/// - each is reserved for its deployment in `$TMPDIR/orchard-ports-<uid>/<port>` (created exclusively, naming
///   the deployment's `config.json`), so two deployments of one user never get the same port. A reservation
///   lapses when that file no longer names the port (the deployment was deleted or re-initialised) and, for one
///   without a deployment, after ten minutes.
package struct PortAllocator: Sendable {
    /// How long a reservation holds while its deployment's `config.json` is not written yet (or it has none).
    static let pendingLifetime: TimeInterval = 600

    /// The directory of reservations, one file per port.
    package var reservations: String
    /// The ports to choose from.
    package var candidates: [Int]
    package var clock: any WallClock

    package init(
        reservations: String = PortAllocator.userReservations(), candidates: [Int] = PortAllocator.candidatePorts(),
        clock: any WallClock = SystemClock()
    ) {
        self.reservations = reservations
        self.candidates = candidates
        self.clock = clock
    }

    /// `count` distinct ports, free on 127.0.0.1 now and reserved for the deployment whose configuration is
    /// `owner` (an absolute path).
    package func freePorts(_ count: Int, owner: String?) throws(ServicesError) -> [Int] {
        var candidates = self.candidates
        // Ports are not part of anything a test pins, and a seeded source would give every seeded deployment the
        // same ones: always the system generator.
        var generator = SystemRandomNumberGenerator()
        candidates.shuffle(using: &generator)
        var ports: [Int] = []
        var held: [Int32] = []
        defer { for fd in held { close(fd) } }
        for port in candidates {
            if ports.count == count { break }
            // Bound (and held until all are found) before it is reserved, so a port in use is never reserved.
            guard let fd = Self.bindLoopback(port) else { continue }
            held.append(fd)
            guard reserve(port, owner: owner) else { continue }
            ports.append(port)
        }
        guard ports.count == count else {
            throw ServicesError(
                .internalFailure,
                "found only \(ports.count) of \(count) free ports on 127.0.0.1 outside the kernel's ephemeral range; "
                    + "stop other deployments or pass --base-port N")
        }
        return ports
    }

    /// Every port from 10000 up that the kernel does not hand out by itself; all of 1024…65535 if that leaves too
    /// few (a machine whose ephemeral range covers nearly everything).
    package static func candidatePorts() -> [Int] {
        let (low, high) = ephemeralRange()
        let outside = Array(10000..<max(10000, low)) + Array(min(high + 1, 65536)..<65536)
        return outside.count >= 1000 ? outside : Array(1024...65535)
    }

    static func ephemeralRange() -> (Int, Int) {
        guard let text = try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)
        else { return (32768, 60999) }
        let bounds = text.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        guard bounds.count == 2, bounds[0] <= bounds[1] else { return (32768, 60999) }
        return (bounds[0], bounds[1])
    }

    /// A socket bound to 127.0.0.1:`port` (with `SO_REUSEADDR`, which passes only over connections in
    /// TIME_WAIT), or nil when something holds the port.
    package static func bindLoopback(_ port: Int) -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard bound else {
            close(fd)
            return nil
        }
        return fd
    }

    /// `$TMPDIR/orchard-ports-<uid>`, created 0700.
    package static func userReservations() -> String {
        let directory = NSTemporaryDirectory() + "/orchard-ports-\(getuid())"
        // Private to the user: another user's process must not be able to squat on this one's ports.
        _ = mkdir(directory, 0o700)
        return directory
    }

    /// Reserves `port` for `owner` unless a living reservation holds it; replaces a lapsed one.
    private func reserve(_ port: Int, owner: String?) -> Bool {
        let path = "\(reservations)/\(port)"
        if FileManager.default.fileExists(atPath: path) {
            guard lapsed(path, port: port) else { return false }
            unlink(path)
        }
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        // EEXIST: another init took it between the check and here; any other failure (an unwritable temporary
        // directory) leaves the port unreserved but still outside the kernel's range.
        guard fd >= 0 else { return errno != EEXIST }
        defer { close(fd) }
        let text = Array(((owner ?? "") + "\n").utf8)
        _ = text.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        return true
    }

    private func lapsed(_ path: String, port: Int) -> Bool {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
            let modified = attributes[.modificationDate] as? Date
        else { return true }
        if clock.now().timeIntervalSince(modified) < Self.pendingLifetime { return false }
        guard let owner = try? String(contentsOfFile: path, encoding: .utf8).trimmingCharacters(in: .newlines),
            !owner.isEmpty, let data = FileManager.default.contents(atPath: owner),
            let configuration = try? JSONSerialization.jsonObject(with: data)
        else { return true }
        return !Self.names(port, in: configuration)
    }

    /// Whether `port` appears in the configuration as a number or as a string (`instancePorts` are strings).
    private static func names(_ port: Int, in value: Any) -> Bool {
        switch value {
        case let dictionary as [String: Any]: return dictionary.values.contains { names(port, in: $0) }
        case let array as [Any]: return array.contains { names(port, in: $0) }
        case let number as Int: return number == port
        case let number as NSNumber: return number.intValue == port
        case let string as String: return string == String(port)
        default: return false
        }
    }
}
