import Foundation
import MerchantServer
import OrchardRuntime
import OrchardServices
import PayServer

/// `orchard init`, `orchard serve <service>` and `orchard up`: create a deployment and run its services.
enum DeploymentCommands {
    /// The services of a deployment, one line each, in init and start order (the Pay server before the
    /// merchant: the merchant's init step asks it for certificates).
    static func registry() throws(CLIError) -> ServiceRegistry {
        do {
            return try ServiceRegistry([
                PayService(),
                MerchantService(),
            ])
        } catch {
            throw CLIError.failure(error.message)
        }
    }

    static let initCommand = Command(
        name: "init",
        summary: "Create a complete local deployment in --data-dir (keys, certificates, demo data, ports).",
        discussion: """
            DIR must be missing or empty; a non-empty DIR is replaced only with --force (never while one of its
            services runs). Creates the Orchard root CA, a TLS certificate per service for 127.0.0.1/localhost,
            the Pay server's token-signing chain, the device CA, the demo account, the demo merchant
            merchant.dev.orchard.demo with its payment processing and identity certificates, the demo app
            dev.orchard.demo-app entitled for it, and free ports (or --base-port N, N+1, ...) in config.json.
            Keys are written 0600 and DIR is 0700. Prints a JSON summary on stdout.
            """,
        options: [
            .flag("force", help: "Replace what DIR holds (its keys and databases are lost)."),
            .single("base-port", "N", help: "Give the services fixed ports N, N+1, ... instead of free ones."),
        ]
    ) { arguments, context in
        let directory = DeploymentDirectory(path: context.dataDirectory.path)
        let basePort: Int? =
            arguments.value("base-port") == nil
            ? nil : try arguments.integer("base-port", default: 0, in: 1...65535)
        let summary = try await initialize(
            directory, options: .init(force: arguments.flag("force"), basePort: basePort), context: context)
        try context.outputJSON(summary)
    }

    /// Initialises `directory` with the standard services, tracing each step on stderr.
    static func initialize(
        _ directory: DeploymentDirectory, options: DeploymentInitializer.Options, context: CommandContext
    ) async throws -> DeploymentInitializer.Summary {
        let registry = try registry()
        do {
            context.trace("initialising \(directory)")
            return try await DeploymentInitializer.initialize(
                directory, registry: registry, options: options, trace: { context.trace("  " + $0) })
        } catch {
            throw CLIError.failure(error.message)
        }
    }
}
