import Foundation
import OrchardBenchmarks

/// `orchard bench <suite>`: one subcommand per ``BenchmarkSuites/all`` entry. The table goes to stderr as
/// figures complete; the JSON report goes to stdout at the end.
enum BenchCommands {
    /// The default total time of a suite; each figure gets an equal share, at most 10 s.
    static let defaultBudgetSeconds = 110.0

    static let command = Command(
        name: "bench",
        summary: "Measure Orchard's primitives against C baselines (build with `swift build -c release` first).",
        subcommands: BenchmarkSuites.all.map(suiteCommand) + [
            named("emv", EMVCommands.bench), named("http", HTTPCommands.bench), InStoreBench.command,
            InAppBenchCommand.command, SessionBenchCommand.command, OverloadBenchCommand.command,
            ScaleBenchCommand.command, HandoffBenchCommand.command,
        ]
    )

    /// Benchmarks that live with their command group, offered here too so every benchmark is `orchard bench …`.
    static func named(_ name: String, _ command: Command) -> Command {
        guard let run = command.run else { return command }
        return Command(
            name: name, summary: command.summary, discussion: command.discussion, options: command.options,
            positionals: command.positionals, run: run)
    }

    static func suiteCommand(_ suite: BenchmarkSuite) -> Command {
        Command(
            name: suite.name,
            summary: suite.summary,
            discussion: """
                Each figure is measured through the Swift API and through its baseline in alternating rounds; \
                the table reports median operations per second and the median Swift/raw ratio. By default the \
                whole run takes at most about 2 minutes.
                """,
            options: [seconds, filter, requireRatios]
        ) { arguments, context in
            var figures = try suite.makeFigures()
            let filters = arguments[filter].map { $0.lowercased() }
            if !filters.isEmpty {
                figures = figures.filter { figure in filters.contains { figure.name.lowercased().contains($0) } }
                guard !figures.isEmpty else {
                    throw CLIError.usage("no figure matches \(filters.joined(separator: ", "))")
                }
            }
            let seconds = arguments[Self.seconds] ?? min(10, defaultBudgetSeconds / Double(max(figures.count, 1)))
            let runner = BenchmarkRunner(secondsPerFigure: seconds)
            let nameWidth = BenchmarkReport.Table.nameWidth(for: figures.map(\.name))
            let loadAtStart = BenchmarkReport.currentLoadAverage()
            context.trace(
                BenchmarkReport.Table.header(
                    suite: suite.name, secondsPerFigure: seconds, nameWidth: nameWidth, loadAverage: loadAtStart))
            var results: [BenchmarkResult] = []
            for figure in figures {
                let result = try runner.measure(figure)
                context.trace(BenchmarkReport.Table.row(result, nameWidth: nameWidth))
                results.append(result)
            }
            let loadAtEnd = BenchmarkReport.currentLoadAverage()
            let report = BenchmarkReport(
                suite: suite.name, secondsPerFigure: seconds, figures: results,
                loadAverage: loadAtStart.flatMap { start in
                    loadAtEnd.map { BenchmarkReport.LoadAverages(atStart: start, atEnd: $0) }
                })
            context.trace(BenchmarkReport.Table.footer(report))
            try context.outputJSON(report)
            if arguments[requireRatios], !report.failures.isEmpty {
                throw CLIError.failure(
                    "below the minimum ratio: " + report.failures.map(\.name).joined(separator: ", "))
            }
        }
    }

    static let seconds = Option.optional(
        "seconds", "N", help: "Seconds per figure (default: 110 s shared out, at most 10 each)."
    ) { text throws(CLIError) in
        guard let seconds = Double(text), seconds.isFinite, seconds >= 0.01, seconds <= 600 else {
            throw CLIError.usage("--seconds takes a number of seconds from 0.01 to 600")
        }
        return seconds
    }
    static let filter = Option.repeatable(
        "filter", "TEXT", help: "Only figures whose name contains TEXT (case-insensitive).")
    static let requireRatios = Option.flag(
        "require-ratios", help: "Exit 1 when a gated figure's ratio is below its minimum.")
}
