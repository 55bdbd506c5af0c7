internal import CHTTPShims
internal import CLibevent
internal import COpenSSL
import Foundation
import OrchardCrypto
import OrchardLogging

// The server's per-listener, per-connection and per-request state, and the evhttp callbacks that drive
// it. Everything here runs on its event loop's thread (see the threading model on HTTPServer).

/// The slot in each `SSL` object that holds its ``Connection``; OpenSSL calls the free function when it
/// frees the `SSL`, which is when libevent closes the connection.
enum ConnectionSlot {
    static let index: Int32 = {
        let index = CRYPTO_get_ex_new_index(CRYPTO_EX_INDEX_SSL, 0, nil, nil, nil) { _, pointer, _, _, _, _ in
            guard let pointer else { return }
            Unmanaged<Connection>.fromOpaque(pointer).takeRetainedValue().didClose()
        }
        guard index >= 0 else { fatalError("OpenSSL: no ex_data index available") }
        return index
    }()
}

/// One listener served by one loop: an `evhttp` object and its bound socket. Used on its loop's thread
/// only.
final class ListenerInstance: @unchecked Sendable {
    let server: HTTPServer
    let loop: EventLoop
    let tls: ServerTLSContext
    let peers: ListenerPeers
    private var http: OpaquePointer?
    private var bound: OpaquePointer?
    private(set) var draining = false
    /// Whether this listener stopped accepting because the server is saturated (see
    /// ``AdmissionLimits/acceptBound``), and the timer that checks again while it is.
    private(set) var acceptPaused = false
    private var acceptRecheck: OpaquePointer?
    /// Connections not read for now because they carry only a class that is over its bound (see
    /// ``AdmissionLimits/holdBackLimit``), oldest first; the timer that reads them again; the read limit that holds
    /// them (one byte a minute).
    private var heldBack: [Connection] = []
    private var holdTimer: OpaquePointer?
    private var holdRate: OpaquePointer?
    /// Open, admitted connections.
    var connections: [ObjectIdentifier: Connection] = [:]
    /// Requests whose handler has not replied yet.
    var inFlight: [ObjectIdentifier: InFlight] = [:]

    init(server: HTTPServer, loop: EventLoop, tls: ServerTLSContext, peers: ListenerPeers) {
        self.server = server
        self.loop = loop
        self.tls = tls
        self.peers = peers
    }

    var headerTimeout: timeval { Self.timeval(server.configuration.limits.headerTimeout) }

    static func timeval(_ duration: Duration) -> timeval {
        let (seconds, attoseconds) = duration.components
        return Glibc.timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
    }

    /// Creates the evhttp object on the loop's base and hands it the listening socket. Called before the
    /// loop thread starts.
    func attach(socket fd: Int32) throws(HTTPError) {
        guard let http = evhttp_new(loop.base) else {
            close(fd)
            throw HTTPError(.internalFailure, "evhttp_new failed")
        }
        self.http = http
        let limits = server.configuration.limits
        var idle = Self.timeval(limits.idleTimeout)
        evhttp_set_timeout_tv(http, &idle)
        evhttp_set_max_headers_size(http, limits.maxHeaderBytes)
        evhttp_set_max_body_size(http, limits.maxBodyBytes)
        let methods: [evhttp_cmd_type] = [
            EVHTTP_REQ_GET, EVHTTP_REQ_POST, EVHTTP_REQ_HEAD, EVHTTP_REQ_PUT, EVHTTP_REQ_DELETE, EVHTTP_REQ_OPTIONS,
            EVHTTP_REQ_PATCH,
        ]
        evhttp_set_allowed_methods(http, UInt16(methods.reduce(0) { $0 | $1.rawValue }))
        // Read (and discard) an oversized body before answering 413, so the client sees the answer
        // instead of a reset.
        _ = evhttp_set_flags(http, EVHTTP_SERVER_LINGERING_CLOSE)
        let context = Unmanaged.passUnretained(self).toOpaque()
        evhttp_set_bevcb(
            http,
            { base, context in
                Unmanaged<ListenerInstance>.fromOpaque(context!).takeUnretainedValue().newConnection(base: base!)
            }, context)
        evhttp_set_gencb(
            http,
            { request, context in
                Unmanaged<ListenerInstance>.fromOpaque(context!).takeUnretainedValue().handle(request!)
            }, context)
        guard let bound = evhttp_accept_socket_with_handle(http, fd) else {
            close(fd)
            throw HTTPError(.bindFailed, "evhttp could not accept on its socket")
        }
        self.bound = bound
    }

    /// On the loop thread, once the loop stopped: abandons what is still in flight and frees evhttp,
    /// which closes every remaining connection.
    func teardown() {
        for request in inFlight.values { request.abandon() }
        inFlight.removeAll()
        if let acceptRecheck { event_free(acceptRecheck) }
        acceptRecheck = nil
        if let holdTimer { event_free(holdTimer) }
        holdTimer = nil
        readHeldBack()  // no bufferevent keeps the read limit, which is freed below
        if let http {
            if let bound { evhttp_del_accept_socket(http, bound) }
            evhttp_free(http)
        }
        http = nil
        bound = nil
        if let holdRate { ev_token_bucket_cfg_free(holdRate) }
        holdRate = nil
    }

    /// On the loop thread, at the start of a graceful shutdown.
    func drain() {
        draining = true
        readHeldBack()
        if let acceptRecheck { event_del(acceptRecheck) }
        if acceptPaused {
            acceptPaused = false
            server.acceptResumed()
        }
        if let http, let bound {
            evhttp_del_accept_socket(http, bound)  // closes the listening socket: new connects are refused
            self.bound = nil
        }
        for connection in connections.values where connection.isIdle { connection.cut() }
    }

    // MARK: - Callbacks from evhttp (loop thread)

    /// evhttp's bufferevent callback: one call per accepted connection, before its socket is attached.
    private func newConnection(base: OpaquePointer) -> OpaquePointer? {
        // Without a bufferevent evhttp would fall back to plain TCP, so failing to allocate is fatal.
        guard let ssl = SSL_new(tls.pointer) else { fatalError("SSL_new failed: out of memory") }
        let connection = Connection(instance: self, ssl: ssl)
        SSL_set_ex_data(ssl, ConnectionSlot.index, Unmanaged.passRetained(connection).toOpaque())
        // Let the reply buffer move between write attempts (it is linearized after evhttp queued it, see
        // InFlight.send). No read-ahead: bufferevent_openssl waits for the socket to become readable
        // and would never see a request OpenSSL had already buffered with the end of the handshake.
        _ = SSL_ctrl(ssl, SSL_CTRL_MODE, Int(SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER), nil)
        guard
            let bev = bufferevent_openssl_socket_new(
                base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING, Int32(BEV_OPT_CLOSE_ON_FREE.rawValue))
        else {
            SSL_free(ssl)
            fatalError("bufferevent_openssl_socket_new failed: out of memory")
        }
        _ = bufferevent_priority_set(bev, EventLoop.normalPriority)
        connection.opened(bev: bev, base: base, admitted: !draining && server.admitConnection())
        updateAccepting()
        return bev
    }

    /// Stops accepting while the server is saturated (every class over its bound, enough connections open: see
    /// ``AdmissionControl/refusesNewConnections(openConnections:)``), so that a connection that would only be
    /// answered 503 costs no TLS handshake; accepts again, checking every millisecond while paused, once it is not.
    func updateAccepting() {
        guard let admission = server.router.admission, !draining, let bound,
            let listener = evhttp_bound_socket_get_listener(bound)
        else { return }
        let refuse = admission.refusesNewConnections(openConnections: server.connectionCount)
        if refuse && !acceptPaused {
            guard evconnlistener_disable(listener) == 0 else { return }
            acceptPaused = true
            server.acceptPausedOnce()
            armAcceptRecheck()
            server.updateAcceptingOnOtherLoops(than: loop)
        } else if !refuse && acceptPaused {
            guard evconnlistener_enable(listener) == 0 else { return }
            acceptPaused = false
            server.acceptResumed()
        } else if acceptPaused {
            armAcceptRecheck()
        }
    }

    /// After a reply on `connection`: holds it back if its last two requests were of one class and that class is over
    /// its bound (not counting the request just answered, if it was admitted). Payments are never held back: their
    /// latency is what the server protects, and one over the bound is shed at once.
    func considerHoldingBack(_ connection: Connection, admitted: Bool) {
        guard let admission = server.router.admission, !draining, let routeClass = connection.holdableClass,
            !routeClass.isUrgent, connection.heldSince == nil, !connection.closed, let bev = connection.bev
        else { return }
        guard admission.inFlight - (admitted ? 1 : 0) >= admission.bound(for: routeClass) else { return }
        if holdRate == nil {
            var minute = Glibc.timeval(tv_sec: 60, tv_usec: 0)
            holdRate = ev_token_bucket_cfg_new(1, 1, Int(Int32.max), Int(Int32.max), &minute)
        }
        // The bucket starts with one byte, which bufferevent_openssl would spend on a whole TLS record (it reads
        // as much as the buffer it reserved holds): taking that byte at once suspends reading before any.
        guard let holdRate, bufferevent_set_rate_limit(bev, holdRate) == 0 else { return }
        guard bufferevent_decrement_read_limit(bev, 1) == 0 else {
            _ = bufferevent_set_rate_limit(bev, nil)
            return
        }
        connection.heldSince = SystemClock().nanoseconds()
        heldBack.append(connection)
        server.heldBackChanged(by: 1)
        armHoldTimer()
    }

    /// Reads held-back connections again, oldest first, as many per class as it has room for, and any held for
    /// ``AdmissionLimits/holdBackLimit``; checks again every millisecond while some are held.
    private func readHeldBackWithRoom() {
        guard let admission = server.router.admission else { return readHeldBack() }
        let now = SystemClock().nanoseconds()
        let (seconds, attoseconds) = admission.limits.holdBackLimit.components
        let limit = UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000)
        var room: [String: Int] = [:]
        var kept: [Connection] = []
        for connection in heldBack {
            guard let routeClass = connection.holdableClass, let since = connection.heldSince else {
                release(connection)
                continue
            }
            let free = room[routeClass.name] ?? max(0, admission.bound(for: routeClass) - admission.inFlight)
            if free > 0 || now &- since >= limit {
                release(connection)
                room[routeClass.name] = max(0, free - 1)
            } else {
                room[routeClass.name] = free
                kept.append(connection)
            }
        }
        heldBack = kept
        if !heldBack.isEmpty { armHoldTimer() }
    }

    /// Reads every held-back connection again (at shutdown).
    private func readHeldBack() {
        for connection in heldBack { release(connection) }
        heldBack.removeAll()
    }

    private func release(_ connection: Connection) {
        guard connection.heldSince != nil else { return }
        connection.heldSince = nil
        server.heldBackChanged(by: -1)
        if !connection.closed, let bev = connection.bev { _ = bufferevent_set_rate_limit(bev, nil) }
    }

    /// A held-back connection closed.
    func forget(_ connection: Connection) {
        guard connection.heldSince != nil else { return }
        heldBack.removeAll { $0 === connection }
        connection.heldSince = nil
        server.heldBackChanged(by: -1)
    }

    private func armHoldTimer() {
        if holdTimer == nil {
            holdTimer = event_new(
                loop.base, -1, 0,
                { _, _, context in
                    Unmanaged<ListenerInstance>.fromOpaque(context!).takeUnretainedValue().readHeldBackWithRoom()
                }, Unmanaged.passUnretained(self).toOpaque())
            if let holdTimer { _ = event_priority_set(holdTimer, EventLoop.urgentPriority) }
        }
        guard let holdTimer else { return }
        var delay = Glibc.timeval(tv_sec: 0, tv_usec: 1000)
        event_add(holdTimer, &delay)
    }

    private func armAcceptRecheck() {
        if acceptRecheck == nil {
            acceptRecheck = event_new(
                loop.base, -1, 0,
                { _, _, context in
                    Unmanaged<ListenerInstance>.fromOpaque(context!).takeUnretainedValue().updateAccepting()
                }, Unmanaged.passUnretained(self).toOpaque())
        }
        guard let acceptRecheck else { return }
        var delay = Glibc.timeval(tv_sec: 0, tv_usec: 1000)
        event_add(acceptRecheck, &delay)
    }

    /// evhttp's request callback: a complete request (headers and body) arrived.
    private func handle(_ request: OpaquePointer) {
        guard let evcon = evhttp_request_get_connection(request),
            let bev = evhttp_connection_get_bufferevent(evcon),
            let ssl = bufferevent_openssl_get_ssl(bev),
            let slot = SSL_get_ex_data(ssl, ConnectionSlot.index)
        else {
            evhttp_send_error(request, 500, "Internal Server Error")
            return
        }
        let connection = Unmanaged<Connection>.fromOpaque(slot).takeUnretainedValue()
        // A request read before the connection's first timer tick: its peer is checked now.
        guard connection.peerAdmitted || connection.admitPeer() else {
            evhttp_send_error(request, 403, "Forbidden")
            return
        }
        connection.requestStarted()
        let inFlight = InFlight(request: request, connection: connection, instance: self)
        self.inFlight[ObjectIdentifier(inFlight)] = inFlight

        let parsed = RequestParsing.parse(request, connection: connection, evcon: evcon, server: server)
        inFlight.requestID = parsed.requestID
        inFlight.method = parsed.method
        inFlight.path = parsed.path
        if server.logger.isEnabled(.debug) { inFlight.startNanoseconds = SystemClock().nanoseconds() }

        switch server.router.match(parsed.method, path: parsed.path) {
        case .found(let route, let parameters):
            var request = parsed
            request.pathParameters = parameters
            let handler: Router.Handler
            let release: (@Sendable () -> Void)?
            do {
                try server.router.checkHost(route, request)
                try server.router.authorize(route, request)
                handler = try server.router.handler(for: route, request)
                release = try server.router.admit(route, request)
            } catch let overload as OverloadError {
                // A shed request is answered with the class's ready-made 503; a rate-limited one with its 429.
                let routeClass = server.router.routeClass(of: route)
                connection.prioritize(routeClass)
                connection.carried(routeClass)
                if overload.httpStatus == .serviceUnavailable, let admission = server.router.admission {
                    inFlight.complete(admission.shed(routeClass).response)
                } else {
                    inFlight.complete(overload.response)
                }
                return
            } catch {
                inFlight.complete(ErrorMapping.response(for: error, requestID: parsed.requestID, logger: server.logger))
                return
            }
            if server.router.admission != nil {
                let routeClass = server.router.routeClass(of: route)
                connection.prioritize(routeClass)
                connection.carried(routeClass)
                inFlight.admitted = release != nil
                updateAccepting()
            }
            let logger = server.logger
            let revocations = server.router.revocations
            inFlight.task = Task(executorPreference: loop) { [request] in
                defer { release?() }
                let response: HTTPResponse
                do {
                    if let revocations, let certificate = request.clientCertificate,
                        try await revocations.isRevoked(certificate)
                    {
                        throw HTTPError(
                            .clientCertificateRevoked,
                            "this client certificate was revoked; ask its issuer for a new one")
                    }
                    response = try await handler(request)
                } catch {
                    response = ErrorMapping.response(for: error, requestID: request.requestID, logger: logger)
                }
                inFlight.complete(response)
            }
        case .methodNotAllowed(let allowed):
            var response = ErrorMapping.response(
                for: HTTPError(
                    .methodNotAllowed,
                    "\(parsed.method) is not allowed here; use \(allowed.map(\.rawValue).joined(separator: ", "))"),
                requestID: parsed.requestID, logger: server.logger)
            response.headers.set("Allow", allowed.map(\.rawValue).joined(separator: ", "))
            inFlight.complete(response)
        case .notFound:
            inFlight.complete(
                ErrorMapping.response(
                    for: HTTPError(.notFound, "no endpoint at this path"), requestID: parsed.requestID,
                    logger: server.logger))
        }
    }
}

/// One accepted connection. Owned by its `SSL` object's ex-data; used on its loop's thread only.
final class Connection {
    unowned let instance: ListenerInstance
    let ssl: OpaquePointer
    private(set) var bev: OpaquePointer?
    private var timer: OpaquePointer?
    private var admitted = false
    /// Whether the peer may use this listener (``ListenerPeers``); until checked, only anyone's listeners are.
    private(set) var peerAdmitted: Bool
    private(set) var closed = false
    private var activeRequests = 0
    /// Whether a request is being received: from accept (handshake included) until the first reply,
    /// and on a kept-alive connection from the first timer tick that sees new bytes.
    private var receiving = true
    private var readMark: UInt = 0
    private var certificate: ClientCertificate??
    private var peer: String?
    private var urgent = false
    /// The class of the last request and how many requests in a row were of it.
    private var lastClass: RouteClass?
    private var classRun = 0
    /// When the connection was held back (nil: it is read).
    var heldSince: UInt64?

    init(instance: ListenerInstance, ssl: OpaquePointer) {
        self.instance = instance
        self.ssl = ssl
        peerAdmitted = instance.peers == .anyone
    }

    func opened(bev: OpaquePointer, base: OpaquePointer, admitted: Bool) {
        self.bev = bev
        self.admitted = admitted
        timer = event_new(
            base, -1, 0,
            { _, _, context in
                Unmanaged<Connection>.fromOpaque(context!).takeUnretainedValue().timerFired()
            }, Unmanaged.passUnretained(self).toOpaque())
        if admitted {
            instance.connections[ObjectIdentifier(self)] = self
            // A listener for one user checks the peer on the next loop turn, once evhttp has attached the socket.
            arm(peerAdmitted ? instance.headerTimeout : Glibc.timeval(tv_sec: 0, tv_usec: 0))
        } else {
            // Over the limit: close it on the next loop turn, once evhttp has attached the socket.
            arm(Glibc.timeval(tv_sec: 0, tv_usec: 0))
        }
    }

    /// Called by OpenSSL's ex-data free callback, when libevent frees the connection.
    func didClose() {
        closed = true
        if let timer, !instance.loop.isTearingDown { event_free(timer) }
        timer = nil
        bev = nil
        if admitted {
            instance.connections[ObjectIdentifier(self)] = nil
            instance.server.connectionClosed()
        }
        if urgent { instance.server.urgentConnectionChanged(by: -1) }
        if !instance.loop.isTearingDown { instance.forget(self) }
    }

    /// The class this connection carries alone (its last two requests were of it), if any.
    var holdableClass: RouteClass? { classRun >= 2 ? lastClass : nil }

    /// Notes the class of a request this connection carried.
    func carried(_ routeClass: RouteClass) {
        classRun = lastClass?.name == routeClass.name ? classRun + 1 : 1
        lastClass = routeClass
    }

    /// Serves this connection ahead of the others (libevent's urgent priority) while the requests it carries are of
    /// an urgent class (payments): a payment terminal's connection is read and answered first under load.
    func prioritize(_ routeClass: RouteClass) {
        guard routeClass.isUrgent != urgent, !closed, let bev else { return }
        let priority = routeClass.isUrgent ? EventLoop.urgentPriority : EventLoop.normalPriority
        // libevent refuses to change the priority of an event that is active; the next request tries again.
        guard bufferevent_priority_set(bev, priority) == 0 else { return }
        urgent = routeClass.isUrgent
        instance.server.urgentConnectionChanged(by: urgent ? 1 : -1)
    }

    /// The verified client certificate, read once per connection.
    var clientCertificate: ClientCertificate? {
        if let certificate { return certificate }
        let read = PeerCertificate.verified(ssl)
        certificate = .some(read)
        return read
    }

    func remoteAddress(_ evcon: OpaquePointer) -> String {
        if let peer { return peer }
        var address: UnsafeMutablePointer<CChar>?
        var port: UInt16 = 0
        evhttp_connection_get_peer(evcon, &address, &port)
        let text = address.map { String(cString: $0) } ?? ""
        peer = text
        return text
    }

    /// Nothing in flight and nothing received since the last reply (or since accept).
    var isIdle: Bool { activeRequests == 0 && bytesRead == readMark }

    private var bytesRead: UInt {
        guard !closed, let bio = SSL_get_rbio(ssl) else { return readMark }
        return UInt(BIO_number_read(bio))
    }

    func requestStarted() {
        if let timer { event_del(timer) }
        activeRequests += 1
    }

    func requestFinished() {
        activeRequests -= 1
        receiving = false
        guard !closed else { return }
        readMark = bytesRead
        if activeRequests == 0 { arm(instance.headerTimeout) }
    }

    /// Closes the socket under evhttp: it sees end-of-file and frees the connection normally.
    /// Checks the peer against the listener's ``ListenerPeers``; a peer that may not connect is cut. Whether it may.
    func admitPeer() -> Bool {
        guard !peerAdmitted else { return true }
        guard case .localUser(let owner) = instance.peers, !closed, let bev else { return false }
        let fd = bufferevent_getfd(bev)
        var uid: UInt32 = 0
        let status = fd >= 0 ? orchard_tcp_peer_uid(fd, &uid) : EBADF
        guard status == 0, uid == owner else {
            let who = status == 0 ? "user \(uid)" : "an unknown user (\(String(cString: strerror(status))))"
            instance.server.logger.info("refused a connection from \(who): the listener serves only user \(owner)")
            cut()
            return false
        }
        peerAdmitted = true
        return true
    }

    func cut() {
        guard !closed, let bev else { return }
        let fd = bufferevent_getfd(bev)
        if fd >= 0 { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    private func arm(_ delay: timeval) {
        guard let timer else { return }
        var delay = delay
        event_add(timer, &delay)
    }

    private func timerFired() {
        guard !closed else { return }
        guard admitted else {
            cut()
            return
        }
        if !peerAdmitted {
            if admitPeer() { arm(instance.headerTimeout) }
            return
        }
        guard activeRequests == 0 else { return }
        if !receiving {
            // Kept alive after a reply. Silent so far: the idle timeout governs it. If bytes arrived
            // since, a request has started: it gets a full header timeout from this tick.
            if bytesRead != readMark { receiving = true }
            arm(instance.headerTimeout)
            return
        }
        instance.server.logger.debug("closing a connection that did not complete its request in time")
        cut()
    }
}

/// A request handed to a handler and not yet answered. Retained by its listener instance (and the
/// handler's task) until the reply is sent, so the `evhttp_request` it points to stays valid: evhttp
/// frees a request only after the reply, even if the client went away meanwhile.
final class InFlight: @unchecked Sendable {
    // Used on the loop thread only, except `complete`, which hops there.
    private let request: OpaquePointer
    private let connection: Connection
    private let instance: ListenerInstance
    var task: Task<Void, Never>?
    var requestID = InFlight.placeholderID
    var method = HTTPMethod.get
    var path = ""
    var startNanoseconds: UInt64 = 0
    /// Whether admission control admitted the request (it counts in flight until its task ends).
    var admitted = false
    private var done = false
    private var abandoned = false
    /// Headers the server sets itself; a handler's values for them are ignored.
    static let managedHeaders = ["Content-Length", "Connection", "Transfer-Encoding", "X-Request-Id"]
    static let placeholderID = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))

    init(request: OpaquePointer, connection: Connection, instance: ListenerInstance) {
        self.request = request
        self.connection = connection
        self.instance = instance
    }

    /// Sends `response` on the request's loop thread (directly when already there).
    func complete(_ response: HTTPResponse) {
        if instance.loop.inLoopThread {
            send(response)
        } else {
            instance.loop.execute { [self] in send(response) }
        }
    }

    /// The server stopped before the handler answered: the evhttp request is about to be freed.
    func abandon() {
        abandoned = true
        task?.cancel()
    }

    private func send(_ response: HTTPResponse) {
        guard !done else { return }
        done = true
        instance.inFlight[ObjectIdentifier(self)] = nil
        guard !abandoned else { return }
        let headers = evhttp_request_get_output_headers(request)
        for field in response.headers {
            if Self.managedHeaders.contains(where: { HTTPHeaders.sameName($0, field.name) }) { continue }
            // evhttp refuses values with CR or LF (header injection); such a header is dropped.
            if evhttp_add_header(headers, field.name, field.value) != 0 {
                instance.server.logger.warning(
                    "dropped a response header with an invalid name or value",
                    metadata: ["request_id": .uuid(requestID), "header": .string(field.name)])
            }
        }
        if !response.body.isEmpty, response.headers["Content-Type"] == nil {
            evhttp_add_header(headers, "Content-Type", "application/octet-stream")
        }
        evhttp_add_header(headers, "X-Request-Id", requestID.lowercasedString)
        if instance.draining { evhttp_add_header(headers, "Connection", "close") }
        if !response.body.isEmpty {
            let output = evhttp_request_get_output_buffer(request)
            response.body.withUnsafeBytes { bytes in _ = evbuffer_add(output, bytes.baseAddress, bytes.count) }
        }
        evhttp_send_reply(request, Int32(response.status.code), response.status.reason, nil)
        // evhttp queued the head and the body as separate buffers, which bufferevent_openssl would send
        // as two TLS records in two write(2) calls. One contiguous buffer makes it one of each.
        if let bev = connection.bev, let output = bufferevent_get_output(bev), evbuffer_get_length(output) <= 16384 {
            evbuffer_pullup(output, -1)
        }
        connection.requestFinished()
        if instance.acceptPaused { instance.updateAccepting() }
        instance.considerHoldingBack(connection, admitted: admitted)
        let logger = instance.server.logger
        if logger.isEnabled(.debug) {
            let micros = (SystemClock().nanoseconds() - startNanoseconds) / 1000
            logger.debug(
                "request",
                metadata: [
                    "request_id": .uuid(requestID), "method": .string(method.rawValue), "path": .string(path),
                    "status": .integer(response.status.code), "duration_us": .integer(Int(micros)),
                ])
        }
    }
}

/// Reads an `evhttp_request` into an ``HTTPRequest``.
enum RequestParsing {
    static func parse(
        _ request: OpaquePointer, connection: Connection, evcon: OpaquePointer, server: HTTPServer
    ) -> HTTPRequest {
        let method: HTTPMethod =
            switch evhttp_request_get_command(request) {
            case EVHTTP_REQ_GET: .get
            case EVHTTP_REQ_POST: .post
            case EVHTTP_REQ_HEAD: .head
            case EVHTTP_REQ_PUT: .put
            case EVHTTP_REQ_DELETE: .delete
            case EVHTTP_REQ_OPTIONS: .options
            case EVHTTP_REQ_PATCH: .patch
            default: HTTPMethod("UNKNOWN")
            }
        let uri = evhttp_request_get_uri(request).map { String(cString: $0) } ?? "/"
        let path: String
        let query: String?
        if let mark = uri.firstIndex(of: "?") {
            path = String(uri[..<mark])
            query = String(uri[uri.index(after: mark)...])
        } else {
            path = uri
            query = nil
        }

        var headers = HTTPHeaders()
        var field = evhttp_request_get_input_headers(request)?.pointee.tqh_first
        while let current = field {
            if let key = current.pointee.key, let value = current.pointee.value {
                headers.add(String(cString: key), String(cString: value))
            }
            field = current.pointee.next.tqe_next
        }

        var body = Data()
        if let input = evhttp_request_get_input_buffer(request) {
            let length = evbuffer_get_length(input)
            if length > 0 {
                body = Data(count: length)
                body.withUnsafeMutableBytes { buffer in _ = evbuffer_copyout(input, buffer.baseAddress, length) }
            }
        }

        let requestID = headers["X-Request-Id"].flatMap(UUID.init(uuidString:)) ?? server.configuration.requestIDs()
        return HTTPRequest(
            method: method, path: path, query: query, headers: headers, body: body, requestID: requestID,
            clientCertificate: connection.clientCertificate, remoteAddress: connection.remoteAddress(evcon),
            logger: server.logger)
    }
}
