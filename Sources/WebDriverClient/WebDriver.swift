import Foundation
public import OrchardHTTP

/// A W3C WebDriver session on chromedriver (Debian's chromium-driver), spoken as JSON through Orchard's own HTTP
/// client (libcurl): what the browser tests drive headless Chromium with (`orchard demo` uses ``DevToolsBrowser``,
/// with no chromedriver port).
public final class WebDriver: ScriptedBrowser {
    /// The HTTP client the session's commands go through.
    public let client: HTTPClient
    /// chromedriver's base URL (`http://127.0.0.1:PORT`).
    public let base: String
    /// The WebDriver session's identifier.
    public let session: String

    /// A new Chromium session on the chromedriver at `driverPort`, Chromium at `binary` started with `arguments`
    /// (`--headless=new` added, and `--remote-debugging-pipe`: chromedriver speaks to Chromium over a pipe, so
    /// Chromium opens no DevTools port another user of the machine could reach).
    /// - Throws: ``WebDriverError`` when chromedriver cannot be reached or starts no session.
    public static func start(driverPort: Int, binary: String, arguments: [String]) async throws -> WebDriver {
        let client = try HTTPClient(
            configuration: HTTPClientConfiguration(
                connectTimeout: .seconds(5), requestTimeout: .seconds(60), maxAttempts: 1))
        let base = "http://127.0.0.1:\(driverPort)"
        let capabilities: [String: Any] = [
            "capabilities": [
                "alwaysMatch": [
                    "browserName": "chrome",
                    "goog:chromeOptions": [
                        "binary": binary,
                        "args": arguments + [
                            "--headless=new", "--window-size=1000,900", "--disable-gpu", "--remote-debugging-pipe",
                        ],
                    ],
                    "goog:loggingPrefs": ["browser": "ALL"],
                ]
            ]
        ]
        let answer: [String: Any]
        do {
            answer = try await Self.send(client, .post, base + "/session", capabilities)
        } catch {
            client.shutdown()
            throw error
        }
        guard let value = answer["value"] as? [String: Any], let session = value["sessionId"] as? String else {
            client.shutdown()
            throw WebDriverError(.noSession, "chromedriver did not start a session: \(answer)")
        }
        return WebDriver(client: client, base: base, session: session)
    }

    private init(client: HTTPClient, base: String, session: String) {
        self.client = client
        self.base = base
        self.session = session
    }

    private static func send(
        _ client: HTTPClient, _ method: HTTPMethod, _ url: String, _ body: [String: Any]?
    ) async throws -> [String: Any] {
        var request = HTTPClientRequest(method: method, url: url)
        if let body {
            request.headers = ["Content-Type": "application/json"]
            request.body = try JSONSerialization.data(withJSONObject: body)
        }
        let response: HTTPResponse
        do {
            response = try await client.send(request)
        } catch {
            throw WebDriverError(.unreachable, "chromedriver at \(url) did not answer: \(error)")
        }
        guard let object = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any] else {
            throw WebDriverError(.command, "chromedriver answered \(response.status.code) with no JSON object")
        }
        if response.status.code >= 400 {
            let value = object["value"] as? [String: Any]
            throw WebDriverError(
                .command,
                "WebDriver \(method) \(url): \(value?["error"] ?? "?"): \(String(describing: value?["message"] ?? ""))")
        }
        return object
    }

    @discardableResult
    private func command(_ method: HTTPMethod, _ path: String, _ body: [String: Any]? = nil) async throws -> Any? {
        let answer = try await Self.send(client, method, base + "/session/" + session + path, body)
        return answer["value"]
    }

    /// Opens `url` in the current window.
    public func navigate(_ url: String) async throws { try await command(.post, "/url", ["url": url]) }

    /// The element matching `css` (waiting up to 10 s for it).
    public func element(_ css: String) async throws -> String {
        for _ in 0..<100 {
            if let value = try? await command(.post, "/element", ["using": "css selector", "value": css])
                as? [String: Any], let id = value.values.first as? String
            {
                return id
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw WebDriverError(.timeout, "no element \(css)")
    }

    /// Clicks the element matching `css` (a real pointer click: a user gesture) once it is enabled, as a user
    /// waits for a control the page disabled while it works (up to `seconds`); one that stays disabled throws.
    public func click(_ css: String, seconds: Double = 10) async throws {
        try await onFreshElement(css) { id in
            let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
            while try await self.command(.get, "/element/\(id)/enabled") as? Bool == false {
                guard ContinuousClock.now < deadline else {
                    throw WebDriverError(.timeout, "\(css) stayed disabled for \(seconds) s")
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            try await self.command(.post, "/element/\(id)/click", [:])
        }
    }

    /// Types `text` into the element matching `css`.
    public func type(_ css: String, _ text: String) async throws {
        try await onFreshElement(css) { id in
            try await self.command(.post, "/element/\(id)/clear", [:])
            try await self.command(.post, "/element/\(id)/value", ["text": text])
        }
    }

    /// Runs `action` on the element matching `css`, finding it again when the page replaced it meanwhile (a page
    /// that redraws, as the payment sheet does when its state changes): up to 5 times.
    private func onFreshElement(_ css: String, _ action: (String) async throws -> Void) async throws {
        var attempt = 0
        while true {
            let id = try await element(css)
            do {
                try await action(id)
                return
            } catch let error as WebDriverError where error.message.contains("stale element") && attempt < 4 {
                attempt += 1
            }
        }
    }

    /// Runs `script` (a function body) in the current page; its return value as JSON text.
    public func evaluate(_ script: String) async throws -> String {
        let wrapped = "return JSON.stringify((function () { \(script) })());"
        return try await command(.post, "/execute/sync", ["script": wrapped, "args": [Any]()]) as? String ?? "null"
    }

    /// Runs `expression`, a promise, in the current page; what it resolves to as JSON text.
    public func awaitPromise(_ expression: String) async throws -> String {
        let script = """
            const done = arguments[arguments.length - 1];
            Promise.resolve(\(expression)).then((value) => done(JSON.stringify(value)),
                (error) => done(JSON.stringify(error.name + ': ' + error.message)));
            """
        return try await command(.post, "/execute/async", ["script": script, "args": [Any]()]) as? String ?? "null"
    }

    /// The session's window handles.
    public var windowHandles: [String] {
        get async throws { try await command(.get, "/window/handles") as? [String] ?? [] }
    }

    /// The current window's handle.
    public var currentWindow: String {
        get async throws { try await command(.get, "/window") as? String ?? "" }
    }

    /// Switches to the window `handle`.
    public func switchTo(_ handle: String) async throws { try await command(.post, "/window", ["handle": handle]) }

    /// Switches into the frame element matching `css` (nil: back to the top-level document).
    public func switchToFrame(_ css: String?) async throws {
        guard let css else {
            try await command(.post, "/frame", ["id": NSNull()])
            return
        }
        let id = try await element(css)
        try await command(.post, "/frame", ["id": ["element-6066-11e4-a52e-4f735466cecf": id]])
    }

    /// Closes every window but the first (a sheet left open) and switches to it.
    public func closeOtherWindows() async throws {
        let handles = try await windowHandles
        for handle in handles.dropFirst() {
            try await switchTo(handle)
            try await closeWindow()
        }
        if let first = handles.first { try await switchTo(first) }
    }

    /// Closes the current window.
    public func closeWindow() async throws { try await command(.delete, "/window") }

    /// The browser's console messages since the last call.
    public func consoleMessages() async throws -> [String] {
        let entries = try await command(.post, "/se/log", ["type": "browser"]) as? [[String: Any]] ?? []
        return entries.compactMap { $0["message"] as? String }
    }

    /// Ends the session (Chromium quits) and the HTTP client.
    public func quit() async {
        _ = try? await Self.send(client, .delete, base + "/session/" + session, nil)
        client.shutdown()
    }
}

/// A WebDriver failure: chromedriver unreachable, a command refused, or a wait that timed out.
public struct WebDriverError: Error, CustomStringConvertible, Sendable {
    /// What failed.
    public struct Code: RawRepresentable, Hashable, Sendable {
        /// The code's name.
        public let rawValue: String
        /// A code named `rawValue`.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// chromedriver did not answer.
        public static let unreachable = Code(rawValue: "unreachable")
        /// chromedriver started no session (is Chromium installed?).
        public static let noSession = Code(rawValue: "noSession")
        /// A command failed.
        public static let command = Code(rawValue: "command")
        /// A wait timed out.
        public static let timeout = Code(rawValue: "timeout")
        /// The DevTools pipe to Chromium failed or closed (``DevToolsPipe``).
        public static let devToolsPipe = Code(rawValue: "devToolsPipe")
    }

    /// What failed.
    public let code: Code
    /// What happened and what to do.
    public let message: String

    /// An error with `code` and `message`.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}

/// Debian's Chromium and chromedriver (scripts/bootstrap installs them).
public enum Chromium {
    /// Where Debian installs Chromium.
    public static let binary = "/usr/bin/chromium"
    /// Where Debian installs chromedriver (chromium-driver).
    public static let driver = "/usr/bin/chromedriver"
    /// What to run when Chromium is missing.
    public static let installHint =
        "run scripts/bootstrap (apt-get install chromium chromium-driver libnss3-tools)"

    /// Whether Chromium and chromedriver are installed.
    public static var installed: Bool {
        [binary, driver].allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Chromium and chromedriver found in the directories of `searchPath` (a `PATH` value; nil: the default
    /// `/usr/local/bin:/usr/bin:/bin`), or nil when either is missing.
    public static func locate(searchPath: String?) -> (browser: String, driver: String)? {
        guard let browser = locateBrowser(searchPath: searchPath),
            let driver = find(["chromedriver"], searchPath: searchPath)
        else { return nil }
        return (browser, driver)
    }

    /// Chromium alone (what `orchard demo` drives over its DevTools pipe) found in the directories of `searchPath`,
    /// as ``locate(searchPath:)`` looks.
    public static func locateBrowser(searchPath: String?) -> String? {
        find(["chromium", "chromium-browser"], searchPath: searchPath)
    }

    private static func find(_ names: [String], searchPath: String?) -> String? {
        let directories = (searchPath ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":").map(String.init)
        for directory in directories where !directory.isEmpty {
            for name in names where FileManager.default.isExecutableFile(atPath: directory + "/" + name) {
                return directory + "/" + name
            }
        }
        return nil
    }

    /// The `--port` arguments to start chromedriver with, one a try: with `ORCHARD_CHROMEDRIVER_PORTS=FIRST-LAST` in
    /// `environment` (a range a firewall rule closes to the machine's other users, as `.ci/run` sets up) each port of
    /// the range once, from a random one; else `--port=0` (chromedriver picks one, and exits when another process
    /// holds that number in one address family) three times.
    public static func driverPortArguments(environment: [String: String]) -> [String] {
        let bounds = (environment["ORCHARD_CHROMEDRIVER_PORTS"] ?? "").split(separator: "-").compactMap { Int($0) }
        guard bounds.count == 2, 0 < bounds[0], bounds[0] <= bounds[1], bounds[1] < 65536 else {
            return Array(repeating: "--port=0", count: 3)
        }
        let ports = Array(bounds[0]...bounds[1])
        let start = Int.random(in: ports.indices)
        return (ports[start...] + ports[..<start]).map { "--port=\($0)" }
    }

    /// chromedriver's port from its log (`... started successfully on port N`), or nil before it says so.
    public static func driverPort(inLog text: String) -> Int? {
        guard let range = text.range(of: "started successfully on port ") else { return nil }
        return Int(text[range.upperBound...].prefix { $0.isNumber })
    }
}
