import Foundation
import OrchardBenchmarks
import Testing

@Suite("Benchmarks: latency figures")
struct LatencyFigureTests {
    @Test func percentilesAreNearestRankAndTheRatioIsTargetOverP99() throws {
        // 1…100 ms.
        let samples = (1...100).map { UInt64($0) * 1_000_000 }
        let figure = try LatencyFigure(name: "tap", nanoseconds: samples.shuffled(), targetP99Milliseconds: 50)
        #expect(figure.samples == 100 && figure.p50Milliseconds == 50 && figure.p99Milliseconds == 99)
        #expect(figure.maxMilliseconds == 100)
        #expect(figure.ratio == 50.0 / 99.0 && figure.meetsTarget == false)
        let fast = try LatencyFigure(name: "apdu", nanoseconds: [1_000_000, 2_000_000], targetP99Milliseconds: 5)
        #expect(fast.p99Milliseconds == 2 && fast.ratio == 2.5 && fast.meetsTarget == true)
        let report = InStoreBenchmarkReport(taps: 10, approved: 10, seconds: 2, figures: [figure, fast])
        #expect(report.tapsPerSecond == 5 && report.failures.map(\.name) == ["tap"])
        // Ungated: no ratio, never a failure.
        let fsync = try LatencyFigure(name: "fsync", nanoseconds: [5_000_000], targetP99Milliseconds: nil)
        #expect(fsync.ratio == nil && fsync.meetsTarget == nil)
        #expect(InStoreBenchmarkReport(taps: 1, approved: 1, seconds: 0, figures: [fsync]).failures.isEmpty)
    }

    @Test func anEmptyFigureIsAnError() {
        #expect(throws: BenchmarkError(.operationFailed, "")) {
            try LatencyFigure(name: "nothing", nanoseconds: [], targetP99Milliseconds: 5)
        }
    }

    @Test func theFsyncProbeMeasuresADurableWrite() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fsync-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        do {
            let probe = try FsyncProbe(directory: directory.path)
            #expect(try probe.measure() > 0)
            #expect(FileManager.default.fileExists(atPath: directory.path + "/fsync-probe.bin"))
        }
        #expect(!FileManager.default.fileExists(atPath: directory.path + "/fsync-probe.bin"))
        #expect(throws: BenchmarkError(.invalidConfiguration, "")) {
            try FsyncProbe(directory: directory.path + "/missing")
        }
    }
}
