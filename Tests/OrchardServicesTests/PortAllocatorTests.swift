import Foundation
import MerchantServer
import NetworkServer
import OrchardCrypto
import OrchardRuntime
import OrchardServices
import PayServer
import Testing

/// The ports `init` gives a deployment stay its own until it binds them: outside the kernel's ephemeral range
/// (which outgoing connections and binds to port 0 take meanwhile) and reserved against other deployments.
@Suite("Port allocation")
struct PortAllocatorTests {
    let temporary: TemporaryDirectory
    let reservations: String
    init() throws {
        temporary = try TemporaryDirectory()
        reservations = temporary.child("reservations")
        try FileManager.default.createDirectory(atPath: reservations, withIntermediateDirectories: false)
    }

    /// A configuration at `path` naming `ports` the way `config.json` does (a number and strings).
    func writeConfiguration(_ path: String, naming ports: [Int]) throws {
        let object: [String: Any] = [
            "pay": ["port": ports[0], "instancePorts": ports.dropFirst().map(String.init)]
        ]
        try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: path))
    }

    func allocator(candidates: [Int], at now: Date = Date()) -> PortAllocator {
        PortAllocator(reservations: reservations, candidates: candidates, clock: ManualClock(now: now))
    }

    /// Ports nobody uses now, for the test's candidates (themselves reserved in the user's directory, so no
    /// other test takes them meanwhile).
    func unusedPorts(_ count: Int) throws -> [Int] { try PortAllocator().freePorts(count, owner: nil) }

    @Test func initGivesPortsOutsideTheEphemeralRangeReservedForTheDeployment() async throws {
        let directory = DeploymentDirectory(path: temporary.child("deployment"))
        let summary = try await DeploymentInitializer.initialize(
            directory, registry: try ServiceRegistry([NetworkServerService(), PayService(), MerchantService()]))
        let ports = summary.services.values.flatMap { [$0.port] + $0.additional.values }
        let range = String(
            decoding: try Data(contentsOf: URL(fileURLWithPath: "/proc/sys/net/ipv4/ip_local_port_range")),
            as: UTF8.self
        )
        .split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        #expect(range.count == 2)
        #expect(Set(ports).count == ports.count)
        for port in ports {
            #expect(!(range[0]...range[1]).contains(port))
            let owner = try String(contentsOfFile: PortAllocator.userReservations() + "/\(port)", encoding: .utf8)
            #expect(owner == URL(fileURLWithPath: directory.configurationPath).standardizedFileURL.path + "\n")
        }
    }

    @Test func aPortAnotherDeploymentStillNamesIsNeverGiven() throws {
        let ports = try unusedPorts(2)
        let other = temporary.child("other.json")
        try writeConfiguration(other, naming: [ports[0]])
        #expect(try allocator(candidates: [ports[0]]).freePorts(1, owner: other) == [ports[0]])
        // An hour later the reservation stands on the deployment's configuration alone.
        let later = Date().addingTimeInterval(3600)
        #expect(try allocator(candidates: [ports[0], ports[1]], at: later).freePorts(1, owner: nil) == [ports[1]])
        #expect(throws: ServicesError.self) {
            try allocator(candidates: [ports[0]], at: later).freePorts(1, owner: nil)
        }
    }

    @Test func aReservationLapsesWhenItsDeploymentNoLongerNamesThePort() throws {
        let ports = try unusedPorts(2)
        let first = temporary.child("first.json")
        try writeConfiguration(first, naming: [ports[0]])
        _ = try allocator(candidates: [ports[0]]).freePorts(1, owner: first)
        // Re-initialised with other ports: the old one is free again for a new deployment.
        try writeConfiguration(first, naming: [ports[1]])
        let later = Date().addingTimeInterval(3600)
        let second = temporary.child("second.json")
        #expect(try allocator(candidates: [ports[0]], at: later).freePorts(1, owner: second) == [ports[0]])
        #expect(try String(contentsOfFile: reservations + "/\(ports[0])", encoding: .utf8) == second + "\n")
        // Deleted deployments free theirs too.
        try writeConfiguration(second, naming: [ports[0]])
        #expect(throws: ServicesError.self) {
            try allocator(candidates: [ports[0]], at: later).freePorts(1, owner: nil)
        }
        try FileManager.default.removeItem(atPath: second)
        #expect(try allocator(candidates: [ports[0]], at: later).freePorts(1, owner: nil) == [ports[0]])
    }

    @Test func aReservationWithoutItsConfigurationYetHoldsTenMinutes() throws {
        let port = try unusedPorts(1)[0]
        _ = try allocator(candidates: [port]).freePorts(1, owner: temporary.child("not-written-yet.json"))
        #expect(throws: ServicesError.self) {
            try allocator(candidates: [port], at: Date().addingTimeInterval(540)).freePorts(1, owner: nil)
        }
        #expect(
            try allocator(candidates: [port], at: Date().addingTimeInterval(660)).freePorts(1, owner: nil) == [port])
    }

    @Test func aPortInUseIsSkippedAndTooFewIsAnError() throws {
        let ports = try unusedPorts(2)
        let listener = try plainListener(port: ports[0])
        defer { close(listener) }
        #expect(try allocator(candidates: ports).freePorts(1, owner: nil) == [ports[1]])
        let error = #expect(throws: ServicesError.self) {
            try allocator(candidates: [ports[0]]).freePorts(1, owner: nil)
        }
        #expect(error?.message.contains("--base-port") == true)
        // Nothing was reserved for the port in use.
        #expect(!FileManager.default.fileExists(atPath: reservations + "/\(ports[0])"))
    }

    /// A listening socket on 127.0.0.1:`port`.
    func plainListener(port: Int) throws -> Int32 {
        let fd = try #require(PortAllocator.bindLoopback(port))
        try #require(listen(fd, 1) == 0)
        return fd
    }
}
