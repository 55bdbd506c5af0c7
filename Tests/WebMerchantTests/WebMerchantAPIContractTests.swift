import AccessPolicy
import Foundation
import MerchantServer
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import PayServer
import Testing
import WebMerchantAPI

/// The web merchant routes (`WebMerchantAPI`, which the Pay server and the CLI import): the paths, policies and
/// wire keys are pinned; what the Pay server answers over HTTPS the CLI's types decode (the commands' tests run
/// the CLI against the server end to end); the site route the verifier fetches is the one merchants serve.
@Suite("Web merchant wire format: portal and Pay server agree", .serialized)
struct WebMerchantAPIContractTests {
    static func encoded(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    @Test("Golden JSON: the routes, their policy and the exact wire keys of every body")
    func golden() throws {
        #expect(WebMerchantAPI.associationFilePath == "/.well-known/apple-developer-merchantid-domain-association")
        #expect(WebMerchantAPI.Route.domains(merchant: "m.x") == "/v1/web/merchants/m.x/domains")
        #expect(
            WebMerchantAPI.Route.domain(merchant: "m.x", domain: "a.test") == "/v1/web/merchants/m.x/domains/a.test")
        #expect(
            WebMerchantAPI.Route.verify(merchant: "m.x", domain: "a.test")
                == "/v1/web/merchants/m.x/domains/a.test/verify")
        #expect(WebMerchantAPI.Route.associationFile(merchant: "m.x") == "/v1/web/merchants/m.x/association-file")
        #expect(
            WebMerchantAPI.Route.processingCertificates(merchant: "m.x")
                == "/v1/web/merchants/m.x/processing-certificates")
        #expect(
            try Self.encoded(ProcessingCertificateRequest(certificateSigningRequest: "PEM", processor: "psp.example"))
                == #"{"certificateSigningRequest":"PEM","processor":"psp.example"}"#)
        #expect(
            try Self.encoded(
                ProcessingCertificateResponse(
                    merchantIdentifier: "m.x", serial: "0A", processor: "psp.example", certificateChain: ["A", "B"],
                    notAfter: "2029-01-01T00:00:00Z"))
                == #"{"certificateChain":["A","B"],"merchantIdentifier":"m.x","notAfter":"2029-01-01T00:00:00Z","#
                + #""processor":"psp.example","serial":"0A"}"#)
        #expect(
            ProcessingCertificateRequest.isProcessorName("psp.example")
                && ProcessingCertificateRequest.isProcessorName("a"))
        #expect(
            !ProcessingCertificateRequest.isProcessorName(".psp")
                && !ProcessingCertificateRequest.isProcessorName("Psp"))
        // A merchant's portal certificate, for the merchant the path names.
        let portal = AccessPolicy.identified(
            role: "merchant-portal", IdentityBinding(kind: "merchant", pathParameters: ["merchant"]))
        #expect(WebMerchantAPI.Declared.all.allSatisfy { $0.policy == portal })
        #expect(WebMerchantAPI.Declared.all.allSatisfy { $0.pattern.hasPrefix("/v1/web/merchants/:merchant/") })
        #expect(WebMerchantAPI.Site.associationFile.policy == .anyone)
        #expect(
            WebMerchantAPI.HostNames.all == [
                "apple-pay-gateway.orchard.test", "pay.orchard.test", "store.orchard.test",
            ])

        #expect(try Self.encoded(DomainRequest(domain: "a.test")) == #"{"domain":"a.test"}"#)
        let record = DomainRecord(
            status: "verified", merchantIdentifier: "m.x", domain: "a.test", verifiedAt: "2026-01-01T00:00:00Z",
            expiresAt: "2027-01-01T00:00:00Z", nextCheckAt: "2026-12-02T00:00:00Z", failure: nil)
        #expect(
            try Self.encoded(record)
                == #"{"domain":"a.test","expiresAt":"2027-01-01T00:00:00Z","merchantIdentifier":"m.x","#
                + #""nextCheckAt":"2026-12-02T00:00:00Z","status":"verified","verifiedAt":"2026-01-01T00:00:00Z"}"#)
        let retrying = DomainRecord(
            status: "retrying", merchantIdentifier: "m.x", domain: "a.test", verifiedAt: "2026-01-01T00:00:00Z",
            expiresAt: "2027-01-01T00:00:00Z", nextCheckAt: "2026-01-02T00:15:00Z", failure: "connect: no answer",
            checkedAt: "2026-01-02T00:00:00Z", retriesLeft: 3)
        #expect(
            try Self.encoded(retrying)
                == #"{"checkedAt":"2026-01-02T00:00:00Z","domain":"a.test","expiresAt":"2027-01-01T00:00:00Z","#
                + #""failure":"connect: no answer","merchantIdentifier":"m.x","nextCheckAt":"2026-01-02T00:15:00Z","#
                + #""retriesLeft":3,"status":"retrying","verifiedAt":"2026-01-01T00:00:00Z"}"#)
        // A record from a Pay server without the check fields still decodes.
        #expect(try JSONDecoder().decode(DomainRecord.self, from: Data(try Self.encoded(record).utf8)) == record)
        let report = DomainVerificationReport(
            verified: false, checks: [DomainCheck(name: .tlsVersion, result: "fail", detail: "TLSv1.1")],
            record: DomainRecord(
                status: "failed", merchantIdentifier: "m.x", domain: "a.test", verifiedAt: nil, expiresAt: nil,
                nextCheckAt: nil, failure: "TLS version: TLSv1.1"))
        #expect(
            try Self.encoded(report)
                == #"{"checks":[{"detail":"TLSv1.1","name":"TLS version","result":"fail"}],"#
                + #""record":{"domain":"a.test","failure":"TLS version: TLSv1.1","merchantIdentifier":"m.x","#
                + #""status":"failed"},"verified":false}"#)
        #expect(
            try Self.encoded(AssociationFileResponse(merchantIdentifier: "m.x", file: "7B7D"))
                == #"{"file":"7B7D","merchantIdentifier":"m.x"}"#)
        #expect(
            DomainCheck.Name.allCases.map(\.rawValue) == [
                "identity certificate", "name mapping", "connect", "TLS version", "chain", "status", "redirect", "file",
                "signature", "merchant",
            ])
    }

    @Test("The Pay server registers every web merchant route with its declared policy")
    func registered() async throws {
        let temporary = try TemporaryDirectory()
        let directory = DeploymentDirectory(path: temporary.child("deployment"))
        let registry = try ServiceRegistry([PayService(), MerchantService()])
        _ = try await DeploymentInitializer.initialize(directory, registry: registry)
        let configuration = try registry.loadConfiguration(from: directory, environment: [:])
        let built = try await PayService().build(
            configuration: configuration, directory: directory, environment: ServiceEnvironment())
        let pay = try #require(built as? PayServiceInstance)
        let registered = Set(
            pay.http.server.registeredRoutes.compactMap { r in r.policy.map { DeclaredRoute(r.method, r.pattern, $0) } }
        )
        #expect(Set(WebMerchantAPI.Declared.all).isSubset(of: registered))
        let gateway = WebMerchantAPI.Gateway.Declared.all + [WebMerchantAPI.Capability.declared]
        #expect(Set(gateway).isSubset(of: registered))
        await pay.http.shutdown()
    }
}
