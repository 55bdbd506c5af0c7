import Foundation
import OrchardRuntime
import OrchardServices

/// The deployment an end-to-end benchmark runs in: initialised in a fresh temporary directory, which is removed at
/// the end, with `services` started in this process and closed however `body` ends.
///
/// `options` may put the server parties on PostgreSQL (``DeploymentInitializer/Options/databases``).
func withThrowawayDeployment<T>(
    named name: String, registry: ServiceRegistry, services: [ServiceName],
    options: DeploymentInitializer.Options = DeploymentInitializer.Options(),
    configure: (inout Configuration) throws -> Void = { _ in },
    _ body: (DeploymentDirectory, ServiceConnections) async throws -> T
) async throws -> T {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent(
        "orchard-bench-\(name)-\(UUID().uuidString)"
    ).path
    defer { try? FileManager.default.removeItem(atPath: path) }
    let deployment = DeploymentDirectory(path: path)
    _ = try await DeploymentInitializer.initialize(deployment, registry: registry, options: options)
    var configuration = try deployment.loadConfiguration(schema: registry.schema, environment: [:])
    try configure(&configuration)
    try deployment.writeConfiguration(configuration)
    let connections = try await ServiceConnections.connect(services, directory: deployment, registry: registry)
    do {
        let result = try await body(deployment, connections)
        await connections.close()
        return result
    } catch {
        await connections.close()
        throw error
    }
}
