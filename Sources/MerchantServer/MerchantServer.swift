import Foundation
import OrchardRuntime
import OrchardServices

/// TEMPORARY until OrchardHTTP lands on main: the merchant server instance.
final class MerchantServer: ServiceInstance {
    init(configuration: Configuration, directory: DeploymentDirectory, environment: ServiceEnvironment) throws {}
    func start() async throws -> ServiceEndpoint { throw ServicesError(.startFailed, "HTTP is not available yet") }
    func shutdown() async {}
    func forceShutdown() {}
}
