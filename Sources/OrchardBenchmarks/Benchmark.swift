internal import Foundation

// Adding figures (e.g. certificate parsing or CMS verification):
// 1. Write the baseline in C in `Sources/CBenchmarks` (one function that runs `iterations` operations on buffers
//    and objects the caller passes in), declared in `include/CBenchmarks.h`.
// 2. In a new file here, make `BenchmarkFigure`s: prepare inputs once, then a `swift` closure calling the public
//    Swift API, a `raw` closure calling the C function (OrchardCrypto's `package` wrappers such as `EVPKey` and
//    `Fetched` give it the same OpenSSL objects), and a `crossCheck` that both compute the same result.
// 3. Either append them to an existing suite's figures or add a `BenchmarkSuite` to `BenchmarkSuites.all`:
//    `orchard bench <suite>` then exists with `--seconds`, `--filter` and `--require-ratios`.

/// One row of a benchmark: an operation measured through the Swift API and, when it has one, through a
/// "raw" baseline (the same OpenSSL calls written in C, or another ceiling) on the same inputs.
///
/// Both closures perform `iterations` complete operations and throw if any fails. Everything that is not
/// part of the measured operation (key generation, parsing, buffers) is prepared before the figure is made.
public struct BenchmarkFigure: Sendable {
    /// What is measured, e.g. `"ECDH P-256 (parsed keys)"`. Unique within a suite.
    public let name: String
    /// The lowest acceptable `swift / raw` ratio for a gated figure, or nil.
    public let minimumRatio: Double?
    /// Runs `iterations` operations through the Swift API.
    public let swift: @Sendable (_ iterations: Int) throws -> Void
    /// Runs `iterations` operations through the baseline, if the figure has one.
    public let raw: (@Sendable (_ iterations: Int) throws -> Void)?
    /// Checks once, before timing, that both sides compute the same result (throws if not).
    public let crossCheck: (@Sendable () throws -> Void)?

    public init(
        name: String, minimumRatio: Double? = nil, swift: @escaping @Sendable (_ iterations: Int) throws -> Void,
        raw: (@Sendable (_ iterations: Int) throws -> Void)? = nil, crossCheck: (@Sendable () throws -> Void)? = nil
    ) {
        self.name = name
        self.minimumRatio = minimumRatio
        self.swift = swift
        self.raw = raw
        self.crossCheck = crossCheck
    }
}

/// A named list of figures, run by `orchard bench <name>`. Figures are made lazily (keys are generated and
/// parsed only when the suite runs). New suites are added to ``BenchmarkSuites/all``.
public struct BenchmarkSuite: Sendable {
    public let name: String
    public let summary: String
    public let makeFigures: @Sendable () throws -> [BenchmarkFigure]

    public init(name: String, summary: String, makeFigures: @escaping @Sendable () throws -> [BenchmarkFigure]) {
        self.name = name
        self.summary = summary
        self.makeFigures = makeFigures
    }
}

/// Every benchmark suite; `orchard bench` offers one subcommand per entry.
public enum BenchmarkSuites {
    public static let all: [BenchmarkSuite] = [
        CryptoBenchmarks.suite,
        TokenBenchmarks.suite,
    ]
}

/// The one error type of `OrchardBenchmarks`.
public struct BenchmarkError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case operationFailed, mismatch, invalidConfiguration
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// An operation failed while it was being measured (the figure is broken, not slow).
        public static let operationFailed = Code(.operationFailed)
        /// The Swift and raw sides computed different results.
        public static let mismatch = Code(.mismatch)
        /// The runner was asked for something impossible (no time, unknown figure).
        public static let invalidConfiguration = Code(.invalidConfiguration)

        public var description: String { base.rawValue }
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
