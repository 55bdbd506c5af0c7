internal import CHTTPShims
internal import CLibevent
internal import COpenSSL
public import Foundation
import OrchardCrypto
public import OrchardLogging
import Synchronization

/// How an ``HTTPServer`` listens, and its limits.
public struct HTTPServerConfiguration: Sendable {
    /// One listening address with its own TLS identity and client-certificate policy.
    public struct Listener: Sendable {
        /// A numeric address (`127.0.0.1`, `0.0.0.0`, `::1`) or a host name resolved once at start.
        public var host: String
        /// The TCP port; 0 picks a free one (read it back from ``HTTPServer/ports``).
        public var port: Int
        public var tls: TLSServerConfiguration
        /// Who may connect. A connection from anyone else is closed before it is read.
        public var peers: ListenerPeers

        public init(
            host: String = "127.0.0.1", port: Int, tls: TLSServerConfiguration, peers: ListenerPeers = .anyone
        ) {
            self.host = host
            self.port = port
            self.tls = tls
            self.peers = peers
        }
    }

    /// Per-connection and per-request limits. Exceeding one never crashes the server: the request is
    /// refused (413) or the connection closed.
    public struct Limits: Sendable {
        /// Largest request body; larger ones are answered 413 by evhttp before the handler runs.
        public var maxBodyBytes: Int = 1 << 20
        /// Largest request line plus headers; larger ones are refused.
        public var maxHeaderBytes: Int = 16 << 10
        /// Time a client has to deliver a complete request once it started one (for the first request,
        /// from the moment the connection is accepted, handshake included). A client stalling in its
        /// headers is cut when it runs out. On a kept-alive connection the clock restarts when the
        /// next request's first byte is noticed, so a stalled request is cut within twice this time.
        public var headerTimeout: Duration = .seconds(10)
        /// Longest time a connection may stay silent (no byte read or written) before it is closed.
        public var idleTimeout: Duration = .seconds(60)
        /// Open connections over all threads and listeners; the next one is closed on accept.
        public var maxConnections: Int = 4096

        public init() {}
    }

    public var listeners: [Listener]
    /// Event-loop threads; each serves every listener on its own `SO_REUSEPORT` socket. By default one per CPU the
    /// process may run on (its affinity, which `taskset` or a cpuset narrows): handlers run on the loops.
    public var threads: Int
    public var limits: Limits
    /// How long a graceful shutdown waits for in-flight requests before abandoning them.
    public var shutdownDeadline: Duration
    /// Makes request ids (random version 4 UUIDs by default; inject a fixed sequence in tests).
    public var requestIDs: @Sendable () -> UUID
    /// Pins loop thread N to CPU `loopCPUs[N % count]` (the benchmark keeps the server off wrk's core).
    package var loopCPUs: [Int]?

    public init(
        listeners: [Listener], threads: Int? = nil, limits: Limits = Limits(),
        shutdownDeadline: Duration = .seconds(10), requestIDs: (@Sendable () -> UUID)? = nil
    ) {
        self.listeners = listeners
        self.threads = threads ?? ThreadAffinity.usableCPUCount
        self.limits = limits
        self.shutdownDeadline = shutdownDeadline
        self.requestIDs = requestIDs ?? { UUID.random() }
    }
}

/// Who may open a connection to a listener.
public enum ListenerPeers: Sendable, Hashable {
    /// Anyone who reaches the address: the services, whose callers mutual TLS names.
    case anyone
    /// Only sockets of this machine owned by the user `uid`, as the kernel records them (`NETLINK_SOCK_DIAG`, the
    /// client's socket found by both endpoints; a socket that already closed has no owner and is refused). For a
    /// loopback listener that serves one user, such as a device's browser agent: on a shared machine another user
    /// reaches `127.0.0.1` too.
    case localUser(uid: UInt32)

    /// The user this process runs as.
    public static var processOwner: ListenerPeers { .localUser(uid: geteuid()) }
}

/// An HTTPS server on libevent's evhttp with bufferevent_openssl.
///
/// ## Threading model
/// - `threads` event loops, each an `event_base` on its own thread, each with its own `SO_REUSEPORT`
///   listening socket per listener (`TCP_NODELAY` set on it, inherited by accepted sockets). The kernel
///   spreads connections over the loops; a connection stays on the loop that accepted it.
/// - Handlers are `async`. Each runs in a task whose executor preference is its request's loop, so a
///   handler that does not suspend runs on the loop thread and replies at once; one that suspends
///   resumes on the loop. The reply is always sent on the request's loop thread; a completion arriving
///   on another thread is handed over with `event_active` (``EventLoop/execute(_:)``).
/// - The state libevent calls back with (listener, connection, request) lives in Swift objects that are
///   retained for as long as C can call back with them: a connection by its `SSL` object's ex-data
///   (released when OpenSSL frees the `SSL`), a request by its in-flight record until the reply is sent.
/// - Handlers must not block: nothing that waits on disk or network synchronously may run on a loop
///   thread or in Swift's cooperative pool (two threads on this machine). Such work goes to
///   ``BlockingThreadPool`` (SQLite writes, bulk key generation) or ``HTTPClient`` (its own thread), both
///   bridged with continuations. One exception: an SQLite `Store.read` with a reader connection idle runs where it
///   is called (a WAL snapshot read of indexed rows, from pages the kernel caches, never waiting for the writer);
///   one that would open or wait for a connection, and every PostgreSQL read, still leaves the thread.
///
/// ## Lifecycle
/// ``start()`` binds and starts the loops; ``shutdown()`` stops accepting (the listening sockets close,
/// so new connections are refused), closes idle connections, lets in-flight requests finish (their
/// replies carry `Connection: close`) until ``HTTPServerConfiguration/shutdownDeadline``, then stops the
/// loops. ``ServiceRunner`` ties that to SIGTERM and SIGINT.
public final class HTTPServer: @unchecked Sendable {
    // Thread-safety: `state`, `loops`, `instances` and `boundPorts` are guarded by `lock`; the counters
    // are atomics; everything else is immutable after init.
    private enum State { case created, running, draining, stopped }

    public let configuration: HTTPServerConfiguration
    let router: Router
    let logger: Logger

    /// The routes this server serves, with the policy each was registered with.
    public var registeredRoutes: [Router.RegisteredRoute] { router.registeredRoutes }
    private let tlsContexts: [ServerTLSContext]
    private let lock = NSLock()
    private var state = State.created
    private var loops: [EventLoop] = []
    private var instances: [[ListenerInstance]] = []
    private var boundPorts: [Int] = []
    private let openConnections = Atomic<Int>(0)
    private let forceRequested = Atomic<Bool>(false)
    private let pausedListeners = Atomic<Int>(0)
    private let acceptPauses = Atomic<Int>(0)
    private let urgentConnections = Atomic<Int>(0)
    private let heldBackConnections = Atomic<Int>(0)
    private let stopped = DispatchSemaphore(value: 0)

    /// Builds the TLS contexts now, so a bad certificate or key fails here rather than at start.
    public init(configuration: HTTPServerConfiguration, router: Router, logger: Logger) throws(HTTPError) {
        guard !configuration.listeners.isEmpty else {
            throw HTTPError(.invalidConfiguration, "a server needs at least one listener")
        }
        guard (1...256).contains(configuration.threads) else {
            throw HTTPError(.invalidConfiguration, "the thread count must be 1 to 256")
        }
        let limits = configuration.limits
        guard limits.maxBodyBytes > 0, limits.maxHeaderBytes >= 1024, limits.maxConnections > 0,
            limits.headerTimeout > .zero, limits.idleTimeout > .zero
        else {
            throw HTTPError(
                .invalidConfiguration,
                "limits must be positive (and at least 1 KiB of headers)")
        }
        for listener in configuration.listeners where !(0...65535).contains(listener.port) {
            throw HTTPError(.invalidConfiguration, "port \(listener.port) is not a TCP port")
        }
        self.configuration = configuration
        self.router = router
        self.logger = logger
        var contexts: [ServerTLSContext] = []
        for listener in configuration.listeners { contexts.append(try ServerTLSContext(listener.tls)) }
        tlsContexts = contexts
    }

    /// The bound port of each listener, in configuration order (empty before ``start()``).
    public var ports: [Int] { lock.withLock { boundPorts } }
    /// The first listener's bound port.
    public var port: Int { ports.first ?? 0 }
    /// Connections currently open, over all loops and listeners.
    public var connectionCount: Int { openConnections.load(ordering: .relaxed) }

    /// Binds every listener on every loop and starts the loop threads.
    public func start() throws(HTTPError) {
        lock.lock()
        defer { lock.unlock() }
        guard state == .created else { throw HTTPError(.notRunning, "a server can be started only once") }
        var newLoops: [EventLoop] = []
        var perLoop: [[ListenerInstance]] = []
        var ports: [Int] = []
        do throws(HTTPError) {
            for index in 0..<configuration.threads {
                newLoops.append(try EventLoop(index: index))
                perLoop.append([])
            }
            for (listenerIndex, listener) in configuration.listeners.enumerated() {
                var port = listener.port
                // SO_REUSEPORT lets any socket of this user join a port: another server on it would silently take
                // a share of the connections. The port must be free before this server's own sockets share it.
                if port != 0 { try ListeningSocket.requireFree(host: listener.host, port: port) }
                for (loopIndex, loop) in newLoops.enumerated() {
                    let (fd, actualPort) = try ListeningSocket.open(host: listener.host, port: port)
                    port = actualPort
                    let instance = ListenerInstance(
                        server: self, loop: loop, tls: tlsContexts[listenerIndex], peers: listener.peers)
                    perLoop[loopIndex].append(instance)
                    try instance.attach(socket: fd)
                }
                ports.append(port)
            }
        } catch {
            for instances in perLoop { for instance in instances { instance.teardown() } }
            throw error
        }
        for (loop, instances) in zip(newLoops, perLoop) {
            loop.teardown = { for instance in instances { instance.teardown() } }
        }
        for loop in newLoops {
            let cpu = configuration.loopCPUs.flatMap { $0.isEmpty ? nil : $0[loop.index % $0.count] }
            loop.start(name: "orchard-http-\(loop.index)", cpu: cpu)
        }
        loops = newLoops
        instances = perLoop
        boundPorts = ports
        state = .running
        logger.info(
            "listening",
            metadata: ["ports": .array(ports.map { .integer($0) }), "threads": .integer(configuration.threads)])
    }

    /// Stops gracefully: no new connections, idle ones closed, in-flight requests completed until the
    /// shutdown deadline, then the loops end. Returns when every loop thread has finished. Calling it
    /// again (or concurrently) waits for the same shutdown.
    public func shutdown() async {
        let (first, loops, instances) = lock.withLock { () -> (Bool, [EventLoop], [[ListenerInstance]]) in
            switch state {
            case .running:
                state = .draining
                return (true, self.loops, self.instances)
            case .created:
                state = .stopped
                stopped.signal()
                return (false, [], [])
            case .draining, .stopped:
                return (false, [], [])
            }
        }
        guard first else {
            await waitUntilStopped()
            return
        }
        // Close every listening socket (on its loop's thread) before going on, so that once this
        // returns to the log a new connection is refused rather than accepted by a loop not told yet.
        await withTaskGroup(of: Void.self) { group in
            for (loop, loopInstances) in zip(loops, instances) {
                group.addTask {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        loop.execute {
                            for instance in loopInstances { instance.drain() }
                            continuation.resume()
                        }
                    }
                }
            }
        }
        logger.notice(
            "shutting down: no longer accepting connections; draining",
            metadata: ["open_connections": .integer(connectionCount)])
        let clock = ContinuousClock()
        let deadline = clock.now + configuration.shutdownDeadline
        while connectionCount > 0, clock.now < deadline, !forceRequested.load(ordering: .relaxed) {
            try? await Task.sleep(for: .milliseconds(10))
        }
        let remaining = connectionCount
        if remaining > 0 {
            logger.warning(
                "shutdown deadline reached; abandoning open connections",
                metadata: ["open_connections": .integer(remaining)])
        }
        for loop in loops { loop.stop() }
        await BlockingThreadPool.run(onNewThread: "orchard-http-join") {
            for loop in loops { loop.join() }
        }
        lock.withLock {
            state = .stopped
            self.loops = []
            self.instances = []
        }
        stopped.signal()
        logger.notice("stopped")
    }

    /// Ends a graceful shutdown now: in-flight requests are abandoned (a second SIGTERM does this).
    public func forceShutdown() { forceRequested.store(true, ordering: .relaxed) }

    private func waitUntilStopped() async {
        await BlockingThreadPool.run(onNewThread: "orchard-http-wait") { [stopped] in
            stopped.wait()
            stopped.signal()  // let other waiters through too
        }
    }

    /// Counts a new connection; false when it is one too many.
    func admitConnection() -> Bool {
        let count = openConnections.wrappingAdd(1, ordering: .relaxed).newValue
        if count > configuration.limits.maxConnections {
            openConnections.wrappingSubtract(1, ordering: .relaxed)
            return false
        }
        return true
    }

    func connectionClosed() { openConnections.wrappingSubtract(1, ordering: .relaxed) }

    /// Listeners (over every loop) not accepting now because the server is saturated.
    var listenersPaused: Int { pausedListeners.load(ordering: .relaxed) }
    /// Times a listener stopped accepting because the server was saturated.
    public var acceptPauseCount: Int { acceptPauses.load(ordering: .relaxed) }

    func acceptPausedOnce() {
        pausedListeners.wrappingAdd(1, ordering: .relaxed)
        acceptPauses.wrappingAdd(1, ordering: .relaxed)
    }

    func acceptResumed() { pausedListeners.wrappingSubtract(1, ordering: .relaxed) }

    /// Connections served at the urgent priority (their last request was a payment).
    var urgentConnectionCount: Int { urgentConnections.load(ordering: .relaxed) }

    func urgentConnectionChanged(by delta: Int) { urgentConnections.wrappingAdd(delta, ordering: .relaxed) }

    /// Connections held back now (not read: they carry only a class over its bound).
    public var heldBackCount: Int { heldBackConnections.load(ordering: .relaxed) }

    func heldBackChanged(by delta: Int) { heldBackConnections.wrappingAdd(delta, ordering: .relaxed) }

    /// Asks every loop but `loop` to check whether its listeners should stop accepting (one loop saw the server
    /// saturated; the others may be idle and would not look).
    func updateAcceptingOnOtherLoops(than loop: EventLoop) {
        let others = lock.withLock { zip(loops, instances).filter { $0.0 !== loop } }
        for (other, instances) in others {
            other.execute { for instance in instances { instance.updateAccepting() } }
        }
    }
}

/// A listening socket bound with `SO_REUSEPORT`, non-blocking, `TCP_NODELAY` (inherited by accepted
/// sockets on Linux: without it keep-alive HTTPS runs at 1.4k instead of 25k requests/s).
enum ListeningSocket {
    /// Throws ``HTTPError/Code/bindFailed`` when a socket is already listening on `host:port`: a probe without
    /// `SO_REUSEPORT` cannot bind next to it (`SO_REUSEADDR` only passes over connections in TIME_WAIT).
    static func requireFree(host: String, port: Int) throws(HTTPError) {
        try withAddress(host: host, port: port) { (info) throws(HTTPError) in
            let probe = socket(info.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard probe >= 0 else {
                throw HTTPError(.bindFailed, "socket() failed: \(String(cString: strerror(errno)))")
            }
            defer { close(probe) }
            var one: Int32 = 1
            _ = setsockopt(probe, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            guard bind(probe, info.ai_addr, info.ai_addrlen) == 0 else {
                let reason = errno == EADDRINUSE ? "another server listens there" : String(cString: strerror(errno))
                throw HTTPError(
                    .bindFailed,
                    "cannot listen on \(host):\(port): \(reason); stop it, or choose another port in config.json")
            }
        }
    }

    /// The first address `getaddrinfo` gives for a passive TCP socket on `host:port`, lent to `body`.
    private static func withAddress<T>(
        host: String, port: Int, _ body: (addrinfo) throws(HTTPError) -> T
    ) throws(HTTPError) -> T {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        var result: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &result)
        guard rc == 0, let info = result else {
            throw HTTPError(.bindFailed, "cannot resolve listen address \(host): \(String(cString: gai_strerror(rc)))")
        }
        defer { freeaddrinfo(result) }
        return try body(info.pointee)
    }

    static func open(host: String, port: Int) throws(HTTPError) -> (fd: Int32, port: Int) {
        try withAddress(host: host, port: port) { (info) throws(HTTPError) in try open(info, host: host, port: port) }
    }

    private static func open(_ info: addrinfo, host: String, port: Int) throws(HTTPError) -> (fd: Int32, port: Int) {
        let fd = socket(
            info.ai_family,
            Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
                | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HTTPError(.bindFailed, "socket() failed: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        let size = socklen_t(MemoryLayout<Int32>.size)
        guard setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, size) == 0,
            setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, size) == 0,
            orchard_set_tcp_nodelay(fd) == 0
        else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw HTTPError(.bindFailed, "setting socket options failed: \(reason)")
        }
        guard bind(fd, info.ai_addr, info.ai_addrlen) == 0, listen(fd, 1024) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw HTTPError(.bindFailed, "cannot listen on \(host):\(port): \(reason)")
        }
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else {
            close(fd)
            throw HTTPError(.bindFailed, "getsockname failed")
        }
        let boundPort: UInt16 =
            if Int32(address.ss_family) == AF_INET6 {
                withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_port }
                }
            } else {
                withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_port }
                }
            }
        return (fd, Int(UInt16(bigEndian: boundPort)))
    }
}
