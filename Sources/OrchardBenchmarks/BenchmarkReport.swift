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

    public init(suite: String, secondsPerFigure: Double, figures: [BenchmarkResult]) {
        self.suite = suite
        self.build = Self.buildConfiguration
        self.openSSLVersion = Self.openSSL
        self.secondsPerFigure = secondsPerFigure
        self.figures = figures
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
        static let widths = (name: 46, number: 13, ratio: 7)

        /// The name column's width for figures named `names` (at least 46 characters).
        public static func nameWidth(for names: [String]) -> Int {
            max(widths.name, (names.map(\.count).max() ?? 0) + 2)
        }

        public static func header(suite: String, secondsPerFigure: Double, nameWidth: Int = 46) -> String {
            var lines = [
                "orchard bench \(suite): \(buildConfiguration) build, \(openSSL), "
                    + "\(String(format: "%g", secondsPerFigure)) s per figure; op/s in thread CPU time, medians of "
                    + "interleaved rounds"
            ]
            if buildConfiguration == "debug" {
                lines.append(
                    "warning: a debug build measures the compiler's debug code; run `swift build -c release` first")
            }
            lines.append(
                pad("figure", nameWidth) + padLeft("swift op/s", widths.number) + padLeft("raw op/s", widths.number)
                    + padLeft("ratio", widths.ratio) + "  minimum")
            return lines.joined(separator: "\n")
        }

        public static func row(_ result: BenchmarkResult, nameWidth: Int = 46) -> String {
            let raw = result.rawOpsPerSecond.map(grouped) ?? "-"
            let ratio = result.ratio.map { String(format: "%.2f", $0) } ?? "-"
            var verdict = ""
            if let minimum = result.minimumRatio {
                verdict = String(format: "  %.2f ", minimum) + (result.meetsMinimum == true ? "ok" : "BELOW")
            }
            return pad(result.name, nameWidth) + padLeft(grouped(result.swiftOpsPerSecond), widths.number)
                + padLeft(raw, widths.number) + padLeft(ratio, widths.ratio) + verdict
        }

        public static func footer(_ report: BenchmarkReport) -> String {
            let gated = report.figures.filter { $0.minimumRatio != nil }
            let failures = report.failures
            if gated.isEmpty { return "\(report.figures.count) figures" }
            if failures.isEmpty {
                return "\(report.figures.count) figures; all \(gated.count) gated ratios reach their minimum"
            }
            return "\(report.figures.count) figures; below the minimum: "
                + failures.map(\.name).joined(separator: ", ")
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
