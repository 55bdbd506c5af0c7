import Foundation
import OrchardBenchmarks

/// `orchard bench instore`: its options and its table; the harness is ``InStoreBenchmark`` in OrchardBenchmarks.
enum InStoreBench {
    static let command = Command(
        name: "instore",
        summary: "Taps per second end to end, p50/p99 of the APDU exchange and of tap → authorization response.",
        discussion: """
            Run from a release build: swift build -c release && .build/release/orchard bench instore. Makes a \
            deployment in a temporary directory (removed at the end), runs the network service, a phone and a \
            terminal in this process, and charges 1.00 USD again and again. Reports taps per second, p50 and \
            p99 of each APDU round trip at the reader (target p99 ≤ 5 ms), of tap → authorization response (the \
            whole charge, target p99 ≤ 50 ms), and of a 4 KiB write + fsync in the device store's directory, \
            measured between the taps of the same run. Then starts the phone five times as its own process \
            (`orchard device run`) and times each start to its first tap answered (target ≤ 200 ms). A ratio is \
            target / p99: 1 or more meets the target.
            """,
        options: [seconds, taps, requireTargets]
    ) { arguments, context in
        let report = try await InStoreBenchmark.run(
            seconds: arguments[seconds], maxTaps: arguments[taps], registry: try DeploymentCommands.registry(),
            terminalGateway: { settings, deployment, policy in
                _ = try TerminalCommands.issueClientIdentity(settings, deployment)
                return try TerminalCommands.gateway(settings, deployment, policy: policy)
            },
            deviceExecutable: URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path,
            trace: { context.trace($0) })
        context.trace(
            "orchard bench instore: \(report.build) build, \(report.taps) taps (\(report.approved) approved) in "
                + String(format: "%.1f s: %.1f taps/s", report.seconds, report.tapsPerSecond))
        context.trace(LatencyFigure.header)
        for figure in report.figures { context.trace(figure.row) }
        try context.outputJSON(report)
        if arguments[requireTargets], !report.failures.isEmpty {
            throw CLIError.failure("above the target: " + report.failures.map(\.name).joined(separator: ", "))
        }
    }

    static let seconds = Option.withDefault(
        "seconds", "N", default: 10.0, defaultText: "10", help: "How long to charge."
    ) { text throws(CLIError) in
        guard let seconds = Double(text), seconds >= 0.1, seconds <= 600 else {
            throw CLIError.usage("--seconds takes a number of seconds from 0.1 to 600")
        }
        return seconds
    }
    static let taps = Option.integer("taps", default: 5000, range: 1...1_000_000, help: "Stop after N taps.")
    static let requireTargets = Option.flag(
        "require-targets", help: "Exit 1 when a figure's p99 is above its target.")
}
