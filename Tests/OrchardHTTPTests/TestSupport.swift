import Foundation
import OrchardCrypto
import OrchardFixtures
import OrchardLogging
import Testing

@testable import OrchardHTTP

/// The checked-in test PKI (Tests/Fixtures/pki-test, made by its make.sh).
enum PKI {
    static func pem(_ name: String) throws -> String { try Fixtures.string("pki-test/\(name)") }
    static func key(_ name: String) throws -> SecureBytes { SecureBytes(try Fixtures.data("pki-test/\(name)")) }
    /// A file holding the fixture `name` (for a child process), in a fresh temporary directory.
    static func file(_ name: String) throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "orchard-pki-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let url = directory.appendingPathComponent(name)
        try Fixtures.data("pki-test/\(name)").write(to: url)
        return url.path
    }

    static func serverTLS(policy: ClientCertificatePolicy) throws -> TLSServerConfiguration {
        TLSServerConfiguration(
            certificateChainPEM: try pem("server.pem"), privateKeyPEM: try key("server.key"),
            clientCertificatePolicy: policy, trustedClientRootsPEM: policy == .none ? nil : try pem("root-ca.pem"))
    }

    /// A client trusting the test root, presenting `identity` ("client" or "other-client") if given.
    static func client(
        identity: String? = nil, trusting root: String = "root-ca.pem",
        configure: (inout HTTPClientConfiguration) -> Void = { _ in }
    ) throws -> HTTPClient {
        var configuration = HTTPClientConfiguration(trustedRootsPEM: try pem(root))
        if let identity {
            configuration.clientCertificateChainPEM = try pem("\(identity).pem")
            configuration.clientPrivateKeyPEM = try key("\(identity).key")
        }
        configure(&configuration)
        return try HTTPClient(configuration: configuration)
    }

    static func raw(port: Int, identity: String? = nil, timeout: Duration = .seconds(15)) throws -> RawTLSConnection {
        try RawTLSConnection(
            port: port, trustedRootPEM: try pem("root-ca.pem"),
            certificatePEM: try identity.map { try pem("\($0).pem") },
            privateKeyPEM: try identity.map { try key("\($0).key") }, timeout: timeout)
    }
}

/// Starts a server with the test PKI on 127.0.0.1:0, runs `body`, and always shuts it down.
func withServer<T: Sendable>(
    policy: ClientCertificatePolicy = .optional, threads: Int = 1,
    limits: HTTPServerConfiguration.Limits = HTTPServerConfiguration.Limits(), shutdownDeadline: Duration = .seconds(5),
    logger: Logger = Logger(label: "test", level: .warning, sink: NullLogSink()), peers: ListenerPeers = .anyone,
    router: Router, _ body: (HTTPServer) async throws -> T
) async throws -> T {
    let server = try HTTPServer(
        configuration: HTTPServerConfiguration(
            listeners: [.init(port: 0, tls: try PKI.serverTLS(policy: policy), peers: peers)], threads: threads,
            limits: limits, shutdownDeadline: shutdownDeadline),
        router: router, logger: logger)
    try server.start()
    do {
        let result = try await body(server)
        await server.shutdown()
        return result
    } catch {
        await server.shutdown()
        throw error
    }
}

struct TimedOut: Error, CustomStringConvertible {
    let what: String
    var description: String { "timed out: \(what)" }
}

/// Runs `body`, failing with `TimedOut` if it takes longer than `limit` (a guard against hangs, not a
/// timing assertion: the limits are generous).
func withTimeout<T: Sendable>(
    _ limit: Duration, _ what: String, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: limit)
            throw TimedOut(what: what)
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}

/// Polls `condition` every 10 ms until it holds or `limit` passes. The limit is generous because the whole
/// test run shares Swift's two cooperative threads: a busy neighbour test can delay this task by seconds.
func eventually(_ limit: Duration = .seconds(60), _ condition: () -> Bool) async -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now + limit
    while clock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return condition()
}

/// Runs blocking test I/O off the cooperative pool.
func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await BlockingThreadPool.shared.run(body)
}

func url(_ server: HTTPServer, _ path: String) -> String { "https://localhost:\(server.port)\(path)" }

extension HTTPResponse {
    var text: String { String(decoding: body, as: UTF8.self) }
}

/// A JSON error body.
struct ErrorBody: Decodable {
    struct Inner: Decodable {
        let code: String
        let message: String
    }
    let error: Inner
}

/// A plain TCP socket listening on 127.0.0.1 at a port the kernel chose, for the tests' hand-written servers.
func plainListener() throws -> (fd: Int32, port: Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw HTTPError(.bindFailed, "socket") }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            bind(fd, pointer, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, pointer, &length) == 0
        }
    }
    guard bound else {
        close(fd)
        throw HTTPError(.bindFailed, "bind")
    }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}
