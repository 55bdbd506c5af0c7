import AccessPolicy
import AcquirerAPI
import CommandTestSupport
import Foundation
import MerchantAPI
import OrchardCrypto
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import OrchardX509
import PayAPI
import PayServer
import RelayAPI
import Testing
import TokenRequestorAPI
import WebMerchantAPI

@testable import MerchantServer
@testable import NetworkServer

/// A deployment as `orchard init` makes it, its network served in this process over HTTPS, and client
/// certificates issued from its root for whoever a test plays.
final class AccessDeployment: @unchecked Sendable {
    let deployment: DeploymentDirectory
    let registry: ServiceRegistry
    let environment = ServiceEnvironment()
    let rootPEM: String
    let root: CertificateAuthority

    init() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("orchard-access-\(UUID().uuidString)")
            .path
        deployment = DeploymentDirectory(path: path)
        registry = try ServiceRegistry([NetworkServerService(), PayService(), MerchantService()])
        _ = try await DeploymentInitializer.initialize(deployment, registry: registry)
        rootPEM = try deployment.readCertificate(named: PKIFiles.rootCA)
        root = try CertificateAuthority.load(named: PKIFiles.rootCA, from: deployment)
    }

    deinit {
        LogScan.expectCleanLogs(of: deployment.path)  // V2
        try? FileManager.default.removeItem(atPath: deployment.path)
    }

    /// Builds and starts `service` on a free port; returns it, its HTTP server and its base URL.
    func start(_ service: ServiceName) async throws -> (any ServiceInstance, HTTPServer, String) {
        let configuration = try registry.loadConfiguration(
            from: deployment,
            environment: [
                "ORCHARD_\(service.rawValue.uppercased())_PORT": "0",
                "ORCHARD_\(service.rawValue.uppercased())_LOG_LEVEL": "debug",  // scanned in deinit (V2)
            ])
        let built = try await registry.service(named: service.rawValue).build(
            configuration: configuration, directory: deployment, environment: environment)
        let http = try #require(
            (built as? MerchantServiceInstance)?.http ?? (built as? NetworkServiceInstance)?.http
                ?? (built as? PayServiceInstance)?.http ?? built as? HTTPServiceInstance)
        return (built, http.server, try await built.start().baseURL)
    }
}

@Suite("Every caller acts only as itself", .serialized)
struct AccessMatrixTests {
    /// The attack of case C1: with T0002's certificate, a reversal naming T0001 and a STAN it has not used
    /// yet answered 200 `preempted`, declining T0001's future payment. Now 403, and T0001 itself still may.
    @Test("C1: A terminal cannot preempt another terminal's future STAN")
    func terminalCannotPreemptAnother() async throws {
        let access = try await AccessDeployment()
        let (network, _, base) = try await access.start(.network)
        let clients = try MatrixClients(access)
        let body = Data(
            #"{"merchantID":"merchant.dev.orchard.demo","terminalID":"T0001","stan":"000777","amount":{"minorUnits":450,"currency":"840"},"reason":"timeout"}"#
                .utf8)
        func reverse(_ client: HTTPClient) async throws -> HTTPResponse {
            try await client.send(
                HTTPClientRequest(
                    method: .post, url: base + "/v1/acquirer/reversals", headers: ["Content-Type": "application/json"],
                    body: body))
        }
        let answer = try await reverse(clients.terminal2)
        #expect(answer.status.code == 403, "\(String(decoding: answer.body, as: UTF8.self))")
        #expect(errorCode(answer) == "caller_mismatch")
        #expect(!String(decoding: answer.body, as: UTF8.self).contains("preempted"))
        // A body naming both terminals (a repeated key): refused whatever the order, before any check reads
        // one of the two values (S9: 400 duplicate_key).
        for order in [("T0001", "T0002"), ("T0002", "T0001")] {
            let repeated = Data(
                #"{"merchantID":"merchant.dev.orchard.demo","terminalID":"\#(order.0)","stan":"000778","amount":{"minorUnits":450,"currency":"840"},"reason":"timeout","terminalID":"\#(order.1)"}"#
                    .utf8)
            let answer = try await clients.terminal2.send(
                HTTPClientRequest(
                    method: .post, url: base + "/v1/acquirer/reversals", headers: ["Content-Type": "application/json"],
                    body: repeated))
            #expect(
                answer.status.code == 400 && errorCode(answer) == "duplicate_key",
                "\(order): \(String(decoding: answer.body, as: UTF8.self))")
        }
        let own = try await reverse(clients.terminal1)
        #expect(own.status.code == 200 && String(decoding: own.body, as: UTF8.self).contains("preempted"))
        await network.shutdown()
    }
}

/// Who a matrix test plays: a name for the failure messages and a client presenting its certificate.
struct MatrixCaller: Sendable {
    let name: String
    let client: HTTPClient
}

extension AccessDeployment {
    /// A client presenting `certificate` (PEM) with `key`.
    func client(certificatePEM: String, key: P256.Signing.PrivateKey) throws -> HTTPClient {
        try HTTPClient(
            configuration: HTTPClientConfiguration(
                trustedRootsPEM: rootPEM, clientCertificateChainPEM: certificatePEM,
                clientPrivateKeyPEM: SecureBytes(Array(try key.pemRepresentation.utf8)), maxAttempts: 1))
    }

    /// A client certificate with `subject` from `authority`, for client authentication.
    func client(subject: DistinguishedName, by authority: CertificateAuthority) throws -> HTTPClient {
        let key = try P256.Signing.PrivateKey()
        let now = environment.wallClock.now()
        let certificate = try Certificate.issue(
            subject: subject, publicKey: CertificatePublicKey(key.publicKey), issuer: authority.issuer,
            notValidBefore: now.addingTimeInterval(-300), notValidAfter: now.addingTimeInterval(86_400),
            extensions: [
                .basicConstraints(isCA: false), .keyUsage([.digitalSignature]), .extendedKeyUsage([.clientAuth]),
            ], random: environment.random)
        // The chain up to the root: the listener trusts the root alone.
        let chain = certificate.pemRepresentation + authority.certificate.pemRepresentation
        return try client(certificatePEM: chain, key: key)
    }

    /// A client presenting a certificate from the root with `role`, naming `identity`.
    func client(role: ServiceRole, identity: CallerIdentity?) throws -> HTTPClient {
        let name = "test-\(UUID().uuidString.lowercased())"
        try ServiceAccess.issueClientIdentity(
            named: name, role: role, commonName: identity?.identifier ?? role.rawValue, identity: identity, by: root,
            to: deployment, clock: environment.wallClock, random: environment.random)
        return try HTTPClient(
            configuration: HTTPClientConfiguration(
                trustedRootsPEM: rootPEM, clientCertificateChainPEM: try deployment.readCertificate(named: name),
                clientPrivateKeyPEM: try deployment.readPrivateKey(named: name), maxAttempts: 1))
    }
}

/// The answers the router gives when a policy refuses.
let policyRefusals: Set<String> = ["client_certificate_required", "client_certificate_not_allowed", "caller_mismatch"]

/// The error code of an answer, if it is an error.
func errorCode(_ response: HTTPResponse) -> String? {
    let object = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any]
    return (object?["error"] as? [String: Any])?["code"] as? String
}

extension AccessMatrixTests {
    static let demoMerchant = "merchant.dev.orchard.demo"
    /// A body naming terminal T0001 of the demo merchant (what the acquiring routes read; others refuse it).
    static let terminalBody = Data(
        #"{"merchantID":"merchant.dev.orchard.demo","terminalID":"T0001","stan":"000001","amount":{"minorUnits":1,"currency":"840"},"reason":"timeout"}"#
            .utf8)

    /// Sends `route` (its parameters filled in) with `body` for a POST.
    static func send(
        _ client: HTTPClient, _ route: Router.RegisteredRoute, base: String, body: Data = terminalBody
    ) async throws -> HTTPResponse {
        let path = route.pattern.split(separator: "/", omittingEmptySubsequences: false)
            .map { $0.hasPrefix(":") ? "p" + $0.dropFirst() : String($0) }.joined(separator: "/")
        do {
            return try await client.send(
                HTTPClientRequest(
                    method: HTTPMethod(route.method), url: base + path, headers: ["Content-Type": "application/json"],
                    body: route.method == "POST" ? body : Data()))
        } catch {
            throw HTTPError(error.code, "\(route.method) \(route.pattern): \(error.message)")
        }
    }

    /// Runs the matrix over every route `instance` registered: each must carry the policy its contract declares,
    /// and each caller gets the answer the policy gives it. `callers` maps a role to its right caller;
    /// `others` are callers with another identity for the role's identified routes.
    static func runMatrix(
        _ service: String, server: HTTPServer, base: String, declared: [DeclaredRoute],
        anonymous: HTTPClient, foreign: HTTPClient, callers: [String: MatrixCaller], others: [MatrixCaller]
    ) async throws {
        let registered = server.registeredRoutes
        for route in registered where route.policy == nil {
            Issue.record("\(service): \(route) is registered without a declared policy")
        }
        let registeredSet = Set(registered.compactMap { r in r.policy.map { DeclaredRoute(r.method, r.pattern, $0) } })
        #expect(registeredSet == Set(declared + [HTTPServiceInstance.health]), "\(service): registered ≠ declared")

        for route in registered {
            guard let policy = route.policy else { continue }
            let cell = "\(service) \(route.method) \(route.pattern)"
            // A certificate from another CA: refused at the handshake, whatever the route.
            await #expect(throws: HTTPError.self, "\(cell): foreign CA") {
                _ = try await send(foreign, route, base: base)
            }
            let none = try await send(anonymous, route, base: base)
            guard let role = policy.role else {
                #expect(!policyRefusals.contains(errorCode(none) ?? ""), "\(cell): no certificate")
                for caller in callers.values {
                    let answer = try await send(caller.client, route, base: base)
                    #expect(!policyRefusals.contains(errorCode(answer) ?? ""), "\(cell): \(caller.name)")
                }
                continue
            }
            #expect(none.status.code == 401 && errorCode(none) == "client_certificate_required", "\(cell): none")
            for (otherRole, caller) in callers where otherRole != role {
                let answer = try await send(caller.client, route, base: base)
                #expect(
                    answer.status.code == 403 && errorCode(answer) == "client_certificate_not_allowed",
                    "\(cell): wrong role \(caller.name)")
            }
            let right = try #require(callers[role], "\(cell): no caller of role \(role)")
            let answer = try await send(right.client, route, base: base)
            #expect(!policyRefusals.contains(errorCode(answer) ?? ""), "\(cell): \(right.name) → \(answer.status)")
            guard case .identified = policy.caller else { continue }
            for other in others {
                let refused = try await send(other.client, route, base: base)
                #expect(
                    refused.status.code == 403 && errorCode(refused) == "caller_mismatch",
                    "\(cell): another identity \(other.name) → \(refused.status)")
            }
        }
    }

    @Test(
        "C1/C2: The network's routes × {no certificate, foreign CA, wrong role, another identity, the right caller}"
    )
    func networkMatrix() async throws {
        let access = try await AccessDeployment()
        let (network, server, base) = try await access.start(.network)
        let clients = try MatrixClients(access)
        let callers = [
            CallerRoles.acquiring: MatrixCaller(name: "terminal T0001", client: clients.terminal1),
            CallerRoles.tokenRequestor: MatrixCaller(
                name: "token requestor", client: try access.client(role: .tokenRequestor, identity: nil)),
            CallerRoles.issuer: MatrixCaller(name: "issuer", client: try access.client(role: .issuer, identity: nil)),
        ]
        let others = [
            MatrixCaller(name: "terminal T0002", client: clients.terminal2),
            MatrixCaller(name: "another merchant", client: clients.otherMerchant),
            MatrixCaller(name: "another merchant's terminal T0001", client: clients.otherMerchantsTerminal),
            // The demo merchant itself, sending a terminal's ID and STAN.
            MatrixCaller(name: "the merchant as its terminal", client: clients.merchant),
        ]
        try await Self.runMatrix(
            "network", server: server, base: base,
            declared: AcquirerAPI.Declared.all + TokenRequestorAPI.Declared.all, anonymous: clients.anonymous,
            foreign: clients.foreign, callers: callers, others: others)
        await network.shutdown()
    }

    @Test("C2: The Pay server's routes × {no certificate, foreign CA, wrong role, the right caller}")
    func payMatrix() async throws {
        let access = try await AccessDeployment()
        let (pay, server, base) = try await access.start(.pay)
        let clients = try MatrixClients(access)
        let deviceCA = try CertificateAuthority.load(named: PKIFiles.deviceCA, from: access.deployment)
        let merchantCA = try CertificateAuthority.load(named: PayService.Files.merchantCA, from: access.deployment)
        let callers = [
            CallerRoles.device: MatrixCaller(
                name: "device",
                client: try access.client(
                    subject: DistinguishedName([
                        .organization("Orchard device"), .organizationalUnit("phone"), .userID("demo"),
                        .commonName("phone-matrix"),
                    ]), by: deviceCA)),
            CallerRoles.merchantIdentity: MatrixCaller(
                name: "merchant identity",
                client: try access.client(
                    subject: DistinguishedName([.userID(Self.demoMerchant), .commonName("Orchard demo")]),
                    by: merchantCA)),
            // A role of the network: the Pay server recognizes it nowhere.
            CallerRoles.tokenRequestor: MatrixCaller(name: "terminal T0001", client: clients.terminal1),
            // The merchant the matrix's paths name (`:merchant` is filled with "pmerchant").
            WebMerchantAPI.portalRole: MatrixCaller(
                name: "merchant portal",
                client: try access.client(
                    role: ServiceRole(WebMerchantAPI.portalRole),
                    identity: CallerIdentity(kind: CallerIdentity.merchant, identifier: "pmerchant"))),
        ]
        let others = [
            MatrixCaller(
                name: "another merchant's portal",
                client: try access.client(
                    role: ServiceRole(WebMerchantAPI.portalRole),
                    identity: CallerIdentity(kind: CallerIdentity.merchant, identifier: Self.demoMerchant)))
        ]
        try await Self.runMatrix(
            "pay", server: server, base: base,
            declared: PayAPI.Declared.all + WebMerchantAPI.Declared.all + WebMerchantAPI.Gateway.Declared.all
                + [WebMerchantAPI.Capability.declared] + WebMerchantAPI.Script.declared + RelayAPI.Declared.all,
            anonymous: clients.anonymous,
            foreign: clients.foreign, callers: callers, others: others)
        await pay.shutdown()
    }

    @Test("C2: The merchant server's routes × {no certificate, foreign CA, any certificate}")
    func merchantMatrix() async throws {
        let access = try await AccessDeployment()
        let (merchant, server, base) = try await access.start(.merchant)
        let clients = try MatrixClients(access)
        try await Self.runMatrix(
            "merchant", server: server, base: base, declared: MerchantAPI.Declared.all,
            anonymous: clients.anonymous, foreign: clients.foreign,
            callers: [CallerRoles.acquiring: MatrixCaller(name: "terminal T0001", client: clients.terminal1)],
            others: [])
        await merchant.shutdown()
    }

    @Test("C2: A merchant charges only in its own name: its key never reaches another merchant's record")
    func merchantKeysAreScoped() async throws {
        let access = try await AccessDeployment()
        let (network, _, base) = try await access.start(.network)
        let clients = try MatrixClients(access)
        func reversal(_ client: HTTPClient, merchantID: String) async throws -> HTTPResponse {
            try await client.send(
                HTTPClientRequest(
                    method: .post, url: base + AcquirerAPI.Route.reversals,
                    headers: ["Content-Type": "application/json"],
                    body: try JSONEncoder().encode(
                        AcquirerAPI.ReversalRequest(
                            merchantID: merchantID, idempotencyKey: "same-key",
                            amount: AcquirerAPI.Money(minorUnits: 1, currency: "840"), reason: "timeout"))))
        }
        // Another merchant naming the demo merchant: refused; in its own name it reaches only its own (unknown)
        // account, so the demo merchant's key stays free.
        let foreignName = try await reversal(clients.otherMerchant, merchantID: Self.demoMerchant)
        #expect(foreignName.status.code == 403 && errorCode(foreignName) == "caller_mismatch")
        let ownName = try await reversal(clients.otherMerchant, merchantID: "merchant.dev.other")
        #expect(ownName.status.code == 404)
        let demo = try await reversal(clients.merchant, merchantID: Self.demoMerchant)
        #expect(demo.status.code == 200)
        let json = try JSONSerialization.jsonObject(with: demo.body) as? [String: Any]
        #expect(json?["outcome"] as? String == "preempted", "\(String(decoding: demo.body, as: UTF8.self))")
        await network.shutdown()
    }
}

/// The certificates the matrices share.
struct MatrixClients {
    let anonymous: HTTPClient
    let foreign: HTTPClient
    let terminal1: HTTPClient
    let terminal2: HTTPClient
    let merchant: HTTPClient
    let otherMerchant: HTTPClient
    /// Terminal T0001 of another merchant.
    let otherMerchantsTerminal: HTTPClient

    init(_ access: AccessDeployment) throws {
        anonymous = try HTTPClient(
            configuration: HTTPClientConfiguration(trustedRootsPEM: access.rootPEM, maxAttempts: 1))
        // Same subject as T0001's, from a CA the deployment never saw.
        let foreignCA = try CertificateAuthority.create(
            subject: DistinguishedName([.organization("Orchard"), .commonName("Foreign root")]), issuer: nil,
            lifetime: 86_400, clock: access.environment.wallClock, random: access.environment.random)
        foreign = try access.client(
            subject: DistinguishedName([
                .organization("Orchard"), .organizationalUnit(CallerRoles.acquiring), .commonName("T0001"),
                .userID("terminal:T0001@merchant.dev.orchard.demo"),
            ]), by: foreignCA)
        terminal1 = try access.client(
            role: .acquiring,
            identity: CallerIdentity(
                kind: CallerIdentity.terminal, identifier: "T0001", owner: AccessMatrixTests.demoMerchant))
        terminal2 = try access.client(
            role: .acquiring,
            identity: CallerIdentity(
                kind: CallerIdentity.terminal, identifier: "T0002", owner: AccessMatrixTests.demoMerchant))
        merchant = try access.client(
            role: .acquiring,
            identity: CallerIdentity(kind: CallerIdentity.merchant, identifier: AccessMatrixTests.demoMerchant))
        otherMerchantsTerminal = try access.client(
            role: .acquiring,
            identity: CallerIdentity(kind: CallerIdentity.terminal, identifier: "T0001", owner: "merchant.dev.other"))
        otherMerchant = try access.client(
            role: .acquiring, identity: CallerIdentity(kind: CallerIdentity.merchant, identifier: "merchant.dev.other"))
    }
}

@Suite("Caller identities in a certificate's UID")
struct CallerIdentityTests {
    @Test("kind:identifier[@owner] round-trips; a missing part names nobody")
    func subjectUserID() {
        let terminal = CallerIdentity(kind: "terminal", identifier: "T0001", owner: "merchant.dev.orchard.demo")
        #expect(terminal.subjectUserID == "terminal:T0001@merchant.dev.orchard.demo")
        #expect(CallerIdentity(subjectUserID: terminal.subjectUserID) == terminal)
        let merchant = CallerIdentity(kind: "merchant", identifier: "merchant.dev.orchard.demo")
        #expect(CallerIdentity(subjectUserID: merchant.subjectUserID) == merchant)
        for malformed in ["", "T0001", ":T0001", "terminal:", "terminal:@m", "terminal:T0001@"] {
            #expect(CallerIdentity(subjectUserID: malformed) == nil, "\(malformed)")
        }
    }
}
