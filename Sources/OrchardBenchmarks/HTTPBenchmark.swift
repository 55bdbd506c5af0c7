import Foundation
import OrchardHTTP
import OrchardLogging

/// What ``runHTTPBenchmark(seconds:connections:)`` measured.
public struct HTTPBenchmarkResult: Sendable, Codable {
    public let requestsPerSecond: Double
    public let p50Milliseconds: Double
    public let p99Milliseconds: Double
    /// Completed requests.
    public let requests: Int
    /// Socket errors plus non-2xx answers, as wrk counted them.
    public let errors: Int
    public let seconds: Int
    public let connections: Int
    public let serverThreads: Int
    /// CPU time the server process spent per request (user + system, handshakes included): the cost that
    /// does not depend on what else runs on the machine. 1,000,000 / this is the rate one free core allows.
    public let serverCPUMicrosecondsPerRequest: Double
    /// The command that produced the load.
    public let loadGenerator: String
}

/// Measures keep-alive HTTPS JSON POSTs per second on one server event-loop thread.
///
/// An in-process server (one loop thread pinned to CPU 0 when the machine has two or more, client
/// certificates optional, the default log level, a throwaway certificate) answers `POST /pay` by
/// decoding and encoding JSON; `wrk -t1 -cN --latency` runs on the other core (through `taskset`)
/// for `seconds`. Needs `wrk` on the PATH (scripts/bootstrap installs it).
public func runHTTPBenchmark(seconds: Int = 10, connections: Int = 64) async throws -> HTTPBenchmarkResult {
    guard let wrk = Executables.find("wrk") else {
        throw BenchmarkError(.invalidConfiguration, "wrk is not installed; run scripts/bootstrap")
    }
    struct Payment: Codable, Sendable {
        let amount: Int
        let currency: String
        let merchant: String
    }
    struct Approval: Codable, Sendable {
        let status: String
        let amount: Int
        let currency: String
        let reference: String
    }

    let identity = try EphemeralCertificate()
    var router = Router()
    router.post(
        "/pay",
        json: { (payment: Payment, request: HTTPRequest) in
            Approval(
                status: "approved", amount: payment.amount, currency: payment.currency,
                reference: request.requestID.uuidString.lowercased())
        })
    let cores = ProcessInfo.processInfo.activeProcessorCount
    var configuration = HTTPServerConfiguration(
        listeners: [
            .init(
                port: 0,
                tls: TLSServerConfiguration(
                    certificateChainPEM: identity.certificatePEM, privateKeyPEM: identity.privateKeyPEM,
                    clientCertificatePolicy: .optional, trustedClientRootsPEM: identity.certificatePEM))
        ],
        threads: 1)
    configuration.loopCPUs = cores >= 2 ? [0] : nil
    let server = try HTTPServer(
        configuration: configuration, router: router, logger: Logger(label: "bench", level: .info))
    try server.start()

    let script = FileManager.default.temporaryDirectory.appendingPathComponent("orchard-bench-\(UUID().uuidString).lua")
    try Data(
        """
        wrk.method = "POST"
        wrk.body = '{"amount":1250,"currency":"EUR","merchant":"merchant.test"}'
        wrk.headers["Content-Type"] = "application/json"
        """.utf8
    ).write(to: script)
    defer { try? FileManager.default.removeItem(at: script) }

    var arguments = [
        "-t1", "-c\(connections)", "-d\(seconds)s", "--latency", "-s", script.path,
        "https://127.0.0.1:\(server.port)/pay",
    ]
    var executable = wrk
    if cores >= 2, let taskset = Executables.find("taskset") {
        arguments = ["-c", "1", wrk] + arguments
        executable = taskset
    }
    let output: String
    // wrk runs as a child, so this process's CPU time is the server's.
    let cpuBefore = InAppCeiling.processCPUSeconds()
    do {
        output = try await Executables.run(executable, arguments)
    } catch {
        await server.shutdown()
        throw error
    }
    let cpuUsed = (InAppCeiling.processCPUSeconds() - cpuBefore) * 1e6
    await server.shutdown()
    return try WrkOutput.parse(
        output, seconds: seconds, connections: connections, serverCPUMicroseconds: cpuUsed,
        command: ([URL(fileURLWithPath: executable).lastPathComponent] + arguments).joined(separator: " "))
}

/// Reads wrk's report.
enum WrkOutput {
    static func parse(
        _ text: String, seconds: Int, connections: Int, serverCPUMicroseconds: Double, command: String
    ) throws(BenchmarkError) -> HTTPBenchmarkResult {
        func number(after label: String) -> Double? {
            guard let range = text.range(of: label) else { return nil }
            let rest = text[range.upperBound...].drop { $0 == " " }
            return Double(rest.prefix { $0.isNumber || $0 == "." })
        }
        func latency(_ percentile: String) -> Double? {
            for line in text.split(separator: "\n") {
                let fields = line.split(separator: " ")
                guard fields.count == 2, fields[0] == percentile else { continue }
                let value = fields[1]
                let digits = Double(value.prefix { $0.isNumber || $0 == "." }) ?? 0
                if value.hasSuffix("us") { return digits / 1000 }
                if value.hasSuffix("ms") { return digits }
                if value.hasSuffix("s") { return digits * 1000 }
            }
            return nil
        }
        guard let rate = number(after: "Requests/sec:"), let p50 = latency("50%"), let p99 = latency("99%") else {
            throw BenchmarkError(.operationFailed, "cannot read wrk's report: \(text.prefix(400))")
        }
        let requests = Int(
            text.split(separator: "\n").first { $0.contains("requests in") }?
                .split(separator: " ").first.flatMap { Int($0) } ?? 0)
        var errors = Int(number(after: "Non-2xx or 3xx responses:") ?? 0)
        if let socketLine = text.split(separator: "\n").first(where: { $0.contains("Socket errors:") }) {
            errors += socketLine.split(separator: ",").compactMap { part in
                part.split(separator: " ").last.flatMap { Int($0) }
            }.reduce(0, +)
        }
        return HTTPBenchmarkResult(
            requestsPerSecond: rate, p50Milliseconds: p50, p99Milliseconds: p99, requests: requests, errors: errors,
            seconds: seconds, connections: connections, serverThreads: 1,
            serverCPUMicrosecondsPerRequest: requests > 0
                ? (serverCPUMicroseconds / Double(requests) * 10).rounded() / 10 : 0,
            loadGenerator: command)
    }
}

/// Finding and running helper programs (without fork: Foundation's Process uses posix_spawn).
enum Executables {
    static func find(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    /// Runs a program to completion and returns its standard output (standard error is discarded).
    static func run(_ executable: String, _ arguments: [String]) async throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Process and Pipe are not Sendable; the box hands them to one pool thread, which alone uses them.
        struct Running: @unchecked Sendable {
            let process: Process
            let pipe: Pipe
        }
        let running = Running(process: process, pipe: pipe)
        let data = await BlockingThreadPool.shared.run { () -> Data in
            let data = running.pipe.fileHandleForReading.readDataToEndOfFile()
            running.process.waitUntilExit()
            return data
        }
        guard process.terminationStatus == 0 else {
            throw BenchmarkError(
                .operationFailed, "\(executable) exited with status \(process.terminationStatus)")
        }
        return String(decoding: data, as: UTF8.self)
    }
}
