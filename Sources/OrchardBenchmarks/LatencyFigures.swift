internal import Foundation

/// One latency figure of an end-to-end benchmark: percentiles of its samples and, when it has one, the ratio
/// of its target (a ceiling on the p99) to the measured p99, so that, as with the throughput figures, a ratio
/// of 1 or more meets the goal.
public struct LatencyFigure: Sendable, Codable, Hashable {
    public let name: String
    public let samples: Int
    public let p50Milliseconds: Double
    public let p99Milliseconds: Double
    public let maxMilliseconds: Double
    /// The ceiling the p99 must stay under, if the figure is gated.
    public let targetP99Milliseconds: Double?
    /// `target / p99`: 1 or more meets the target.
    public let ratio: Double?
    public let meetsTarget: Bool?

    /// Percentiles by the nearest-rank method over `samples` (nanoseconds). Throws for an empty set.
    public init(name: String, nanoseconds samples: [UInt64], targetP99Milliseconds: Double?) throws(BenchmarkError) {
        guard !samples.isEmpty else {
            throw BenchmarkError(.operationFailed, "\(name): no samples were taken")
        }
        let sorted = samples.sorted()
        func percentile(_ p: Double) -> Double {
            let rank = max(1, Int((p / 100 * Double(sorted.count)).rounded(.up)))
            return Double(sorted[min(rank, sorted.count) - 1]) / 1e6
        }
        self.name = name
        self.samples = samples.count
        let p99 = percentile(99)
        p50Milliseconds = percentile(50)
        p99Milliseconds = p99
        maxMilliseconds = Double(sorted[sorted.count - 1]) / 1e6
        self.targetP99Milliseconds = targetP99Milliseconds
        ratio = targetP99Milliseconds.map { $0 / max(p99, 1e-6) }
        meetsTarget = targetP99Milliseconds.map { p99 <= $0 }
    }

    /// A table row: name, p50, p99, target, ratio.
    public var row: String {
        let target = targetP99Milliseconds.map { String(format: "%.1f", $0) } ?? "-"
        let ratio = ratio.map { String(format: "%.2f", $0) } ?? "-"
        let verdict = meetsTarget.map { $0 ? "ok" : "ABOVE" } ?? ""
        return BenchmarkReport.Table.pad(name, 40)
            + BenchmarkReport.Table.padLeft(String(format: "%.3f", p50Milliseconds), 10)
            + BenchmarkReport.Table.padLeft(String(format: "%.3f", p99Milliseconds), 10)
            + BenchmarkReport.Table.padLeft(target, 9) + BenchmarkReport.Table.padLeft(ratio, 8) + "  " + verdict
    }

    public static let header =
        BenchmarkReport.Table.pad("figure", 40) + BenchmarkReport.Table.padLeft("p50 ms", 10)
        + BenchmarkReport.Table.padLeft("p99 ms", 10) + BenchmarkReport.Table.padLeft("target", 9)
        + BenchmarkReport.Table.padLeft("ratio", 8)
}

/// What `orchard bench instore` prints as JSON on stdout.
public struct InStoreBenchmarkReport: Sendable, Codable {
    public let suite: String
    /// `"release"` or `"debug"`: only release figures mean anything.
    public let build: String
    public let taps: Int
    public let approved: Int
    public let seconds: Double
    public let tapsPerSecond: Double
    public let figures: [LatencyFigure]

    public init(taps: Int, approved: Int, seconds: Double, figures: [LatencyFigure]) {
        suite = "instore"
        build = BenchmarkReport.buildConfiguration
        self.taps = taps
        self.approved = approved
        self.seconds = seconds
        tapsPerSecond = seconds > 0 ? Double(taps) / seconds : 0
        self.figures = figures
    }

    /// Gated figures above their target.
    public var failures: [LatencyFigure] { figures.filter { $0.meetsTarget == false } }
}

/// Measures how long a durable write takes on the file system of `directory`: 4 KiB written at offset 0 of a
/// probe file, then `fsync`, as SQLite's `synchronous=FULL` commit does once per transaction.
public final class FsyncProbe: @unchecked Sendable {
    // Only used from one task at a time (the benchmark loop).
    private let descriptor: Int32
    private let path: String
    private let page = [UInt8](repeating: 0xA5, count: 4096)

    public init(directory: String) throws(BenchmarkError) {
        path = directory + "/fsync-probe.bin"
        descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw BenchmarkError(.invalidConfiguration, "cannot create the fsync probe in \(directory)")
        }
    }

    deinit {
        close(descriptor)
        unlink(path)
    }

    /// One write + fsync, in nanoseconds.
    public func measure() throws(BenchmarkError) -> UInt64 {
        let start = DispatchTime.now().uptimeNanoseconds
        let written = page.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        guard written == page.count, fsync(descriptor) == 0 else {
            throw BenchmarkError(.operationFailed, "the fsync probe's write failed")
        }
        return DispatchTime.now().uptimeNanoseconds - start
    }
}
