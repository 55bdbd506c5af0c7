import CommandTestSupport
import Foundation
import Testing

/// `orchard bench sessions` and `bench inapp` run as the `orchard` executable: the Pay server is its own process
/// (`orchard serve pay`) on the machine's last core, the load generator on the others, and the server's CPU is its
/// process's alone.
@Suite("Benchmarks with the server on its own core", .serialized)
struct PinnedServerBenchTests {
    static let twoCores = ProcessInfo.processInfo.activeProcessorCount >= 2

    func check(_ output: CommandOutput, rate: String, cpu: String) throws {
        #expect(output.status == 0, "\(output.stderr.suffix(2000))")
        let report = try output.json()
        #expect((report[rate] as? Double ?? 0) > 0)
        #expect((report[cpu] as? Double ?? 0) > 0)
        let cores = ProcessInfo.processInfo.activeProcessorCount
        #expect(
            report["server"] as? String == "its own process on CPU \(cores - 1); the load generator on CPU "
                + (0..<(cores - 1)).map(String.init).joined(separator: ","))
        #expect(report["serverCores"] as? Int == 1)
        // One core's ceiling: the ceiling's CPU per operation times its rate is one second.
        let ceiling = try #require(report["ceilingPerSecond"] as? Double)
        let each = try #require(
            report["ceilingCPUMicrosecondsPerSession"] as? Double
                ?? report["ceilingCPUMicrosecondsPerToken"] as? Double)
        #expect(abs(ceiling * each / 1e6 - 1) < 0.05)
    }

    @Test("bench sessions: the gateway in its own process, its CPU and one core's ceiling", .enabled(if: twoCores))
    func sessions() async throws {
        let output = try await orchard([
            "bench", "sessions", "--requests", "40", "--connections", "2", "--ceiling-seconds", "1",
        ])
        try check(output, rate: "sessionsPerSecond", cpu: "serverCPUMicrosecondsPerSession")
    }

    @Test("bench inapp: the Pay server in its own process, its CPU and one core's ceiling", .enabled(if: twoCores))
    func inApp() async throws {
        let output = try await orchard([
            "bench", "inapp", "--requests", "40", "--connections", "2", "--ceiling-seconds", "1",
        ])
        try check(output, rate: "tokensPerSecond", cpu: "serverCPUMicrosecondsPerToken")
        // The ceiling in five slices, before, between and after the exchange's four rounds.
        let slices = try #require(try output.json()["ceilingSliceMicroseconds"] as? [Double])
        #expect(slices.count == 5 && slices.allSatisfy { $0 > 0 })
        #expect(output.stderr.contains("in 4 rounds"))
        // The server was busy part of the time (two connections leave it waiting), never more than its one core.
        let busy = try #require(try output.json()["serverBusyFraction"] as? Double)
        #expect(busy > 0 && busy <= 1.02)
    }
}
