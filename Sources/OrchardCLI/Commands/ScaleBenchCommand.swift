import Foundation
import OrchardBenchmarks

/// `orchard bench scale`: store latency as the stores grow; the harness is ``ScaleBenchmark`` in
/// OrchardBenchmarks.
enum ScaleBenchCommand {
    static let command = Command(
        name: "scale",
        summary: "Authorization and in-app store operations, p50/p99 and RSS, as the stores fill to each size.",
        discussion: """
            Checks the free disk first (about 4 KiB per row of the largest size). Fills the network's token vault
            (tokens and their idempotency records), the Pay server's payment nonces and the merchant's orders
            through each party's store code, in batches of one transaction, to each size in turn, in a new
            directory under DIR (default: the system's temporary directory), deleted afterwards. At each size it
            times SAMPLES of each figure (token by DPAN + ATC record, idempotency replay lookup, nonce issue +
            redeem, order lookup) and reads the resident set. Reports each figure's p99 at the largest size over
            its p99 at the smallest (target 1.5 or less).
            """,
        options: [sizes, samples, directory]
    ) { arguments, context in
        let parent = arguments[directory] ?? FileManager.default.temporaryDirectory.path
        let path = parent + "/orchard-bench-scale-" + UUID().uuidString
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        } catch {
            throw CLIError.failure("cannot create a directory in \(parent): choose another with --dir")
        }
        defer { try? FileManager.default.removeItem(atPath: path) }
        let report = try await ScaleBenchmark.run(
            sizes: arguments[sizes], samples: arguments[samples], directory: path, trace: context.trace)
        context.trace(
            "worst p99 growth \(report.worstGrowth)× from \(report.levels.first?.rows ?? 0) to "
                + "\(report.levels.last?.rows ?? 0) rows (target ≤ 1.5: \(report.meetsTarget ? "ok" : "ABOVE")), "
                + "load average \(report.loadAverage)")
        try context.outputJSON(report)
    }

    static let sizes = Option.withDefault(
        "sizes", "N,N,…", default: [10_000, 100_000, 1_000_000], defaultText: "10000,100000,1000000",
        help: "Rows per table to fill to, ascending."
    ) { text throws(CLIError) in
        let values = text.split(separator: ",").map { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard !values.isEmpty, values.allSatisfy({ $0 != nil && (1...10_000_000).contains($0!) }) else {
            throw CLIError.usage("--sizes takes ascending row counts from 1 to 10000000, separated by commas")
        }
        let counts = values.compactMap { $0 }
        guard counts == counts.sorted(), Set(counts).count == counts.count else {
            throw CLIError.usage("--sizes takes ascending row counts from 1 to 10000000, separated by commas")
        }
        return counts
    }
    static let samples = Option.integer(
        "samples", default: 1000, range: 1...100_000, help: "Operations timed per figure at each size.")
    static let directory = Option.optional(
        "dir", "DIR", help: "Where the throw-away stores go (default: the system's temporary directory).")
}
