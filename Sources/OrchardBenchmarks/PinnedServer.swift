import Foundation
import OrchardHTTP
import OrchardRuntime
import OrchardServices

/// Where an end-to-end benchmark's server runs, and so which CPU it counts.
public enum ServerPlacement: Sendable, Equatable {
    /// In the benchmark's process, sharing every core with the load generator: a figure of the whole machine.
    case inProcess
    /// `orchard serve` as its own process (the executable at this path) on the last core, the load generator on
    /// the others, as `bench http` keeps wrk off the server's core: the rate is the server's alone, its CPU is
    /// read from `/proc`, and the ceiling is one core's. Needs two cores or more.
    case ownCore(executable: String)

    /// The placement `orchard bench …` uses: its own core when this process is the `orchard` executable and the
    /// machine has two cores or more, else in this process (a test runner calling the command in-process).
    public static func preferred() -> ServerPlacement {
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
        guard ProcessInfo.processInfo.activeProcessorCount >= 2,
            URL(fileURLWithPath: executable).lastPathComponent == "orchard"
        else { return .inProcess }
        return .ownCore(executable: executable)
    }
}

/// One service of a deployment run by `orchard serve` in a child process restricted to the machine's last core,
/// while this process's threads (the load generator) are restricted to the others until ``stop()``.
final class PinnedServer: Sendable {
    let process: Subprocess
    let cpu: Int
    let generatorCPUs: [Int]

    /// Starts `service` of `directory` and waits (up to 30 s) for its run record.
    static func start(
        _ service: ServiceName, executable: String, directory: DeploymentDirectory, environment: [String: String] = [:]
    ) async throws -> PinnedServer {
        let cores = ProcessInfo.processInfo.activeProcessorCount
        guard cores >= 2 else {
            throw BenchmarkError(.invalidConfiguration, "a server on its own core needs two cores or more")
        }
        let cpu = cores - 1
        let stderr = directory.path + "/\(service.rawValue)-bench.stderr"
        // Spawned from a thread restricted to the server's core: the child inherits the restriction.
        let process = try ThreadAffinity.withThreads(on: [cpu]) {
            try Subprocess(
                executable, ["serve", service.rawValue, "--data-dir", directory.path], environment: environment,
                stderrPath: stderr)
        }
        let server = PinnedServer(process: process, cpu: cpu, generatorCPUs: Array(0..<cpu))
        for _ in 0..<1200 {
            guard process.isRunning else {
                let reason = (try? String(contentsOfFile: stderr, encoding: .utf8)) ?? ""
                throw BenchmarkError(
                    .operationFailed, "orchard serve \(service) ended while starting: \(reason.suffix(300))")
            }
            if let record = try? directory.runningService(service), record.pid == process.pid {
                guard ThreadAffinity.pinProcess(to: server.generatorCPUs) else {
                    await server.stop()
                    throw BenchmarkError(.operationFailed, "cannot keep the load generator off CPU \(cpu)")
                }
                return server
            }
            try await Task.sleep(for: .milliseconds(25))
        }
        await server.stop()
        throw BenchmarkError(.operationFailed, "orchard serve \(service) did not start in 30 s")
    }

    private init(process: Subprocess, cpu: Int, generatorCPUs: [Int]) {
        self.process = process
        self.cpu = cpu
        self.generatorCPUs = generatorCPUs
    }

    /// The server process's CPU time so far (user + system, every thread), to the nanosecond, from the kernel's CPU
    /// clock of that process: `/proc/<pid>/stat` counts 10 ms ticks, coarse beside a round of the exchange.
    func cpuSeconds() throws -> Double {
        var clock = clockid_t()
        var now = timespec()
        guard clock_getcpuclockid(process.pid, &clock) == 0, clock_gettime(clock, &now) == 0 else {
            throw BenchmarkError(.operationFailed, "cannot read the CPU clock of process \(process.pid)")
        }
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    /// Stops the server (SIGTERM, then SIGKILL after 10 s) and gives this process's threads every core back.
    func stop() async {
        ThreadAffinity.releaseProcess()
        process.send(SIGTERM)
        if await process.exit(within: 10) == nil {
            process.send(SIGKILL)
            _ = await process.exit()
        }
    }
}

/// Runs `body` with `directory`'s Pay server placed as `placement` says (started in this process, or on its own
/// core), and the server's handle when it has its own process; stops it however `body` ends.
func withPayServer<T>(
    _ placement: ServerPlacement, directory: DeploymentDirectory, registry: ServiceRegistry,
    _ body: (ServiceConnections, PinnedServer?) async throws -> T
) async throws -> T {
    var server: PinnedServer?
    if case .ownCore(let executable) = placement {
        server = try await PinnedServer.start(.pay, executable: executable, directory: directory)
    }
    let services: ServiceConnections
    do {
        // With the server running, `connect` finds its run record; otherwise it starts one in this process.
        services = try await ServiceConnections.connect([.pay], directory: directory, registry: registry)
    } catch {
        await server?.stop()
        throw error
    }
    let result: Result<T, any Error>
    do {
        result = .success(try await body(services, server))
    } catch {
        result = .failure(error)
    }
    await services.close()
    await server?.stop()
    return try result.get()
}

extension PinnedServer? {
    /// What a result says of where its server ran.
    var placementDescription: String {
        guard let self else { return "in the benchmark's process, sharing every core with the load generator" }
        return "its own process on CPU \(self.cpu); the load generator on CPU "
            + self.generatorCPUs.map(String.init).joined(separator: ",")
    }
}
