// Test support for the exactly-once tests, not shipped: `orchard serve network` whose authorizations kill the
// process with SIGKILL when they pass a chosen step.
//
//   orchard-network-crasher DIR [STEP]
//
// STEP is an `AuthorizationStep` (counterRecorded, issuerAnswered, networkAnswerRecorded,
// acquirerAnswerRecorded); without it the network runs as `orchard serve network` does. The service publishes
// DIR/run/network.json like `serve`, prints "LISTENING <port>" once it listens, and stops on SIGTERM or SIGINT.
// At the step the process prints "KILLED <step>" and sends itself SIGKILL: no drain, no close, the stores as a
// crash leaves them.
import Foundation
import MerchantServer
import NetworkAuthorizationAPI
import NetworkServer
import OrchardHTTP
import OrchardLogging
import OrchardRuntime
import OrchardServices
import PayServer

#if canImport(Glibc)
    import Glibc
#endif

func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

struct KillAtStep: AuthorizationProbe {
    let step: AuthorizationStep

    func reached(_ step: AuthorizationStep, transactionID: String) async {
        guard step == self.step else { return }
        say("KILLED \(step)")
        kill(getpid(), SIGKILL)
    }
}

let arguments = CommandLine.arguments
guard (2...3).contains(arguments.count) else {
    FileHandle.standardError.write(Data("usage: orchard-network-crasher DIR [STEP]\n".utf8))
    exit(2)
}
let service: NetworkServerService
if arguments.count == 3 {
    guard let step = AuthorizationStep(rawValue: arguments[2]) else {
        FileHandle.standardError.write(Data("unknown step \(arguments[2])\n".utf8))
        exit(2)
    }
    service = NetworkServerService(authorizationProbe: KillAtStep(step: step))
} else {
    service = NetworkServerService()
}

do {
    let signals = ShutdownSignals.shared
    _ = signals
    let host = try await ServiceHost.start(
        // The deployment's whole registry, as `orchard` has it: config.json is checked against every service's keys.
        [.network], directory: DeploymentDirectory(path: arguments[1]),
        registry: try ServiceRegistry([service, PayService(), MerchantService()]),
        environment: ServiceEnvironment(variables: ProcessInfo.processInfo.environment), publish: true)
    say("LISTENING \(host.endpoint(of: .network)?.port ?? 0)")
    await host.runUntilSignalled(logger: Logger(label: "orchard-network-crasher", sink: StandardErrorLogSink.shared))
} catch {
    FileHandle.standardError.write(Data("error: \(error)\n".utf8))
    exit(1)
}
