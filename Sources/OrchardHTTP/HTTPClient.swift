internal import CCurl
internal import CHTTPShims
internal import COpenSSL
internal import CShims
public import Foundation
public import OrchardCrypto
import OrchardLogging

/// How an ``HTTPClient`` connects.
public struct HTTPClientConfiguration: Sendable {
    /// The only roots server certificates may chain to, as PEM. `nil` uses the system's roots.
    public var trustedRootsPEM: String?
    /// The client certificate (then intermediates) for mutual TLS, as PEM.
    public var clientCertificateChainPEM: String?
    /// The client certificate's private key, as unencrypted PEM.
    public var clientPrivateKeyPEM: SecureBytes?
    public var minimumTLSVersion: TLSVersion
    /// Time to establish a connection (TCP and TLS).
    public var connectTimeout: Duration
    /// Time for a whole attempt, connection included.
    public var requestTimeout: Duration
    /// Largest response body accepted; a larger one fails with `responseTooLarge`.
    public var maxResponseBytes: Int
    /// Attempts per request, the first included. Only idempotent requests (GET, HEAD, PUT, DELETE,
    /// OPTIONS) and requests with an `Idempotency-Key` header are ever retried, and only after a
    /// transport failure (refused or reset connection, nothing received, timeout), never after an
    /// HTTP answer or a certificate failure.
    public var maxAttempts: Int
    /// Wait before the second attempt; doubled for each further one.
    public var retryBackoff: Duration
    /// Connections kept open for reuse (libcurl's connection cache).
    public var maxCachedConnections: Int
    /// Host names mapped to loopback ports (a deployment's `names` in `config.json`): a URL with such a host
    /// connects to `127.0.0.1` at that port, whatever the URL's port, through libcurl's `CURLOPT_CONNECT_TO`.
    /// The URL keeps its host, so SNI, certificate name checks and the `Host` header all use the name.
    public var connectTo: [String: Int]

    public init(
        trustedRootsPEM: String? = nil, clientCertificateChainPEM: String? = nil,
        clientPrivateKeyPEM: SecureBytes? = nil,
        minimumTLSVersion: TLSVersion = .tls12, connectTimeout: Duration = .seconds(5),
        requestTimeout: Duration = .seconds(30), maxResponseBytes: Int = 8 << 20, maxAttempts: Int = 3,
        retryBackoff: Duration = .milliseconds(50), maxCachedConnections: Int = 64, connectTo: [String: Int] = [:]
    ) {
        self.trustedRootsPEM = trustedRootsPEM
        self.clientCertificateChainPEM = clientCertificateChainPEM
        self.clientPrivateKeyPEM = clientPrivateKeyPEM
        self.minimumTLSVersion = minimumTLSVersion
        self.connectTimeout = connectTimeout
        self.requestTimeout = requestTimeout
        self.maxResponseBytes = maxResponseBytes
        self.maxAttempts = maxAttempts
        self.retryBackoff = retryBackoff
        self.maxCachedConnections = maxCachedConnections
        self.connectTo = connectTo
    }
}

/// What the TLS connection of an exchange was: the negotiated version and the server's certificate, as
/// ``HTTPClient/sendInspectingTLS(_:)`` returns them (for checks such as domain validation).
public struct TLSSessionInfo: Sendable, Hashable {
    /// OpenSSL's name of the negotiated version, e.g. `TLSv1.3`.
    public let version: String
    /// The server's leaf certificate (DER), as it was presented and verified.
    public let peerCertificateDER: [UInt8]?
    /// Whether the connection resumed an earlier TLS session of the same client (no certificate exchange).
    public let resumed: Bool

    public init(version: String, peerCertificateDER: [UInt8]?, resumed: Bool = false) {
        self.version = version
        self.peerCertificateDER = peerCertificateDER
        self.resumed = resumed
    }
}

/// A request for ``HTTPClient``.
public struct HTTPClientRequest: Sendable {
    public var method: HTTPMethod
    /// An absolute `https://` (or `http://`) URL.
    public var url: String
    public var headers: HTTPHeaders
    public var body: Data

    public init(method: HTTPMethod = .get, url: String, headers: HTTPHeaders = [:], body: Data = Data()) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }

    /// A JSON request (sorted keys, unescaped slashes, `Content-Type: application/json`).
    public static func json(
        _ method: HTTPMethod, _ url: String, _ value: some Encodable, headers: HTTPHeaders = [:]
    ) throws(HTTPError) -> HTTPClientRequest {
        var request = HTTPClientRequest(method: method, url: url, headers: headers, body: try JSONCoding.encode(value))
        request.headers.set("Content-Type", "application/json")
        return request
    }

    /// Whether a failed attempt may be repeated: the method is idempotent, or the request carries an
    /// `Idempotency-Key` the server deduplicates on.
    public var isRetryable: Bool { method.isIdempotent || headers["Idempotency-Key"] != nil }
}

/// An HTTP/1.1 client on libcurl's multi interface, for calls between Orchard services.
///
/// One dedicated thread drives every transfer of the client (`curl_multi_poll`), so an `async` caller
/// is suspended, never blocked, and no event loop or cooperative thread waits on the network. TLS uses
/// only the configured private root when one is given (the system roots are then ignored), and the
/// client certificate and key are handed to libcurl from memory. Connections are reused between
/// requests. `curl_global_init` runs once per process; `CURLOPT_NOSIGNAL` keeps libcurl away from
/// signals. Retries follow ``HTTPClientConfiguration/maxAttempts``.
///
/// libcurl itself resends a request once, whatever its method, when a reused connection turns out to
/// have been closed by the server before any byte of the answer arrived; that case is
/// indistinguishable from a request the server never saw.
public final class HTTPClient: Sendable {
    public let configuration: HTTPClientConfiguration
    let engine: CurlEngine

    public init(configuration: HTTPClientConfiguration = HTTPClientConfiguration()) throws(HTTPError) {
        guard configuration.maxAttempts >= 1, configuration.maxResponseBytes > 0 else {
            throw HTTPError(.invalidConfiguration, "maxAttempts and maxResponseBytes must be positive")
        }
        for (host, port) in configuration.connectTo {
            guard (1...65535).contains(port), !host.isEmpty,
                host.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ":") && $0 != UInt8(ascii: "/") })
            else {
                throw HTTPError(.invalidConfiguration, "connectTo maps \"\(host)\" to \(port): a host name and a port")
            }
        }
        if (configuration.clientCertificateChainPEM == nil) != (configuration.clientPrivateKeyPEM == nil) {
            throw HTTPError(
                .invalidConfiguration, "a client certificate needs its private key, and the other way round")
        }
        // Parse now, so a bad PEM fails here with a clear message instead of at the first handshake.
        if let roots = configuration.trustedRootsPEM {
            guard !(try PEMObjects.certificates(roots, what: "trusted roots")).isEmpty else {
                throw HTTPError(.invalidConfiguration, "the trusted roots hold no CERTIFICATE block")
            }
        }
        if let chain = configuration.clientCertificateChainPEM, let key = configuration.clientPrivateKeyPEM {
            guard !(try PEMObjects.certificates(chain, what: "client certificate")).isEmpty else {
                throw HTTPError(.invalidConfiguration, "the client certificate holds no CERTIFICATE block")
            }
            _ = try PEMObjects.privateKey(key)
        }
        self.configuration = configuration
        engine = try CurlEngine(configuration)
    }

    deinit { engine.stop() }

    /// Sends `request`, retrying as ``HTTPClientConfiguration/maxAttempts`` allows. Any HTTP answer,
    /// 4xx and 5xx included, is returned; transport failures throw.
    public func send(_ request: HTTPClientRequest) async throws(HTTPError) -> HTTPResponse {
        guard request.url.hasPrefix("https://") || request.url.hasPrefix("http://") else {
            throw HTTPError(.invalidURL, "the URL must start with https:// or http://")
        }
        var attempt = 1
        var backoff = configuration.retryBackoff
        var mayHaveArrived = false
        while true {
            switch await engine.perform(request) {
            case .success(let response):
                return response
            case .failure(let failure):
                guard failure.transient, request.isRetryable, attempt < configuration.maxAttempts,
                    !Task.isCancelled
                else {
                    throw failure.error.afterAttemptThat(
                        mayHaveArrived: mayHaveArrived || failure.error.requestMayHaveArrived)
                }
                mayHaveArrived = mayHaveArrived || failure.error.requestMayHaveArrived
                attempt += 1
                try? await Task.sleep(for: backoff)
                backoff *= 2
            }
        }
    }

    /// Sends `request` once (no retries) and returns the answer with what the TLS connection was: the
    /// negotiated version and the server's certificate (nil for plain HTTP). Any HTTP answer is returned;
    /// transport and handshake failures throw.
    public func sendInspectingTLS(
        _ request: HTTPClientRequest
    ) async throws(HTTPError) -> (response: HTTPResponse, tls: TLSSessionInfo?) {
        guard request.url.hasPrefix("https://") || request.url.hasPrefix("http://") else {
            throw HTTPError(.invalidURL, "the URL must start with https:// or http://")
        }
        let (result, tls) = await engine.performInspecting(request)
        switch result {
        case .success(let response): return (response, tls)
        case .failure(let failure): throw failure.error
        }
    }

    /// `GET url`.
    public func get(_ url: String, headers: HTTPHeaders = [:]) async throws(HTTPError) -> HTTPResponse {
        try await send(HTTPClientRequest(method: .get, url: url, headers: headers))
    }

    /// `POST url` with `value` as JSON.
    public func post(
        _ url: String, json value: some Encodable, headers: HTTPHeaders = [:]
    ) async throws(HTTPError)
        -> HTTPResponse
    {
        try await send(try .json(.post, url, value, headers: headers))
    }

    /// Stops the client's thread; requests in progress fail with `notRunning`. Also done on deinit.
    public func shutdown() { engine.stop() }
}

/// A failed attempt, and whether trying again could help.
struct AttemptFailure: Error {
    let error: HTTPError
    let transient: Bool
}

/// Runs `curl_global_init` once per process, before the first handle exists.
enum CurlGlobal {
    static let initialized: Void = {
        guard curl_global_init(Int(CURL_GLOBAL_SSL | CURL_GLOBAL_WIN32)) == CURLE_OK else {
            fatalError("curl_global_init failed")
        }
    }()
}

/// Bytes at a fixed address for libcurl to read (blobs passed without copying), wiped when released.
final class PinnedBytes: @unchecked Sendable {
    let buffer: UnsafeMutableRawBufferPointer

    init(_ bytes: some DataProtocol) {
        buffer = .allocate(byteCount: max(bytes.count, 1), alignment: 1)
        _ = bytes.copyBytes(to: buffer)
        count = bytes.count
    }

    let count: Int

    deinit {
        // Not a secret for every use, but wiping is cheap and the key blob is one.
        OPENSSL_cleanse(buffer.baseAddress, buffer.count)
        buffer.deallocate()
    }
}

/// The client's thread and everything libcurl owns. Easy and multi handles are used on that thread
/// only; other threads talk to it through `lock` and `curl_multi_wakeup`.
final class CurlEngine: @unchecked Sendable {
    private let configuration: HTTPClientConfiguration
    private let multi: UnsafeMutableRawPointer
    /// The client's TLS session cache: a new connection to a server this client has spoken to resumes the session
    /// (TLS 1.3 tickets), as browsers and HTTP libraries do, instead of a full handshake. Used on the client's
    /// thread only, so it needs no locks.
    private let share: UnsafeMutableRawPointer?
    private let roots: PinnedBytes?
    private let certificate: PinnedBytes?
    private let key: PinnedBytes?
    private let lock = NSLock()
    private var submitted: [Transfer] = []
    private var cancelled: [Transfer] = []
    private var stopping = false
    private var stopped = false
    private var active: [UnsafeMutableRawPointer: Transfer] = [:]

    init(_ configuration: HTTPClientConfiguration) throws(HTTPError) {
        _ = CurlGlobal.initialized
        self.configuration = configuration
        guard let multi = curl_multi_init() else { throw HTTPError(.internalFailure, "curl_multi_init failed") }
        self.multi = multi
        _ = orchard_curl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, configuration.maxCachedConnections)
        share = orchard_curl_share_tls_sessions()
        roots = configuration.trustedRootsPEM.map { PinnedBytes(Array($0.utf8)) }
        certificate = configuration.clientCertificateChainPEM.map { PinnedBytes(Array($0.utf8)) }
        key = configuration.clientPrivateKeyPEM.map { secret in secret.withUnsafeBytes { PinnedBytes($0) } }
        let thread = Thread { [self] in
            orchard_name_current_thread("orchard-curl")
            run()
        }
        thread.start()
    }

    /// One attempt, without retries.
    func perform(_ request: HTTPClientRequest) async -> Result<HTTPResponse, AttemptFailure> {
        await perform(Transfer(request: request, maxBytes: configuration.maxResponseBytes))
    }

    /// One attempt that also records the TLS session (version, server certificate) when the answer starts.
    func performInspecting(
        _ request: HTTPClientRequest
    ) async -> (Result<HTTPResponse, AttemptFailure>, TLSSessionInfo?) {
        let transfer = Transfer(request: request, maxBytes: configuration.maxResponseBytes)
        transfer.inspectTLS = true
        let result = await perform(transfer)
        return (result, transfer.tlsSession)
    }

    private func perform(_ transfer: Transfer) async -> Result<HTTPResponse, AttemptFailure> {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                transfer.continuation = continuation
                let accepted = lock.withLock { () -> Bool in
                    guard !stopping else { return false }
                    submitted.append(transfer)
                    return true
                }
                if accepted {
                    curl_multi_wakeup(multi)
                } else {
                    transfer.finish(
                        .failure(
                            AttemptFailure(
                                error: HTTPError(.notRunning, "the HTTP client was shut down"), transient: false)))
                }
            }
        } onCancel: {
            lock.withLock { cancelled.append(transfer) }
            curl_multi_wakeup(multi)
        }
    }

    func stop() {
        let wake = lock.withLock { () -> Bool in
            defer { stopping = true }
            return !stopping
        }
        if wake { curl_multi_wakeup(multi) }
    }

    // MARK: - Client thread

    private func run() {
        while true {
            let (newTransfers, cancellations, stop) = lock.withLock { () -> ([Transfer], [Transfer], Bool) in
                defer {
                    submitted.removeAll()
                    cancelled.removeAll()
                }
                return (submitted, cancelled, stopping)
            }
            if stop { break }
            for transfer in newTransfers { start(transfer) }
            for transfer in cancellations { cancel(transfer) }
            var running: Int32 = 0
            curl_multi_perform(multi, &running)
            collectFinished()
            curl_multi_poll(multi, nil, 0, 1000, nil)
        }
        // Stopping: fail whatever is left, then release libcurl.
        let failure = AttemptFailure(error: HTTPError(.notRunning, "the HTTP client was shut down"), transient: false)
        let left = lock.withLock { () -> [Transfer] in
            stopped = true
            defer { submitted.removeAll() }
            return submitted
        }
        for transfer in left { transfer.finish(.failure(failure)) }
        for (_, transfer) in active { remove(transfer, result: .failure(failure)) }
        curl_multi_cleanup(multi)
        if let share { curl_share_cleanup(share) }
    }

    private func start(_ transfer: Transfer) {
        guard let easy = curl_easy_init() else {
            transfer.finish(
                .failure(AttemptFailure(error: HTTPError(.internalFailure, "curl_easy_init failed"), transient: false)))
            return
        }
        transfer.easy = easy
        do throws(HTTPError) {
            try configure(easy, for: transfer)
        } catch {
            transfer.easy = nil
            transfer.releaseHandles()
            curl_easy_cleanup(easy)
            transfer.finish(.failure(AttemptFailure(error: error, transient: false)))
            return
        }
        guard curl_multi_add_handle(multi, easy) == CURLM_OK else {
            transfer.releaseHandles()
            curl_easy_cleanup(easy)
            transfer.easy = nil
            transfer.finish(
                .failure(
                    AttemptFailure(error: HTTPError(.internalFailure, "curl_multi_add_handle failed"), transient: false)
                ))
            return
        }
        active[easy] = transfer
    }

    private func configure(_ easy: UnsafeMutableRawPointer, for transfer: Transfer) throws(HTTPError) {
        let request = transfer.request
        func set(_ option: CURLoption, _ value: Int) throws(HTTPError) {
            guard orchard_curl_setopt_long(easy, option, value) == CURLE_OK else {
                throw HTTPError(.internalFailure, "libcurl refused option \(option.rawValue)")
            }
        }
        func set(_ option: CURLoption, _ value: String) throws(HTTPError) {
            // libcurl copies string options.
            guard orchard_curl_setopt_pointer(easy, option, value) == CURLE_OK else {
                throw HTTPError(.internalFailure, "libcurl refused option \(option.rawValue)")
            }
        }
        func set(_ option: CURLoption, pointer: UnsafeRawPointer?) throws(HTTPError) {
            guard orchard_curl_setopt_pointer(easy, option, pointer) == CURLE_OK else {
                throw HTTPError(.internalFailure, "libcurl refused option \(option.rawValue)")
            }
        }
        func set(_ option: CURLoption, blob: PinnedBytes) throws(HTTPError) {
            guard orchard_curl_setopt_blob_nocopy(easy, option, blob.buffer.baseAddress, blob.count) == CURLE_OK else {
                throw HTTPError(.tlsFailure, "libcurl refused a certificate or key blob (option \(option.rawValue))")
            }
        }

        try set(CURLOPT_URL, request.url)
        if let share { try set(CURLOPT_SHARE, pointer: UnsafeRawPointer(share)) }
        try set(CURLOPT_PROTOCOLS_STR, "http,https")
        try set(CURLOPT_NOSIGNAL, 1)
        try set(CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1)
        try set(
            CURLOPT_SSLVERSION,
            configuration.minimumTLSVersion == .tls13 ? CURL_SSLVERSION_TLSv1_3 : CURL_SSLVERSION_TLSv1_2)
        try set(CURLOPT_SSL_VERIFYPEER, 1)
        try set(CURLOPT_SSL_VERIFYHOST, 2)
        if let roots {
            // Only the private root: without these NULLs libcurl would also trust the system bundle.
            try set(CURLOPT_CAINFO, pointer: nil)
            try set(CURLOPT_CAPATH, pointer: nil)
            try set(CURLOPT_CAINFO_BLOB, blob: roots)
        }
        if let certificate, let key {
            try set(CURLOPT_SSLCERT_BLOB, blob: certificate)
            try set(CURLOPT_SSLCERTTYPE, "PEM")
            try set(CURLOPT_SSLKEY_BLOB, blob: key)
            try set(CURLOPT_SSLKEYTYPE, "PEM")
        }
        if !configuration.connectTo.isEmpty {
            // "HOST::127.0.0.1:PORT": any port of HOST goes to the loopback port; libcurl copies nothing, so the
            // list lives as long as the transfer.
            var mapping: UnsafeMutablePointer<curl_slist>?
            for (host, port) in configuration.connectTo.sorted(by: { $0.key < $1.key }) {
                guard let appended = curl_slist_append(mapping, "\(host.lowercased())::127.0.0.1:\(port)") else {
                    curl_slist_free_all(mapping)
                    throw HTTPError(.internalFailure, "curl_slist_append failed")
                }
                mapping = appended
            }
            transfer.connectToList = mapping
            try set(CURLOPT_CONNECT_TO, pointer: UnsafeRawPointer(mapping))
        }
        try set(CURLOPT_CONNECTTIMEOUT_MS, Int(configuration.connectTimeout.milliseconds))
        try set(CURLOPT_TIMEOUT_MS, Int(configuration.requestTimeout.milliseconds))
        try set(CURLOPT_ERRORBUFFER, pointer: UnsafeRawPointer(transfer.errorBuffer))

        let context = UnsafeRawPointer(Unmanaged.passUnretained(transfer).toOpaque())
        try set(CURLOPT_PRIVATE, pointer: context)
        try set(CURLOPT_WRITEDATA, pointer: context)
        try set(CURLOPT_HEADERDATA, pointer: context)
        guard
            orchard_curl_setopt_callback(
                easy, CURLOPT_WRITEFUNCTION,
                { data, size, count, context in
                    Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue().receiveBody(data, size * count)
                }) == CURLE_OK,
            orchard_curl_setopt_callback(
                easy, CURLOPT_HEADERFUNCTION,
                { data, size, count, context in
                    Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue().receiveHeader(data, size * count)
                }) == CURLE_OK,
            orchard_curl_count_requests(easy, transfer.requestsSent) == CURLE_OK
        else { throw HTTPError(.internalFailure, "libcurl refused a callback") }

        switch request.method {
        case .get:
            break
        case .head:
            try set(CURLOPT_NOBODY, 1)
        default:
            if request.method == .post || !request.body.isEmpty {
                try set(CURLOPT_POST, 1)
                guard orchard_curl_setopt_offset(easy, CURLOPT_POSTFIELDSIZE_LARGE, request.body.count) == CURLE_OK
                else { throw HTTPError(.internalFailure, "libcurl refused the body size") }
                // COPYPOSTFIELDS copies the body, so nothing of ours needs to stay pinned.
                let copied = request.body.withUnsafeBytes { bytes in
                    orchard_curl_setopt_pointer(
                        easy, CURLOPT_COPYPOSTFIELDS, bytes.baseAddress ?? UnsafeRawPointer(transfer.errorBuffer))
                }
                guard copied == CURLE_OK else { throw HTTPError(.internalFailure, "libcurl refused the request body") }
            }
            if request.method != .post { try set(CURLOPT_CUSTOMREQUEST, request.method.rawValue) }
        }

        var list: UnsafeMutablePointer<curl_slist>?
        for field in request.headers {
            let line = "\(field.name): \(field.value)"
            guard !line.contains("\r"), !line.contains("\n") else {
                curl_slist_free_all(list)
                throw HTTPError(.invalidConfiguration, "request header \(field.name) contains a line break")
            }
            guard let appended = curl_slist_append(list, line) else {
                curl_slist_free_all(list)
                throw HTTPError(.internalFailure, "curl_slist_append failed")
            }
            list = appended
        }
        transfer.headerList = list
        if let list { try set(CURLOPT_HTTPHEADER, pointer: UnsafeRawPointer(list)) }
    }

    private func collectFinished() {
        var left: Int32 = 0
        while let message = curl_multi_info_read(multi, &left) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle,
                let transfer = active[easy]
            else { continue }
            let code = message.pointee.data.result
            remove(transfer, result: outcome(of: transfer, easy: easy, code: code))
        }
    }

    private func cancel(_ transfer: Transfer) {
        guard let easy = transfer.easy, active[easy] != nil else {
            // Not started yet: it is still in `submitted` or already done; finish it either way.
            transfer.finish(
                .failure(AttemptFailure(error: HTTPError(.cancelled, "the request was cancelled"), transient: false)))
            return
        }
        remove(
            transfer,
            result: .failure(
                AttemptFailure(error: HTTPError(.cancelled, "the request was cancelled"), transient: false)))
    }

    private func remove(_ transfer: Transfer, result: Result<HTTPResponse, AttemptFailure>) {
        if let easy = transfer.easy {
            active[easy] = nil
            curl_multi_remove_handle(multi, easy)
            curl_easy_cleanup(easy)
            transfer.easy = nil
        }
        transfer.releaseHandles()
        transfer.finish(result)
    }

    private func outcome(
        of transfer: Transfer, easy: UnsafeMutableRawPointer, code: CURLcode
    ) -> Result<HTTPResponse, AttemptFailure> {
        if code == CURLE_OK {
            var status = 0
            _ = orchard_curl_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
            return .success(
                HTTPResponse(
                    status: HTTPStatus(code: status, reason: transfer.reason), headers: transfer.headers,
                    body: transfer.body))
        }
        let detail = transfer.errorText.isEmpty ? String(cString: curl_easy_strerror(code)) : transfer.errorText
        func failure(_ code: HTTPError.Code, _ transient: Bool, _ what: String) -> Result<HTTPResponse, AttemptFailure>
        {
            var error = HTTPError(code, "\(what): \(detail)")
            error.requestMayHaveArrived = transfer.requestsSent.pointee > 0
            return .failure(AttemptFailure(error: error, transient: transient))
        }
        // libcurl resends a request whose reused connection died before any answer on a fresh connection, and
        // reports only that connection's failure. If the request went out before, the server may have acted on
        // it: that is not "could not connect", which callers read as "nothing was sent".
        let connectPhase: [CURLcode] = [
            CURLE_COULDNT_CONNECT, CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM,
            CURLE_SSL_CIPHER, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
            CURLE_SSL_ENGINE_INITFAILED, CURLE_USE_SSL_FAILED,
        ]
        if transfer.requestsSent.pointee > 0, connectPhase.contains(code) {
            return failure(.transportFailure, true, "the connection closed after the request was sent")
        }
        switch code {
        case CURLE_WRITE_ERROR where transfer.tooLarge:
            var error = HTTPError(
                .responseTooLarge, "the response is larger than \(configuration.maxResponseBytes) bytes")
            error.requestMayHaveArrived = true
            return .failure(AttemptFailure(error: error, transient: false))
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            return failure(.connectionFailed, false, "cannot resolve the host")
        case CURLE_COULDNT_CONNECT:
            return failure(.connectionFailed, true, "cannot connect")
        case CURLE_OPERATION_TIMEDOUT:
            return failure(.timedOut, true, "timed out")
        case CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE:
            return failure(.transportFailure, true, "the connection failed")
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
            CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
            CURLE_SSL_ENGINE_INITFAILED, CURLE_USE_SSL_FAILED:
            return failure(.connectionFailed, false, "the TLS handshake failed")
        case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL:
            return failure(.invalidURL, false, "the URL was refused")
        default:
            return failure(.transportFailure, false, "the request failed")
        }
    }
}

/// One attempt in progress. Its callbacks run on the client thread; `finish` resumes the caller once.
final class Transfer: @unchecked Sendable {
    let request: HTTPClientRequest
    let maxBytes: Int
    var continuation: CheckedContinuation<Result<HTTPResponse, AttemptFailure>, Never>?
    var easy: UnsafeMutableRawPointer?
    var headerList: UnsafeMutablePointer<curl_slist>?
    var connectToList: UnsafeMutablePointer<curl_slist>?
    /// Whether to record ``tlsSession`` when the first header line arrives (the session is live then).
    var inspectTLS = false
    var tlsSession: TLSSessionInfo?
    let errorBuffer: UnsafeMutablePointer<CChar>
    /// How many times libcurl was about to send the request (once per connection it used); written by libcurl on
    /// the client thread.
    let requestsSent: UnsafeMutablePointer<Int>
    var body = Data()
    var headers = HTTPHeaders()
    var reason = ""
    var tooLarge = false
    private let lock = NSLock()
    private var finished = false

    init(request: HTTPClientRequest, maxBytes: Int) {
        self.request = request
        self.maxBytes = maxBytes
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        requestsSent = .allocate(capacity: 1)
        requestsSent.initialize(to: 0)
    }

    deinit {
        releaseHandles()
        errorBuffer.deallocate()
        requestsSent.deallocate()
    }

    var errorText: String { String(cString: errorBuffer) }

    func releaseHandles() {
        if let headerList { curl_slist_free_all(headerList) }
        headerList = nil
        if let connectToList { curl_slist_free_all(connectToList) }
        connectToList = nil
    }

    func finish(_ result: Result<HTTPResponse, AttemptFailure>) {
        let continuation = lock.withLock { () -> CheckedContinuation<Result<HTTPResponse, AttemptFailure>, Never>? in
            guard !finished else { return nil }
            finished = true
            defer { self.continuation = nil }
            return self.continuation
        }
        continuation?.resume(returning: result)
    }

    func receiveBody(_ data: UnsafeMutablePointer<CChar>?, _ count: Int) -> Int {
        guard let data else { return 0 }
        if body.count + count > maxBytes {
            tooLarge = true
            return 0  // makes libcurl stop with CURLE_WRITE_ERROR
        }
        body.append(UnsafeRawPointer(data).assumingMemoryBound(to: UInt8.self), count: count)
        return count
    }

    func receiveHeader(_ data: UnsafeMutablePointer<CChar>?, _ count: Int) -> Int {
        guard let data else { return 0 }
        if inspectTLS, tlsSession == nil, let easy { tlsSession = Self.tlsSession(of: easy) }
        // On the bytes: a response has several header lines, and Foundation's trimming goes through NSString.
        UnsafeRawBufferPointer(start: data, count: count).withMemoryRebound(to: UInt8.self) { bytes in
            let line = Self.trimmed(bytes[...])
            if line.starts(with: "HTTP/".utf8) {
                // A new response (after 100 Continue, for instance): start over. The reason follows the
                // second space of the status line.
                headers = HTTPHeaders()
                let spaces = line.indices.filter { line[$0] == UInt8(ascii: " ") }.prefix(2)
                reason = spaces.count == 2 ? String(decoding: line[(spaces.last! + 1)...], as: UTF8.self) : ""
            } else if let colon = line.firstIndex(of: UInt8(ascii: ":")) {
                headers.add(
                    String(decoding: Self.trimmed(line[..<colon]), as: UTF8.self),
                    String(decoding: Self.trimmed(line[(colon + 1)...]), as: UTF8.self))
            }
        }
        return count
    }

    /// Without leading and trailing spaces, tabs, CR and LF (HTTP's optional whitespace and the line end).
    /// The negotiated TLS version and the server's certificate of `easy`'s connection, read while the transfer
    /// runs (libcurl's `CURLINFO_TLS_SSL_PTR` is the OpenSSL `SSL` only then); nil without TLS.
    static func tlsSession(of easy: UnsafeMutableRawPointer) -> TLSSessionInfo? {
        var raw: UnsafeMutableRawPointer?
        guard orchard_curl_getinfo_pointer(easy, CURLINFO_TLS_SSL_PTR, &raw) == CURLE_OK, let raw else { return nil }
        let info = raw.assumingMemoryBound(to: curl_tlssessioninfo.self).pointee
        guard info.backend == CURLSSLBACKEND_OPENSSL, let internals = info.internals else { return nil }
        let ssl = OpaquePointer(internals)
        let version = SSL_get_version(ssl).map { String(cString: $0) } ?? "unknown"
        var certificate: [UInt8]?
        if let x509 = SSL_get0_peer_certificate(ssl) {
            var out: UnsafeMutablePointer<UInt8>?
            let length = i2d_X509(x509, &out)
            if length > 0, let out {
                certificate = Array(UnsafeBufferPointer(start: out, count: Int(length)))
                orchard_http_openssl_free(out)
            }
        }
        return TLSSessionInfo(version: version, peerCertificateDER: certificate, resumed: SSL_session_reused(ssl) == 1)
    }

    static func trimmed(_ bytes: Slice<UnsafeBufferPointer<UInt8>>) -> Slice<UnsafeBufferPointer<UInt8>> {
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A }
        var start = bytes.startIndex
        var end = bytes.endIndex
        while start < end, isSpace(bytes[start]) { start += 1 }
        while end > start, isSpace(bytes[end - 1]) { end -= 1 }
        return bytes[start..<end]
    }
}

extension Duration {
    /// Whole milliseconds, at least 1.
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return max(1, seconds * 1000 + attoseconds / 1_000_000_000_000_000)
    }
}
