import Foundation
import OrchardBenchmarks
import OrchardCrypto
import Testing

@Suite("Benchmarks")
struct BenchmarkTests {
    /// Each crypto figure runs a couple of operations on both sides and its cross-check passes (no timing).
    @Test func everyCryptoFigureWorks() throws {
        let figures = try CryptoBenchmarks.figures()
        #expect(Set(figures.map(\.name)).count == figures.count)
        for figure in figures {
            try BenchmarkRunner.smokeTest(figure, iterations: 2)
            #expect(figure.raw != nil, "\(figure.name) has no C baseline")
        }
        let gated = figures.filter { $0.minimumRatio == CryptoBenchmarks.requiredRatio }.map(\.name)
        #expect(gated.contains { $0.hasPrefix("ECDH") })
        #expect(gated.contains { $0.hasPrefix("ECDSA P-256 verify") })
        #expect(gated.contains { $0.contains("GCM seal") } && gated.contains { $0.contains("GCM open") })
    }

    /// The token figures run on both sides (verify + decrypt, and the ceiling) without timing.
    @Test func everyTokenFigureWorks() throws {
        let figures = try TokenBenchmarks.figures()
        #expect(figures.count == 8)
        for figure in figures {
            try BenchmarkRunner.smokeTest(figure, iterations: 2)
        }
        // EC_v1 and RSA_v1, chain cached and verified every time, against their ceilings.
        #expect(figures.filter { $0.minimumRatio == TokenBenchmarks.requiredRatio }.count == 4)
        // Unknown chains and bad signatures, seen before and not, against a good token with its chain cached.
        #expect(figures.filter { $0.minimumRatio == TokenBenchmarks.rejectionRatio }.count == 4)
    }

    /// The runner on virtual time: the Swift side "costs" 1 µs per operation, the raw side 0.8 µs, so the
    /// medians and the ratio are exact (up to the clock's nanosecond rounding), and a 0.9 minimum is missed.
    @Test func runnerComputesRatesAndRatiosOnVirtualTime() throws {
        let clock = ManualClock(now: Date(timeIntervalSince1970: 0))
        let figure = BenchmarkFigure(
            name: "virtual", minimumRatio: 0.9,
            swift: { clock.advance(by: Double($0) * 1e-6) },
            raw: { clock.advance(by: Double($0) * 0.8e-6) })
        let result = try BenchmarkRunner(secondsPerFigure: 0.5, clock: clock, wallClock: clock).measure(figure)
        #expect(abs(result.swiftOpsPerSecond - 1_000_000) < 1)
        #expect(abs((result.rawOpsPerSecond ?? 0) - 1_250_000) < 1)
        #expect(abs((result.ratio ?? 0) - 0.8) < 1e-6)
        #expect(result.meetsMinimum == false)
        #expect(result.rounds >= 3)
        // Every round's ratio is 0.8 here: no spread.
        let spread = try #require(result.ratioSpread)
        #expect(abs(spread.min - 0.8) < 1e-6 && abs(spread.median - 0.8) < 1e-6 && abs(spread.max - 0.8) < 1e-6)

        let fast = BenchmarkFigure(
            name: "fast", minimumRatio: 0.9, swift: { clock.advance(by: Double($0) * 1e-6) },
            raw: { clock.advance(by: Double($0) * 1e-6) })
        #expect(
            try BenchmarkRunner(secondsPerFigure: 0.5, clock: clock, wallClock: clock).measure(fast).meetsMinimum
                == true)
    }

    @Test func aFailingFigureIsAnErrorNotANumber() {
        let figure = BenchmarkFigure(
            name: "broken", swift: { _ in throw BenchmarkError(.operationFailed, "nope") },
            raw: { _ in })
        let error = #expect(throws: BenchmarkError.self) { try BenchmarkRunner.smokeTest(figure) }
        #expect(error?.code == .operationFailed)
        #expect(throws: BenchmarkError.self) {
            try BenchmarkRunner(secondsPerFigure: 0).measure(figure)
        }
    }

    @Test func spreadIsTheRoundsSmallestMedianAndLargest() throws {
        let odd = try #require(BenchmarkSpread([0.91, 0.84, 0.88]))
        #expect(odd == BenchmarkSpread([0.84, 0.88, 0.91]) && odd.min == 0.84 && odd.median == 0.88 && odd.max == 0.91)
        let even = try #require(BenchmarkSpread([1, 4, 2, 3]))
        #expect(even.min == 1 && even.median == 2.5 && even.max == 4)
        #expect(BenchmarkSpread([]) == nil)
        // The machine's load, as the kernel gives it.
        let load = try #require(BenchmarkReport.currentLoadAverage())
        #expect(load.count == 3 && load.allSatisfy { $0 >= 0 })
    }

    @Test func reportTableAndJSON() throws {
        let result = BenchmarkResult(
            name: "ECDH P-256 (parsed keys)", swiftOpsPerSecond: 12_345.6, rawOpsPerSecond: 13_000, ratio: 0.95,
            minimumRatio: 0.9, meetsMinimum: true, rounds: 20, ratioSpread: BenchmarkSpread([0.93, 0.95, 0.97]))
        let slow = BenchmarkResult(
            name: "slow", swiftOpsPerSecond: 1, rawOpsPerSecond: 2, ratio: 0.5, minimumRatio: 0.9, meetsMinimum: false,
            rounds: 3)
        let row = BenchmarkReport.Table.row(result)
        #expect(row.contains("12 346") && row.contains("13 000") && row.contains("0.95") && row.hasSuffix("ok"))
        #expect(row.contains(" 0.93-0.97 "))
        #expect(BenchmarkReport.Table.row(slow).hasSuffix("BELOW") && BenchmarkReport.Table.row(slow).contains(" - "))
        let header = BenchmarkReport.Table.header(suite: "crypto", secondsPerFigure: 1, loadAverage: [0.42, 0.5, 1])
        #expect(header.contains("load average 0.42 0.50 1.00") && header.contains("min-max"))
        // Long names widen the column instead of being cut.
        let long = String(repeating: "x", count: 60)
        let width = BenchmarkReport.Table.nameWidth(for: ["short", long])
        #expect(width == 62)
        #expect(BenchmarkReport.Table.row(slow, nameWidth: width).hasPrefix("slow" + String(repeating: " ", count: 58)))
        let report = BenchmarkReport(
            suite: "crypto", secondsPerFigure: 1, figures: [result, slow],
            loadAverage: .init(atStart: [0.3, 0.4, 0.5], atEnd: [1.6, 0.9, 0.6]))
        #expect(report.failures.map(\.name) == ["slow"])
        #expect(BenchmarkReport.Table.footer(report).contains("slow"))
        #expect(BenchmarkReport.Table.footer(report).hasSuffix("load average at the end 1.60 0.90 0.60"))
        let decoded = try JSONDecoder().decode(BenchmarkReport.self, from: JSONEncoder().encode(report))
        #expect(decoded.figures == report.figures && decoded.loadAverage == report.loadAverage)
        #expect(decoded.figures[0].ratioSpread?.max == 0.97)
        #expect(decoded.openSSLVersion.hasPrefix("OpenSSL 3"))
    }
}
