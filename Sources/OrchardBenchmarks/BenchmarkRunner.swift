internal import Foundation
public import OrchardCrypto

/// The smallest, median and largest of a figure's per-round values: how much a run's rounds spread.
public struct BenchmarkSpread: Sendable, Codable, Equatable {
    public let min: Double
    public let median: Double
    public let max: Double

    /// The spread of `values`; nil when there are none.
    public init?(_ values: [Double]) {
        guard let low = values.min(), let high = values.max() else { return nil }
        min = low
        median = BenchmarkRunner.median(values)
        max = high
    }
}

/// The measured outcome of one figure.
public struct BenchmarkResult: Sendable, Codable, Equatable {
    public let name: String
    /// Median over the rounds of the Swift API's operations per second.
    public let swiftOpsPerSecond: Double
    /// Median over the rounds of the baseline's operations per second, if the figure has one.
    public let rawOpsPerSecond: Double?
    /// Median over the rounds of `swift / raw` measured in the same round (robust to load that comes and goes).
    public let ratio: Double?
    public let minimumRatio: Double?
    /// Whether `ratio` reaches `minimumRatio` (nil for figures without a minimum).
    public let meetsMinimum: Bool?
    /// How many interleaved Swift/raw rounds were timed.
    public let rounds: Int
    /// The per-round ratios' smallest, median and largest (nil for figures without a baseline).
    public let ratioSpread: BenchmarkSpread?

    public init(
        name: String, swiftOpsPerSecond: Double, rawOpsPerSecond: Double?, ratio: Double?, minimumRatio: Double?,
        meetsMinimum: Bool?, rounds: Int, ratioSpread: BenchmarkSpread? = nil
    ) {
        self.name = name
        self.swiftOpsPerSecond = swiftOpsPerSecond
        self.rawOpsPerSecond = rawOpsPerSecond
        self.ratio = ratio
        self.minimumRatio = minimumRatio
        self.meetsMinimum = meetsMinimum
        self.rounds = rounds
        self.ratioSpread = ratioSpread
    }
}

/// Times figures: calibrates a batch size per side, then alternates Swift and raw batches in rounds until
/// the figure's time is spent, so both sides see the same machine conditions. Reports medians, and the ratios'
/// spread over the rounds.
public struct BenchmarkRunner: Sendable {
    /// Wall time spent on each figure (both sides together, calibration included; at least three rounds).
    public let secondsPerFigure: Double
    private let clock: any MonotonicClock
    private let wallClock: any MonotonicClock

    /// `clock` times the batches and defaults to the benchmark thread's CPU time, so other processes
    /// competing for the cores (builds on a shared 2-core machine) change the figures less than they change
    /// wall time. `wallClock` bounds the time each figure takes.
    public init(
        secondsPerFigure: Double, clock: any MonotonicClock = ThreadCPUClock(),
        wallClock: any MonotonicClock = SystemClock()
    ) {
        self.secondsPerFigure = secondsPerFigure
        self.clock = clock
        self.wallClock = wallClock
    }

    /// Cross-checks and measures `figure`.
    public func measure(_ figure: BenchmarkFigure) throws -> BenchmarkResult {
        guard secondsPerFigure > 0 else {
            throw BenchmarkError(.invalidConfiguration, "the time per figure must be positive")
        }
        try figure.crossCheck?()
        let budget = UInt64(secondsPerFigure * 1e9)
        let start = wallClock.nanoseconds()
        let sides = figure.raw == nil ? 1 : 2
        // About 10 % of the time calibrates (and warms up); each round then runs each side for ~1/20 of the rest.
        let batchTarget = max(UInt64(Double(budget) * 0.9 / Double(20 * sides)), 1_000_000)
        let swiftBatch = try calibrate(figure.swift, target: batchTarget)
        let rawBatch = try figure.raw.map { raw throws in try calibrate(raw, target: batchTarget) }

        var swiftRates: [Double] = []
        var rawRates: [Double] = []
        var ratios: [Double] = []
        var round = 0
        repeat {
            // Alternate which side goes first so neither always runs on a warmer or cooler machine.
            var swiftRate = 0.0
            var rawRate: Double?
            let order = round % 2 == 0 ? [true, false] : [false, true]
            for swiftSide in order {
                if swiftSide {
                    swiftRate = try rate(figure.swift, iterations: swiftBatch)
                } else if let raw = figure.raw, let rawBatch {
                    rawRate = try rate(raw, iterations: rawBatch)
                }
            }
            swiftRates.append(swiftRate)
            if let rawRate {
                rawRates.append(rawRate)
                ratios.append(swiftRate / rawRate)
            }
            round += 1
        } while wallClock.nanoseconds() - start < budget || round < 3

        let ratio = ratios.isEmpty ? nil : Self.median(ratios)
        return BenchmarkResult(
            name: figure.name, swiftOpsPerSecond: Self.median(swiftRates),
            rawOpsPerSecond: rawRates.isEmpty ? nil : Self.median(rawRates), ratio: ratio,
            minimumRatio: figure.minimumRatio,
            meetsMinimum: figure.minimumRatio.flatMap { minimum in ratio.map { $0 >= minimum } }, rounds: round,
            ratioSpread: BenchmarkSpread(ratios))
    }

    /// Runs each side of `figure` for `iterations` operations, untimed: proves a figure works (for tests).
    public static func smokeTest(_ figure: BenchmarkFigure, iterations: Int = 2) throws {
        try figure.crossCheck?()
        try figure.swift(iterations)
        try figure.raw?(iterations)
    }

    /// The batch size that takes about `target` nanoseconds (doubling from 1; also warms caches up).
    private func calibrate(_ body: @Sendable (Int) throws -> Void, target: UInt64) throws -> Int {
        var iterations = 1
        while true {
            let begin = clock.nanoseconds()
            try body(iterations)
            let elapsed = clock.nanoseconds() - begin
            if elapsed >= target / 4 || iterations >= 1 << 30 {
                let scaled = Double(iterations) * Double(target) / Double(max(elapsed, 1))
                return max(1, Int(scaled.rounded()))
            }
            iterations *= 2
        }
    }

    private func rate(_ body: @Sendable (Int) throws -> Void, iterations: Int) throws -> Double {
        let begin = clock.nanoseconds()
        try body(iterations)
        let elapsed = clock.nanoseconds() - begin
        return Double(iterations) * 1e9 / Double(max(elapsed, 1))
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }
}

/// The CPU time consumed by the calling thread (`CLOCK_THREAD_CPUTIME_ID`), in nanoseconds. Monotonic for
/// one thread; the runner reads it only from the thread that runs the figure.
public struct ThreadCPUClock: MonotonicClock {
    public init() {}

    public func nanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}
