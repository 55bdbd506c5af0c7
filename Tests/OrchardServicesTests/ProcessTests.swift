import Foundation
import MerchantServer
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import PayServer
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The process contract through the built `orchard` binary: `init`, `up`, `serve`, and a command that needs
/// services (`status`).
@Suite("orchard init, up, serve and status as processes", .serialized)
struct ProcessTests {
    static let services = ["network", "pay", "merchant"]

    let temporary: TemporaryDirectory
    let directory: DeploymentDirectory
    init() throws {
        temporary = try TemporaryDirectory()
        directory = DeploymentDirectory(path: temporary.child("deployment"))
    }

    func root() throws -> String { try directory.readCertificate(named: PKIFiles.rootCA) }

    @Test func initTwiceWithoutForceRefuses() async throws {
        let first = try await runOrchard(["init", "--data-dir", directory.path])
        #expect(first.status == 0, "\(first.stderr)")
        let summary = try JSONSerialization.jsonObject(with: Data(first.stdout.utf8)) as? [String: Any]
        #expect((summary?["facts"] as? [String: String])?["merchantIdentifier"] == "merchant.dev.orchard.demo")
        let root = try self.root()

        let second = try await runOrchard(["init", "--data-dir", directory.path])
        #expect(second.status == 1)
        #expect(second.stderr.contains("already holds a deployment"))
        #expect(second.stdout.isEmpty)
        #expect(try self.root() == root)

        let forced = try await runOrchard(["init", "--data-dir", directory.path, "--force", "--base-port", "47200"])
        #expect(forced.status == 0, "\(forced.stderr)")
        #expect(try self.root() != root)
        for folder in try FileManager.default.contentsOfDirectory(atPath: directory.pkiPath) {
            let path = directory.pkiFolderPath(folder)
            for name in try FileManager.default.contentsOfDirectory(atPath: path) where name.hasSuffix(".key") {
                #expect(SecureFile.mode(of: path + "/" + name) == 0o600, "\(folder)/\(name)")
            }
        }
        #expect(SecureFile.mode(of: directory.path) == 0o700)
    }

    @Test func upInitialisesAnswersHealthOnEveryServiceAndStopsOnSIGTERM() async throws {
        let up = try OrchardChild(["up", "--data-dir", directory.path])
        let line = try await up.firstLine()
        let records = try JSONDecoder.records(line)
        #expect(Set(records.keys) == Set(Self.services))

        let trusted = try client(trusting: try root())
        defer { trusted.shutdown() }
        let stranger = try client(trusting: try directory.readCertificate(named: PayService.Files.tokenRoot))
        defer { stranger.shutdown() }
        for service in Self.services {
            let record = try #require(try directory.runningService(try ServiceName(service)))
            #expect(record.pid == up.pid)
            #expect(record.host == "127.0.0.1")
            #expect(records[service]?.port == record.port)
            for host in ["127.0.0.1", "localhost"] {
                let response = try await trusted.get("https://\(host):\(record.port)/health")
                #expect(response.status == .ok)
                let body = try JSONSerialization.jsonObject(with: response.body) as? [String: String]
                #expect(body == ["status": "ok", "service": service])
            }
            // A client that trusts another root refuses the service's certificate.
            await #expect(throws: HTTPError.self) { try await stranger.get("\(record.baseURL)/health") }
            #expect(
                FileManager.default.fileExists(atPath: directory.databasePath(for: Party(try ServiceName(service)))))
        }

        up.send(SIGTERM)
        #expect(try await up.exitStatus() == 0)
        #expect(up.standardError.contains("received SIGTERM"))
        #expect(try directory.runningServices().isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.runPath).isEmpty)
        let port = try #require(records["pay"]?.port)
        await #expect(throws: HTTPError.self) { try await trusted.get("https://127.0.0.1:\(port)/health") }
        // Each service logged to its own file.
        for service in Self.services {
            let log = String(decoding: try SecureFile.read(directory.logsPath + "/\(service).log"), as: UTF8.self)
            #expect(log.contains("\"listening\""))
            #expect(log.contains("\"logger\":\"\(service)\""))
        }
    }

    @Test func environmentOverridesTheConfiguredPortAndBadValuesAreNamed() async throws {
        #expect(try await runOrchard(["init", "--data-dir", directory.path]).status == 0)
        let port = try DeploymentInitializer.freePorts(1)[0]
        let pay = try OrchardChild(
            ["serve", "pay", "--data-dir", directory.path], environment: ["ORCHARD_PAY_PORT": "\(port)"])
        let record = try JSONDecoder().decodeRecord(try await pay.firstLine())
        #expect(record.port == port)
        pay.send(SIGINT)
        #expect(try await pay.exitStatus() == 0)

        let bad = try await runOrchard(
            ["serve", "pay", "--data-dir", directory.path], environment: ["ORCHARD_PAY_PORT": "eighty"])
        #expect(bad.status == 1)
        #expect(bad.stderr.contains("ORCHARD_PAY_PORT"))
    }

    @Test func aStaleRunRecordDoesNotCount() async throws {
        #expect(try await runOrchard(["init", "--data-dir", directory.path]).status == 0)
        // A record left by a process that is gone (SIGKILL leaves its records behind).
        let dead = try OrchardChild(["--version"])
        _ = try await dead.exitStatus()
        try directory.publish(ServiceRecord(service: .pay, host: "127.0.0.1", port: 1, pid: dead.pid))
        let pay = try OrchardChild(["serve", "pay", "--data-dir", directory.path])
        let record = try JSONDecoder().decodeRecord(try await pay.firstLine())
        #expect(record.pid == pay.pid)
        pay.send(SIGKILL)
        _ = try await pay.exitStatus()
        // Killed without a chance to clean up: its record stays until someone finds the pid gone.
        #expect(FileManager.default.fileExists(atPath: directory.runRecordPath(for: .pay)))
        let status = try await runOrchard(["status", "--data-dir", directory.path])
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.stdout.contains("started in this process"))
        #expect(!FileManager.default.fileExists(atPath: directory.runRecordPath(for: .pay)))
    }

    @Test func serveRunsOneServiceAndASecondServeOfItIsRefused() async throws {
        #expect(try await runOrchard(["init", "--data-dir", directory.path]).status == 0)
        let pay = try OrchardChild(["serve", "pay", "--data-dir", directory.path])
        let record = try JSONDecoder().decodeRecord(try await pay.firstLine())
        #expect(record.service == .pay)
        #expect(record.pid == pay.pid)
        #expect(try directory.runningService(.pay)?.port == record.port)
        #expect(try directory.runningService(.merchant) == nil)
        let configuration = try directory.loadConfiguration(
            schema: try InitTests.registry().schema, environment: [:])
        #expect(record.port == configuration[ServiceSettings.port(.pay)])

        let again = try await runOrchard(["serve", "pay", "--data-dir", directory.path])
        #expect(again.status == 1)
        #expect(again.stderr.contains("already runs"))

        let unknown = try await runOrchard(["serve", "bank", "--data-dir", directory.path])
        #expect(unknown.status == 2)

        pay.send(SIGTERM)
        #expect(try await pay.exitStatus() == 0)
        #expect(try directory.runningService(.pay) == nil)
    }

    @Test func serveNeedsADeployment() async throws {
        let result = try await runOrchard(["serve", "pay", "--data-dir", directory.path])
        #expect(result.status == 1)
        #expect(result.stderr.contains("orchard init"))
        #expect(try directory.state() == .missing)
    }

    @Test func aCommandWithNoServicesRunningStartsWhatItNeeds() async throws {
        #expect(try await runOrchard(["init", "--data-dir", directory.path]).status == 0)
        let alone = try await runOrchard(["status", "--data-dir", directory.path])
        #expect(alone.status == 0, "\(alone.stderr)")
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(alone.stdout.utf8)) as? [String: [String: String]])
        for service in Self.services {
            #expect(report[service]?["reached"] == "started in this process")
            #expect(report[service]?["status"] == "200")
        }
        // Nothing it started outlives it.
        #expect(try directory.runningServices().isEmpty)

        // With pay served by another process, the command uses it and starts only the merchant.
        let pay = try OrchardChild(["serve", "pay", "--data-dir", directory.path])
        let record = try JSONDecoder().decodeRecord(try await pay.firstLine())
        let shared = try await runOrchard(["status", "--data-dir", directory.path])
        #expect(shared.status == 0, "\(shared.stderr)")
        let second = try #require(
            try JSONSerialization.jsonObject(with: Data(shared.stdout.utf8)) as? [String: [String: String]])
        #expect(second["pay"]?["reached"] == "running")
        #expect(second["pay"]?["pid"] == "\(pay.pid)")
        #expect(second["pay"]?["url"] == "https://127.0.0.1:\(record.port)/health")
        #expect(second["merchant"]?["reached"] == "started in this process")
        pay.send(SIGTERM)
        #expect(try await pay.exitStatus() == 0)
    }

    @Test func inProcessServicesStopWithTheirConnections() async throws {
        let registry = try InitTests.registry()
        _ = try await DeploymentInitializer.initialize(directory, registry: registry)
        let connections = try await ServiceConnections.connect(
            [.pay, .merchant], directory: directory, registry: registry)
        #expect(Set(connections.startedInProcess) == [.pay, .merchant])
        #expect(connections.endpoints[.network] == nil)
        let http = try connections.client()
        defer { http.shutdown() }
        let url = try connections.baseURL(of: .merchant) + "/health"
        #expect(try await http.get(url).status == .ok)
        #expect(try await http.get(try connections.baseURL(of: .pay) + "/nothing-here").status == .notFound)
        #expect(throws: ServicesError(.notReady, "")) { try connections.baseURL(of: .issuer) }
        await connections.close()
        let fresh = try client(trusting: try root())
        defer { fresh.shutdown() }
        await #expect(throws: HTTPError.self) { try await fresh.get(url) }
    }
}

extension JSONDecoder {
    static func records(_ line: String) throws -> [String: ServiceRecord] {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return try decoder.decode([String: ServiceRecord].self, from: Data(line.utf8))
    }

    func decodeRecord(_ line: String) throws -> ServiceRecord {
        try ServiceRecord(json: Data(line.utf8))
    }
}
