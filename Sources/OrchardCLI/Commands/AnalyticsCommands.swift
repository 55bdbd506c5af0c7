import Foundation
import OrchardRuntime
import OrchardStore
import PayServer

/// `orchard analytics`: the Pay server's anonymous purchase data, aggregated.
enum AnalyticsCommands {
    static let command = Command(
        name: "analytics",
        summary: "Print the aggregates of the anonymous purchase data in --data-dir's pay.sqlite (JSON on stdout).",
        discussion: """
            Devices send the Pay server an amount bucket, the hour (UTC) and the terminal's country after each \
            in-store purchase, without their client certificate and after a random delay. The Pay server keeps \
            only counters; this prints {"purchases", "byAmountBucket", "byHour", "byRegion", "byDayAndRegion", \
            "withheld", "inAppAndWeb"}. No cell of fewer than 5 purchases is shown: a bucket × hour × region cell \
            under 5 is merged into its day × region ("byDayAndRegion"), and one still under 5 is only counted in \
            "withheld"; the Pay server folds a closed day's small cells into day × region in the file itself. \
            "inAppAndWeb" shows the Pay server's counters of accepted in-app and web payments the same way: \
            {"purchases", "byChannel", "byCurrency", "byValueBand", "byChannelAndDay", "withheld"}, a channel × \
            currency × value band × day cell under 5 merged into its channel × day. \
            It reads pay.sqlite directly, so the Pay server need not run.
            """
    ) { _, context in
        let store = try openStore(context.dataDirectory.path)
        let summary: AnonymousAnalyticsSummary
        do {
            summary = try await AnonymousAnalytics.summary(of: store)
        } catch {
            await store.close()
            throw CLIError.failure("cannot read the analytics: \(error)")
        }
        await store.close()
        context.trace("\(summary.purchases) purchases")
        try context.outputJSON(summary)
    }

    /// Synchronous, so no typed-throws call sits directly in the command's async closure.
    static func openStore(_ path: String) throws -> Store {
        let directory = DeploymentDirectory(path: path)
        guard PayStore.exists(in: directory) else {
            throw CLIError.failure("\(path) has no pay.sqlite: run `orchard init --data-dir \(path)` first")
        }
        do {
            return try PayStore.open(in: directory)
        } catch {
            throw CLIError.failure(
                "cannot open the Pay server's store: \((error as? StoreError)?.message ?? "\(error)")")
        }
    }
}
