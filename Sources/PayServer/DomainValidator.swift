public import Foundation
import OrchardCrypto
import OrchardHTTP
import OrchardX509
public import WebMerchantAPI

/// Fetches a domain's association file as Apple's verifier does and checks each step (docs/web.md): the name
/// maps to a loopback port (the sandbox's DNS is `config.json` `names`) that is not an Orchard service's, the
/// connection and TLS ≥ 1.2 with SNI, a chain to the trusted root for that name, status 200 with no redirect at
/// the extensionless path, and a file the Pay server issued for the merchant.
///
/// The fetch is `https` only, to the domain's own name, one attempt, no redirect followed, bounded in time
/// (connection 3 s or `timeout` if shorter, the whole exchange `timeout`) and in size (the file's 64 KiB).
public final class DomainValidator: Sendable {
    /// What one validation found.
    public struct Outcome: Sendable {
        /// Every check in order; the first that failed is followed by `skipped` ones.
        public let checks: [DomainCheck]
        /// The site's TLS certificate's expiry, when the connection succeeded.
        public let siteCertificateNotAfter: Date?
        /// Whether the failure may pass on a later try: the site could not be reached, did not answer in time,
        /// or answered with a server error (5xx). A wrong or missing file, a redirect, a TLS or chain failure
        /// is not.
        public let retryable: Bool

        public var passed: Bool { checks.allSatisfy { $0.result == "pass" } }
        /// The first failed check, as `<check>: <detail>`.
        public var failure: String? {
            checks.first { $0.result == "fail" }.map { "\($0.name.rawValue): \($0.detail)" }
        }
    }

    private let hostNames: [String: Int]
    private let trustedRootsPEM: String
    private let files: AssociationFiles
    private let timeout: Duration
    private let servicePorts: @Sendable () -> Set<Int>

    /// - Parameters:
    ///   - hostNames: the names the sandbox resolves, each to its loopback port (`config.json` `names`).
    ///   - trustedRootsPEM: the roots a site's chain must lead to (the Orchard root).
    ///   - servicePorts: the ports the Orchard services listen on now (asked at each validation): a domain that
    ///     maps to one of them is refused before anything is sent.
    public init(
        hostNames: [String: Int], trustedRootsPEM: String, files: AssociationFiles, timeout: Duration = .seconds(10),
        servicePorts: @escaping @Sendable () -> Set<Int> = { [] }
    ) {
        self.hostNames = hostNames
        self.trustedRootsPEM = trustedRootsPEM
        self.files = files
        self.timeout = timeout
        self.servicePorts = servicePorts
    }

    /// Validates `domain` for `merchantIdentifier`. `hasIdentityCertificate` is the first check: validation
    /// runs only once the merchant's identity certificate was issued.
    /// `port`, when given, replaces the mapping of `domain` for this check (init's own one-off site, which is not
    /// checked against the services' ports).
    public func validate(
        domain: String, merchantIdentifier: String, hasIdentityCertificate: Bool, port override: Int? = nil
    ) async -> Outcome {
        var checks: [DomainCheck] = []
        var notAfter: Date?
        func pass(_ name: DomainCheck.Name, _ detail: String) {
            checks.append(DomainCheck(name: name, result: "pass", detail: detail))
        }
        func fail(_ name: DomainCheck.Name, _ detail: String, retryable: Bool = false) -> Outcome {
            checks.append(DomainCheck(name: name, result: "fail", detail: detail))
            let done = Set(checks.map(\.name))
            for rest in DomainCheck.Name.allCases where !done.contains(rest) {
                checks.append(DomainCheck(name: rest, result: "skipped", detail: "not checked"))
            }
            return Outcome(checks: checks, siteCertificateNotAfter: notAfter, retryable: retryable)
        }

        guard hasIdentityCertificate else {
            return fail(
                .identityCertificate,
                "\(merchantIdentifier) has no valid merchant identity certificate; domains are validated only after "
                    + "it is issued (`orchard merchant register --identity-csr FILE`)")
        }
        pass(.identityCertificate, "\(merchantIdentifier) has a valid identity certificate")
        guard let port = override ?? hostNames[domain] else {
            return fail(
                .nameMapping,
                "\(domain) is not a host name this deployment serves (config.json names: "
                    + hostNames.keys.sorted().joined(separator: ", ") + ")")
        }
        if override == nil, servicePorts().contains(port) {
            return fail(
                .nameMapping,
                "\(domain) maps to 127.0.0.1:\(port), an Orchard service's port: the verifier fetches only a "
                    + "merchant's own site (give the domain of the merchant's website)")
        }
        pass(.nameMapping, "\(domain) → 127.0.0.1:\(port)")

        let client: HTTPClient
        do {
            client = try HTTPClient(
                configuration: HTTPClientConfiguration(
                    trustedRootsPEM: trustedRootsPEM, minimumTLSVersion: .tls12,
                    connectTimeout: min(.seconds(3), timeout),
                    requestTimeout: timeout, maxResponseBytes: DomainAssociationFile.maximumFileBytes + 1,
                    maxAttempts: 1, maxCachedConnections: 2, connectTo: [domain: port]))
        } catch {
            return fail(.connect, "cannot set up the verification client: \(error.message)")
        }
        defer { client.shutdown() }
        let url = "https://\(domain)\(WebMerchantAPI.associationFilePath)"
        let response: HTTPResponse
        let session: TLSSessionInfo?
        do {
            (response, session) = try await client.sendInspectingTLS(HTTPClientRequest(method: .get, url: url))
        } catch {
            return Self.classify(error, domain: domain, port: port, pass: pass) { fail($0, $1, retryable: $2) }
        }
        pass(.connect, "connected to \(domain) (127.0.0.1:\(port)) with SNI \(domain)")
        pass(.tlsVersion, session.map { "\($0.version) (at least TLS 1.2 required)" } ?? "TLS")
        // try?: a certificate that does not parse is the failure below (it could not be read).
        if let der = session?.peerCertificateDER, let certificate = try? Certificate(derEncoded: der) {
            notAfter = certificate.notValidAfter
            pass(
                .chain,
                "\(certificate.subject) chains to the Orchard root, valid for \(domain) until "
                    + ISO8601DateFormatter().string(from: certificate.notValidAfter))
        } else {
            return fail(.chain, "the site's certificate could not be read")
        }

        if (300...399).contains(response.status.code) {
            pass(.status, "\(response.status.code)")
            let location = response.headers["Location"].map { " to \($0)" } ?? ""
            return fail(
                .redirect,
                "the site redirects\(location); the verifier follows no redirect: serve the file at \(url) itself")
        }
        guard response.status.code == 200 else {
            if response.status.code == 404, await Self.onlyTextFileExists(client: client, url: url) {
                pass(.status, "404 at the extensionless path")
                pass(.redirect, "no redirect")
                return fail(
                    .file,
                    "only \(WebMerchantAPI.associationFilePath).txt exists: serve the file at the path without "
                        + "the .txt extension")
            }
            return fail(
                .status, "\(response.status.code) for \(url); the verifier accepts 200 only",
                retryable: (500...599).contains(response.status.code))
        }
        pass(.status, "200")
        pass(.redirect, "no redirect")

        let file: DomainAssociationFile
        do {
            file = try DomainAssociationFile(fileContents: Array(response.body))
        } catch {
            return fail(.file, error.message)
        }
        pass(.file, "an association file of \(response.body.count) bytes, created \(file.createdOn) ms")
        switch files.problem(with: file, merchantIdentifier: merchantIdentifier) {
        case .signature(let reason)?:
            return fail(.signature, "forged or altered: \(reason)")
        case .otherMerchant(let pspId)?:
            pass(.signature, "signed by the Orchard domain-association signing leaf")
            return fail(
                .merchant,
                "the file was issued for another merchant: pspId \(pspId), but \(merchantIdentifier) is "
                    + AssociationFiles.merchantHash(merchantIdentifier)
                    + " (`orchard merchant association-file --merchant \(merchantIdentifier)`)")
        case nil where files.isLegacy(file):
            pass(
                .signature,
                "signed by the shared signing leaf of before one leaf per kind: accepted; serve a new file "
                    + "(`orchard merchant association-file --merchant \(merchantIdentifier)`)")
            pass(.merchant, "issued for \(merchantIdentifier) (\(file.pspId))")
        case nil:
            pass(.signature, "signed by the Orchard domain-association signing leaf")
            pass(.merchant, "issued for \(merchantIdentifier) (\(file.pspId))")
        }
        return Outcome(checks: checks, siteCertificateNotAfter: notAfter, retryable: false)
    }

    /// Names the check a transport or handshake failure belongs to.
    private static func classify(
        _ error: HTTPError, domain: String, port: Int, pass: (DomainCheck.Name, String) -> Void,
        fail: (DomainCheck.Name, String, Bool) -> Outcome
    ) -> Outcome {
        let text = error.message
        if error.code == .responseTooLarge {
            // An answer arrived, so the handshake (and its chain check) passed.
            pass(.connect, "connected to \(domain) (127.0.0.1:\(port)) with SNI \(domain)")
            pass(.tlsVersion, "TLS 1.2 or later")
            pass(.chain, "the site's certificate chains to the Orchard root")
            return fail(
                .status,
                "the answer is larger than \(DomainAssociationFile.maximumFileBytes) bytes, the most an association "
                    + "file may be: the verifier reads no further, whatever the status; serve the file exactly as "
                    + "`orchard merchant association-file` wrote it", false)
        }
        guard error.code == .connectionFailed || error.code == .tlsFailure, text.contains("TLS handshake") else {
            if error.code == .timedOut { return fail(.connect, "no answer from \(domain) in time: \(text)", true) }
            return fail(
                .connect,
                "cannot connect to \(domain) (127.0.0.1:\(port)): \(text); is the site serving on that port? "
                    + "(the demo store: `orchard serve merchant` or `orchard up`)", true)
        }
        pass(.connect, "connected to \(domain) (127.0.0.1:\(port)) with SNI \(domain)")
        let lower = text.lowercased()
        if lower.contains("protocol version") || lower.contains("unsupported protocol")
            || lower.contains("wrong version") || lower.contains("no protocols available")
        {
            return fail(.tlsVersion, "the site offers no TLS 1.2 or later: \(text)", false)
        }
        pass(.tlsVersion, "TLS 1.2 or later")
        if lower.contains("expired") {
            return fail(.chain, "the site's certificate has expired: \(text)", false)
        }
        return fail(
            .chain, "the site's certificate does not verify for \(domain) to the Orchard root: \(text)", false)
    }

    /// Whether `url` + `.txt` answers 200 (a common mistake: uploading the download with its extension).
    private static func onlyTextFileExists(client: HTTPClient, url: String) async -> Bool {
        // try?: only a hint for the report: a failed request means no such file.
        (try? await client.get(url + ".txt"))?.status.code == 200
    }
}
