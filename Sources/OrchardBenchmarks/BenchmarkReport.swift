internal import COpenSSL
internal import Foundation

/// What `orchard bench <suite>` prints as JSON on stdout.
public struct BenchmarkReport: Sendable, Codable {
    public let suite: String
    /// `"release"` or `"debug"`: only release figures mean anything.
    public let build: String
    public let openSSLVersion: String
    public let secondsPerFigure: Double
    public let figures: [BenchmarkResult]
    /// The machine's load averages (1, 5 and 15 minutes) when the run began and when it ended: a run taken at a
    /// load above the cores' count measured a shared machine.
    public let loadAverage: LoadAverages?

    /// The 1-, 5- and 15-minute load averages before and after a run.
    public struct LoadAverages: Sendable, Codable, Equatable {
        public let atStart: [Double]
        public let atEnd: [Double]

        public init(atStart: [Double], atEnd: [Double]) {
            self.atStart = atStart
            self.atEnd = atEnd
        }
    }

    public init(
        suite: String, secondsPerFigure: Double, figures: [BenchmarkResult], loadAverage: LoadAverages? = nil
    ) {
        self.suite = suite
        self.build = Self.buildConfiguration
        self.openSSLVersion = Self.openSSL
        self.secondsPerFigure = secondsPerFigure
        self.figures = figures
        self.loadAverage = loadAverage
    }

    /// The 1-, 5- and 15-minute load averages now (`getloadavg`); nil where the system gives none.
    public static func currentLoadAverage() -> [Double]? {
        var loads = [Double](repeating: 0, count: 3)
        guard getloadavg(&loads, 3) == 3 else { return nil }
        return loads
    }

    /// Gated figures whose ratio is below their minimum.
    public var failures: [BenchmarkResult] { figures.filter { $0.meetsMinimum == false } }

    /// The configuration this code was compiled in.
    public static var buildConfiguration: String {
        #if DEBUG
            "debug"
        #else
            "release"
        #endif
    }

    /// The OpenSSL library the process runs against (`OpenSSL_version`).
    public static var openSSL: String { String(cString: OpenSSL_version(OPENSSL_VERSION)) }

    /// The readable table's lines, in three parts so a runner can print the rows as they complete.
    public enum Table {
        static let widths = (name: 46, number: 13, ratio: 7, spread: 11)

        /// The name column's width for figures named `names` (at least 46 characters).
        public static func nameWidth(for names: [String]) -> Int {
            max(widths.name, (names.map(\.count).max() ?? 0) + 2)
        }

        public static func header(
            suite: String, secondsPerFigure: Double, nameWidth: Int = 46, loadAverage: [Double]? = nil
        ) -> String {
            var lines = [
                "orchard bench \(suite): \(buildConfiguration) build, \(openSSL), "
                    + "\(String(format: "%g", secondsPerFigure)) s per figure; op/s in thread CPU time, medians of "
                    + "interleaved rounds" + (loadAverage.map { "; load average " + Self.loads($0) } ?? "")
            ]
            if buildConfiguration == "debug" {
                lines.append(
                    "warning: a debug build measures the compiler's debug code; run `swift build -c release` first")
            }
            lines.append(
                pad("figure", nameWidth) + padLeft("swift op/s", widths.number) + padLeft("raw op/s", widths.number)
                    + padLeft("ratio", widths.ratio) + padLeft("min-max", widths.spread) + "  minimum")
            return lines.joined(separator: "\n")
        }

        public static func row(_ result: BenchmarkResult, nameWidth: Int = 46) -> String {
            let raw = result.rawOpsPerSecond.map(grouped) ?? "-"
            let ratio = result.ratio.map { String(format: "%.2f", $0) } ?? "-"
            var verdict = ""
            if let minimum = result.minimumRatio {
                verdict = String(format: "  %.2f ", minimum) + (result.meetsMinimum == true ? "ok" : "BELOW")
            }
            let spread = result.ratioSpread.map { String(format: "%.2f-%.2f", $0.min, $0.max) } ?? "-"
            return pad(result.name, nameWidth) + padLeft(grouped(result.swiftOpsPerSecond), widths.number)
                + padLeft(raw, widths.number) + padLeft(ratio, widths.ratio) + padLeft(spread, widths.spread) + verdict
        }

        /// Load averages as `0.42 0.55 0.60`.
        static func loads(_ values: [Double]) -> String {
            values.map { String(format: "%.2f", $0) }.joined(separator: " ")
        }

        public static func footer(_ report: BenchmarkReport) -> String {
            let gated = report.figures.filter { $0.minimumRatio != nil }
            let failures = report.failures
            let load = report.loadAverage.map { "; load average at the end " + loads($0.atEnd) } ?? ""
            if gated.isEmpty { return "\(report.figures.count) figures" + load }
            if failures.isEmpty {
                return "\(report.figures.count) figures; all \(gated.count) gated ratios reach their minimum" + load
            }
            return "\(report.figures.count) figures; below the minimum: "
                + failures.map(\.name).joined(separator: ", ") + load
        }

        static func grouped(_ value: Double) -> String {
            // Thousands separated by spaces; no locale involved.
            let digits = String(Int(value.rounded()))
            var out = ""
            for (i, c) in digits.reversed().enumerated() {
                if i > 0, i % 3 == 0 { out.append(" ") }
                out.append(c)
            }
            return String(out.reversed())
        }

        static func pad(_ text: String, _ width: Int) -> String {
            text.count >= width
                ? String(text.prefix(width - 1)) + " " : text + String(repeating: " ", count: width - text.count)
        }

        static func padLeft(_ text: String, _ width: Int) -> String {
            text.count >= width ? " " + text : String(repeating: " ", count: width - text.count) + text
        }
    }
}
