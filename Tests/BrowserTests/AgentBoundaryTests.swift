import BrowserAgentAPI
import CommandTestSupport
import Foundation
import OrchardHTTP
import Testing

extension BrowserPurchaseTests {
    /// The loopback port of `device`'s browser agent.
    static func agentPort(_ sandbox: BrowserSandbox, _ device: String) throws -> Int {
        struct Written: Decodable { let port: Int }
        let data = try Data(contentsOf: URL(fileURLWithPath: sandbox.dataDirectory + "/devices/\(device)/agent.json"))
        return try JSONDecoder().decode(Written.self, from: data).port
    }

    /// An HTTPS client to `device`'s browser agent at https://agent.orchard.test (trusting the deployment's root).
    static func agentClient(_ sandbox: BrowserSandbox, _ device: String) throws -> HTTPClient {
        let port = try agentPort(sandbox, device)
        let root = try String(contentsOfFile: sandbox.dataDirectory + "/pki/root/root-ca.pem", encoding: .utf8)
        return try HTTPClient(
            configuration: HTTPClientConfiguration(
                trustedRootsPEM: root, maxAttempts: 1, connectTo: [BrowserAgentAPI.host: port]))
    }

    /// What a browser writes on a `fetch` by a script of the agent's own origin, as the agent asks of a request
    /// for a secret.
    static let ownFetch: HTTPHeaders = [
        "Origin": BrowserAgentAPI.origin, "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors",
        "Sec-Fetch-Dest": "empty", "Content-Type": "application/json",
    ]

    /// A page load's secret for `document`, asked as the document's script asks it.
    static func secret(_ client: HTTPClient, _ document: BrowserAgentAPI.Document) async throws -> String {
        let answer = try await client.send(
            HTTPClientRequest(
                method: .post, url: BrowserAgentAPI.origin + BrowserAgentAPI.Route.secret, headers: ownFetch,
                body: try JSONEncoder().encode(BrowserAgentAPI.SecretRequest(document: document))))
        try #require(answer.status.code == 200, "\(String(decoding: answer.body, as: UTF8.self))")
        return try JSONDecoder().decode(BrowserAgentAPI.PageSecret.self, from: answer.body).secret
    }

    @Test(
        "U2: no document carries a secret; a secret goes only to a same-origin fetch by a script of the agent's origin"
    )
    func onlyTheAgentsOwnScriptsGetASecret() async throws {
        let sandbox = try sandbox
        let client = try Self.agentClient(sandbox, BrowserSandbox.phone)
        defer { client.shutdown() }
        for page in [BrowserAgentAPI.Page.frame, BrowserAgentAPI.Page.sheet, BrowserAgentAPI.Page.screen] {
            let document = try await client.get(BrowserAgentAPI.origin + page)
            let text = String(decoding: document.body, as: UTF8.self)
            #expect(document.status.code == 200 && text.contains("<script"), "\(page)")
            #expect(
                !text.contains("orchard-agent-secret")
                    && text.range(of: "[0-9a-f]{66}", options: .regularExpression) == nil,
                "\(page) hands out a secret")
        }
        func ask(
            _ method: HTTPMethod = .post, without: String? = nil, setting: (String, String)? = nil,
            body: String = #"{"document":"frame"}"#
        ) async throws -> (status: Int, text: String) {
            var headers = Self.ownFetch
            if let without { headers.remove(without) }
            if let setting { headers.set(setting.0, setting.1) }
            let answer = try await client.send(
                HTTPClientRequest(
                    method: method, url: BrowserAgentAPI.origin + BrowserAgentAPI.Route.secret, headers: headers,
                    body: method == .get ? Data() : Data(body.utf8)))
            return (answer.status.code, String(decoding: answer.body, as: UTF8.self))
        }
        let granted = try await ask()
        #expect(granted.status == 200 && granted.text.contains(#""secret":""#), "\(granted.text)")
        // Each thing a browser writes only on the agent's own script's fetch, missing or as another page, a
        // navigation or a form would send it: refused, and no secret in the answer.
        let refusals: [(without: String?, setting: (String, String)?)] = [
            ("Origin", nil), (nil, ("Origin", "https://store.orchard.test")), (nil, ("Origin", "null")),
            ("Sec-Fetch-Site", nil), (nil, ("Sec-Fetch-Site", "same-site")), (nil, ("Sec-Fetch-Site", "cross-site")),
            (nil, ("Sec-Fetch-Site", "none")), ("Sec-Fetch-Dest", nil), (nil, ("Sec-Fetch-Dest", "document")),
            (nil, ("Sec-Fetch-Dest", "iframe")), (nil, ("Sec-Fetch-Dest", "script")), ("Content-Type", nil),
            (nil, ("Content-Type", "text/plain")), (nil, ("Content-Type", "application/x-www-form-urlencoded")),
        ]
        for refusal in refusals {
            let answer = try await ask(without: refusal.without, setting: refusal.setting)
            #expect(
                answer.status == 403 && answer.text.contains("notAgentDocument") && !answer.text.contains("secret\":"),
                "\(refusal.without ?? "") \(refusal.setting.map { "\($0.0): \($0.1)" } ?? ""): \(answer.text)")
        }
        // A body that names no document, and a GET of the route: no secret.
        for body in [#"{"document":"handoff"}"#, "{}", "document=frame"] {
            let answer = try await ask(body: body)
            #expect(answer.status == 400 && !answer.text.contains("secret\":"), "\(body): \(answer.text)")
        }
        let get = try await ask(.get)
        #expect(get.status != 200 && !get.text.contains("secret\":"), "\(get.text)")
    }

    @Test("W5: the agent's server answers only its own documents: Sec-Fetch-Site same-origin and their secret")
    func agentAnswersOnlyItsDocuments() async throws {
        let sandbox = try sandbox
        let client = try Self.agentClient(sandbox, BrowserSandbox.phone)
        defer { client.shutdown() }
        let frame = try await Self.secret(client, .frame)
        let sheet = try await Self.secret(client, .sheet)
        #expect(frame.count == 66 && sheet.count == 66 && frame != sheet)
        let page = try JSONEncoder().encode(
            BrowserAgentAPI.PageContext(
                ancestorOrigins: ["https://store.orchard.test"], secureContext: true, paymentAllowed: true))
        func hello(_ headers: HTTPHeaders) async throws -> Int {
            var all = headers
            all.set("Content-Type", "application/json")
            return try await client.send(
                HTTPClientRequest(
                    method: .post, url: BrowserAgentAPI.origin + BrowserAgentAPI.Route.hello, headers: all, body: page)
            ).status.code
        }
        #expect(try await hello(["Sec-Fetch-Site": "same-origin", BrowserAgentAPI.secretHeader: frame]) == 200)
        // A page of the store (same site, another origin), a page of another site, no fetch metadata, a guessed
        // secret, the sheet's secret on the frame's route: refused.
        #expect(try await hello(["Sec-Fetch-Site": "same-site", BrowserAgentAPI.secretHeader: frame]) == 403)
        #expect(try await hello(["Sec-Fetch-Site": "cross-site", BrowserAgentAPI.secretHeader: frame]) == 403)
        #expect(try await hello([BrowserAgentAPI.secretHeader: frame]) == 403)
        for guess in [String(repeating: "0", count: 32), String(repeating: "0", count: 66), "02" + frame.dropFirst(2)] {
            #expect(try await hello(["Sec-Fetch-Site": "same-origin", BrowserAgentAPI.secretHeader: guess]) == 403)
        }
        // The frame's secret with one MAC bit flipped.
        var flipped = Array(frame.utf8)
        flipped[flipped.count - 1] =
            flipped[flipped.count - 1] == UInt8(ascii: "0") ? UInt8(ascii: "1") : UInt8(ascii: "0")
        #expect(
            try await hello([
                "Sec-Fetch-Site": "same-origin", BrowserAgentAPI.secretHeader: String(decoding: flipped, as: UTF8.self),
            ])
                == 403)
        #expect(try await hello(["Sec-Fetch-Site": "same-origin", BrowserAgentAPI.secretHeader: sheet]) == 403)
        // The frame's secret on the sheet's route.
        let screen = try await client.send(
            HTTPClientRequest(
                method: .get, url: BrowserAgentAPI.origin + BrowserAgentAPI.Route.screen,
                headers: ["Sec-Fetch-Site": "same-origin", BrowserAgentAPI.secretHeader: frame]))
        #expect(screen.status.code == 403)
        // No page can frame the sheet; the frame only under https pages.
        let sheetPage = try await client.get(BrowserAgentAPI.origin + BrowserAgentAPI.Page.sheet)
        #expect(sheetPage.headers["Content-Security-Policy"]?.hasSuffix("frame-ancestors 'none'") == true)
        #expect(sheetPage.headers["X-Frame-Options"] == "DENY")
        let framePage = try await client.get(BrowserAgentAPI.origin + BrowserAgentAPI.Page.frame)
        #expect(framePage.headers["Content-Security-Policy"]?.hasSuffix("frame-ancestors https:") == true)
    }

    @Test("W5: a frame body giving a key twice is 400 duplicate_key at the agent's server, whatever the order")
    func agentRefusesAKeyTwice() async throws {
        let sandbox = try sandbox
        let client = try Self.agentClient(sandbox, BrowserSandbox.phone)
        defer { client.shutdown() }
        let frame = try await Self.secret(client, .frame)
        func hello(_ body: String) async throws -> HTTPResponse {
            try await client.send(
                HTTPClientRequest(
                    method: .post, url: BrowserAgentAPI.origin + BrowserAgentAPI.Route.hello,
                    headers: [
                        "Content-Type": "application/json", "Sec-Fetch-Site": "same-origin",
                        BrowserAgentAPI.secretHeader: frame,
                    ], body: Data(body.utf8)))
        }
        let page = #""ancestorOrigins":["https://store.orchard.test"],"secureContext":true"#
        #expect(try await hello("{\(page),\"paymentAllowed\":true}").status.code == 200)
        for (first, second) in [(true, false), (false, true)] {
            let answer = try await hello("{\(page),\"paymentAllowed\":\(first),\"paymentAllowed\":\(second)}")
            let text = String(decoding: answer.body, as: UTF8.self)
            #expect(answer.status.code == 400 && text.contains("duplicate_key"), "\(text)")
        }
    }

    @Test(
        "W5: the agent refuses an insecure document, an insecure parent, a third-party frame without payment, no page")
    func agentRefusesInsecurePages() async throws {
        let sandbox = try sandbox
        let client = try Self.agentClient(sandbox, BrowserSandbox.phone)
        defer { client.shutdown() }
        let secret = try await Self.secret(client, .frame)
        func begin(_ origins: [String], secure: Bool = true, payment: Bool = true) async throws -> String {
            let body = BrowserAgentAPI.BeginSession(
                version: 3,
                page: .init(ancestorOrigins: origins, secureContext: secure, paymentAllowed: payment),
                request: .init(
                    countryCode: "US", currencyCode: "USD", supportedNetworks: ["visa"],
                    merchantCapabilities: ["supports3DS"], total: .init(label: "Orchard Demo Store", amount: "1.00")))
            let answer = try await client.send(
                HTTPClientRequest(
                    method: .post, url: BrowserAgentAPI.origin + BrowserAgentAPI.Route.sessions,
                    headers: [
                        "Content-Type": "application/json", "Sec-Fetch-Site": "same-origin",
                        BrowserAgentAPI.secretHeader: secret,
                    ], body: try JSONEncoder().encode(body)))
            let object = try JSONSerialization.jsonObject(with: answer.body) as? [String: Any]
            let error = object?["error"] as? [String: Any]
            return "\(answer.status.code) \(error?["code"] ?? "") \(error?["message"] ?? "")"
        }
        #expect(
            try await begin(["http://store.orchard.test"], secure: false)
                == "403 InvalidAccessError Trying to start an Apple Pay session from an insecure document.")
        #expect(
            try await begin(["https://store.orchard.test", "http://news.orchard.test"], secure: false)
                == "403 InvalidAccessError Trying to start an Apple Pay session from a document with an insecure parent frame."
        )
        #expect(
            try await begin(["https://store.orchard.test", "https://news.orchard.test"], payment: false)
                == "403 SecurityError Third-party iframes are not allowed to request payments unless explicitly allowed via Feature-Policy (payment)"
        )
        #expect(
            try await begin([])
                == "403 InvalidAccessError Trying to start an Apple Pay session from an inactive document.")
    }
}

extension BrowserPurchaseTests {
    @Test(
        "orchard browser setup: the NSS database trusts the deployment's root; a device whose agent is not running is named"
    )
    func browserSetup() async throws {
        let sandbox = try sandbox
        let profile = sandbox.path + "/setup-profile"
        let setup = try await orchard([
            "browser", "setup", "--data-dir", sandbox.dataDirectory, "--device", BrowserSandbox.mac, "--profile",
            profile,
        ])
        try #require(setup.status == 0, "\(setup.stderr)")
        let lines = setup.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains("--user-data-dir=\(profile)/chromium"))
        let rules = try #require(lines.first { $0.hasPrefix("--host-resolver-rules=") })
        for name in ["store.orchard.test", "pay.orchard.test", "apple-pay-gateway.orchard.test", "agent.orchard.test"] {
            #expect(rules.contains("MAP \(name):443 127.0.0.1:"), "\(rules)")
        }
        #expect(!setup.stdout.contains("ignore-certificate-errors"))
        // certutil lists the root, trusted for TLS servers ("C,,").
        let list = try ChildProcess(
            Chromium.certutil, ["-L", "-d", "sql:" + profile + "/.pki/nssdb"], stdout: .capture, stderr: .capture)
        _ = await list.exit()
        #expect(list.stdout.contains("Orchard root") && list.stdout.contains("C,,"), "\(list.stdout)")
        let missing = try await orchard([
            "browser", "setup", "--data-dir", sandbox.dataDirectory, "--device", "nobody", "--profile", profile,
        ])
        #expect(missing.status == 1 && missing.stdout.isEmpty, "\(missing.stdout)")
        #expect(missing.stderr.hasPrefix("error: the browser agent of nobody is not running"), "\(missing.stderr)")
    }
}

extension BrowserPurchaseTests {
    @Test(
        "U1: another user of the machine reaches none of the agent's pages or routes: the attack ends at GET /frame",
        .enabled(if: OtherUser.available, "needs root, to act as another user with runuser (CI runs as root)"))
    func anotherUserReachesNoPartOfTheAgent() async throws {
        let sandbox = try sandbox
        let port = try Self.agentPort(sandbox, BrowserSandbox.phone)
        // The agent's own user is answered.
        let client = try Self.agentClient(sandbox, BrowserSandbox.phone)
        defer { client.shutdown() }
        #expect(try await client.get(BrowserAgentAPI.origin + BrowserAgentAPI.Page.frame).status.code == 200)
        let paths = [
            BrowserAgentAPI.Page.frame, BrowserAgentAPI.Page.sheet, BrowserAgentAPI.Page.screen,
            BrowserAgentAPI.Route.screen, BrowserAgentAPI.Route.deviceScreen,
        ]
        for path in paths {
            let outcome = try await OtherUser.get(port: port, path: path, host: BrowserAgentAPI.host)
            #expect(outcome.hasPrefix("refused") || outcome == "closed", "\(path) as \(OtherUser.name): \(outcome)")
        }
    }

    @Test("U2: a secret ends with its page load: refused once the page says it is gone, its sessions with it")
    func aSecretEndsWithItsPageLoad() async throws {
        let sandbox = try sandbox
        let client = try Self.agentClient(sandbox, BrowserSandbox.phone)
        defer { client.shutdown() }
        let secret = try await Self.secret(client, .frame)
        let other = try await Self.secret(client, .frame)
        func post(_ route: String, _ secret: String?, _ body: Data = Data("{}".utf8)) async throws -> Int {
            var headers: HTTPHeaders = ["Content-Type": "application/json", "Sec-Fetch-Site": "same-origin"]
            if let secret { headers.set(BrowserAgentAPI.secretHeader, secret) }
            return try await client.send(
                HTTPClientRequest(method: .post, url: BrowserAgentAPI.origin + route, headers: headers, body: body)
            ).status.code
        }
        let page = try JSONEncoder().encode(
            BrowserAgentAPI.PageContext(
                ancestorOrigins: ["https://store.orchard.test"], secureContext: true, paymentAllowed: true))
        #expect(try await post(BrowserAgentAPI.Route.hello, secret, page) == 200)
        // Ending needs a live secret: none, or a guessed one, ends nothing.
        #expect(try await post(BrowserAgentAPI.Route.endSecret, nil) == 403)
        #expect(try await post(BrowserAgentAPI.Route.endSecret, String(repeating: "0", count: 66)) == 403)
        #expect(try await post(BrowserAgentAPI.Route.endSecret, secret) == 200)
        #expect(try await post(BrowserAgentAPI.Route.hello, secret, page) == 403)
        #expect(try await post(BrowserAgentAPI.Route.endSecret, secret) == 403)
        // Another page load's secret is its own.
        #expect(try await post(BrowserAgentAPI.Route.hello, other, page) == 200)
    }

    @Test("U2: 2,000 page loads leave an open page's secret working: no table of secrets to push it out of")
    func manyPageLoadsKeepAnOpenPagesSecret() async throws {
        let sandbox = try sandbox
        let client = try Self.agentClient(sandbox, BrowserSandbox.phone)
        defer { client.shutdown() }
        let open = try await Self.secret(client, .frame)
        for _ in 0..<2000 {
            _ = try await client.get(BrowserAgentAPI.origin + BrowserAgentAPI.Page.frame)
        }
        let page = try JSONEncoder().encode(
            BrowserAgentAPI.PageContext(
                ancestorOrigins: ["https://store.orchard.test"], secureContext: true, paymentAllowed: true))
        let hello = try await client.send(
            HTTPClientRequest(
                method: .post, url: BrowserAgentAPI.origin + BrowserAgentAPI.Route.hello,
                headers: [
                    "Content-Type": "application/json", "Sec-Fetch-Site": "same-origin",
                    BrowserAgentAPI.secretHeader: open,
                ], body: page))
        #expect(hello.status.code == 200)
    }
}

extension BrowserPurchaseTests {
    @Test(
        "U4: another user of the machine cannot reach the tests' chromedriver: its port is in the range .ci/run closes",
        .enabled(if: OtherUser.available, "needs root, to act as another user with runuser (CI runs as root)"))
    func anotherUserCannotReachChromedriver() async throws {
        let sandbox = try sandbox
        let environment = ProcessInfo.processInfo.environment
        guard environment["ORCHARD_CHROMEDRIVER_PORTS"] != nil else {
            // Outside .ci/run nothing closes chromedriver's port (docs/web.md, "Tests in Chromium").
            if environment["CI"] == "true" {
                Issue.record("ORCHARD_CHROMEDRIVER_PORTS is not set: .ci/run closes that range with nftables")
            }
            return
        }
        let port = sandbox.driverPort
        // The tests' own user is answered.
        let client = try HTTPClient(configuration: HTTPClientConfiguration(maxAttempts: 1))
        defer { client.shutdown() }
        #expect(try await client.get("http://127.0.0.1:\(port)/status").status.code == 200)
        let outcome = try await OtherUser.get(port: port, path: "/status", tls: false)
        #expect(outcome.hasPrefix("refused") || outcome == "closed", "chromedriver as \(OtherUser.name): \(outcome)")
    }
}
