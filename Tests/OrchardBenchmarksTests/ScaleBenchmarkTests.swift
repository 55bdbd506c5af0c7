import Foundation
import OrchardBenchmarks
import Testing

@Suite("Scale benchmark")
struct ScaleBenchmarkTests {
    /// Tiny sizes, correctness only: every size is filled and measured, every figure has its samples.
    @Test func fillsAndMeasuresEachSize() async throws {
        let path = FileManager.default.temporaryDirectory.path + "/orchard-scale-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let report = try await ScaleBenchmark.run(sizes: [30, 70], samples: 5, batch: 25, directory: path) { _ in }
        #expect(report.levels.map(\.rows) == [30, 70])
        for level in report.levels {
            #expect(level.figures.count == 4)
            #expect(level.figures.allSatisfy { $0.samples == 5 && $0.p50Milliseconds <= $0.p99Milliseconds })
            #expect(level.residentMegabytes > 0)
        }
        #expect(report.growth.count == 4 && report.worstGrowth == report.growth.values.max())
    }

    @Test func refusesTooLittleDiskAndBadSizes() async throws {
        #expect(throws: BenchmarkError.self) {
            try ScaleBenchmark.checkDisk(free: 100 << 20, largest: 1_000_000)
        }
        try ScaleBenchmark.checkDisk(free: ScaleBenchmark.requiredDiskBytes(largest: 1_000_000), largest: 1_000_000)
        await #expect(throws: BenchmarkError.self) {
            try await ScaleBenchmark.run(sizes: [100, 10], samples: 1, directory: "/nonexistent") { _ in }
        }
    }
}
