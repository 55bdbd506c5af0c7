import BrowserAgentAPI
import CommandTestSupport
import Foundation
import OrchardHTTP
import Testing
import WebDriverClient

extension BrowserPurchaseTests {
    /// Whether `text` holds a run of 13 or more digits (a card number or DPAN, spaced or not).
    static func holdsAccountNumber(_ text: String) -> Bool {
        var run = 0
        for character in text {
            if character.isASCII, character.isNumber {
                run += 1
                if run >= 13 { return true }
            } else if character != " " && character != "-" {
                run = 0
            }
        }
        return false
    }

    @Test(
        "The device's screen: the sheet waiting, the wallet's card and its state, the payment made, no card number or DPAN"
    )
    func deviceScreen() async throws {
        let sandbox = try sandbox
        let browser = try await sandbox.browser(for: BrowserSandbox.mac)
        let windows = try await Self.startPurchase(browser, items: ["Coffee"])
        // While the sheet waits for the user, the screen lists it as a prompt, linked to the sheet page.
        let client = try Self.agentClient(sandbox, BrowserSandbox.mac)
        defer { client.shutdown() }
        let own = try await Self.secret(client, .screen)
        let waiting = try await client.send(
            HTTPClientRequest(
                method: .get, url: BrowserAgentAPI.origin + BrowserAgentAPI.Route.deviceScreen,
                headers: ["Sec-Fetch-Site": "same-origin", BrowserAgentAPI.secretHeader: own]))
        let prompts = try JSONDecoder().decode(BrowserAgentAPI.DeviceScreen.self, from: waiting.body).prompts
        #expect(
            prompts == [.init(kind: "paymentSheet", merchant: "Orchard Demo Store", page: BrowserAgentAPI.Page.sheet)])
        try await Self.giveContact(browser)
        let confirmation = try await Self.payAndConfirm(browser, method: "touch-id", windows: windows)
        #expect(confirmation.contains("is paid"), "\(confirmation)")
        // A page of another origin (the store's) gets no secret: the agent answers no CORS, so the browser hands
        // the page nothing, and the agent refuses its Origin besides.
        #expect(try await browser.string("return location.origin;") == "https://store.orchard.test")
        let foreign = try await browser.awaitPromise(
            """
            fetch("\(BrowserAgentAPI.origin)\(BrowserAgentAPI.Route.secret)", {method: "POST",
                headers: {"Content-Type": "application/json"}, body: JSON.stringify({document: "screen"})})
            .then(r => r.text())
            """)
        #expect(foreign.hasPrefix("\"TypeError"), "\(foreign)")

        try await browser.navigate(BrowserAgentAPI.origin + BrowserAgentAPI.Page.screen)
        try await browser.wait(
            "the screen",
            until: "return document.body.dataset.loaded === 'true' && document.querySelector('#payments td') !== null;"
        )
        let text = try await browser.string("return document.body.innerText;")
        #expect(text.contains("\(BrowserSandbox.mac) (mac)"), "\(text)")
        #expect(text.contains("Visa credit •••• 1111") && text.contains("active"), "\(text)")
        #expect(text.contains("Orchard Demo Store") && text.contains("USD") && text.contains("completed"), "\(text)")
        #expect(text.contains("Nothing waits for you."), "\(text)")
        #expect(!Self.holdsAccountNumber(text), "\(text)")
        // The JSON the page reads, fetched by the page itself (a secret of its own, same origin).
        let json = try await browser.awaitPromise(
            """
            fetch("\(BrowserAgentAPI.Route.secret)", {method: "POST", headers: {"Content-Type": "application/json"},
                body: JSON.stringify({document: "screen"})}).then(r => r.json())
            .then(s => fetch("\(BrowserAgentAPI.Route.deviceScreen)",
                {headers: {"\(BrowserAgentAPI.secretHeader)": s.secret}})).then(r => r.json())
            """)
        let screen = try JSONDecoder().decode(BrowserAgentAPI.DeviceScreen.self, from: Data(json.utf8))
        #expect(screen.device == BrowserSandbox.mac && screen.kind == "mac" && screen.prompts.isEmpty)
        let card = try #require(screen.cards.first)
        #expect(screen.cards.count == 1 && card.network == "visa" && card.suffix == "1111")
        #expect(card.state == "active" && card.isDefault)
        let payment = try #require(screen.recentPayments.first)
        #expect(payment.merchant == "Orchard Demo Store" && payment.currency == "USD")
        #expect(payment.outcome == "completed" && payment.detail == "success")
        #expect(!Self.holdsAccountNumber(json) && !json.contains("4111111111111111"), "\(json)")

        // Same protections as the sheet: no page frames it; only the screen page's own secret gets answers.
        let page = try await client.get(BrowserAgentAPI.origin + BrowserAgentAPI.Page.screen)
        #expect(page.headers["Content-Security-Policy"]?.hasSuffix("frame-ancestors 'none'") == true)
        #expect(page.headers["X-Frame-Options"] == "DENY")
        let sheet = try await Self.secret(client, .sheet)
        func read(_ headers: HTTPHeaders) async throws -> Int {
            try await client.send(
                HTTPClientRequest(
                    method: .get, url: BrowserAgentAPI.origin + BrowserAgentAPI.Route.deviceScreen, headers: headers)
            ).status.code
        }
        #expect(try await read(["Sec-Fetch-Site": "same-origin", BrowserAgentAPI.secretHeader: own]) == 200)
        #expect(try await read(["Sec-Fetch-Site": "same-site", BrowserAgentAPI.secretHeader: own]) == 403)
        #expect(try await read([BrowserAgentAPI.secretHeader: own]) == 403)
        #expect(try await read(["Sec-Fetch-Site": "same-origin", BrowserAgentAPI.secretHeader: sheet]) == 403)
    }
}

extension BrowserPurchaseTests {
    /// The screen's JSON as the screen page reads it (its secret, same origin).
    static func screenJSON(_ client: HTTPClient) async throws -> BrowserAgentAPI.DeviceScreen {
        let own = try await Self.secret(client, .screen)
        let answer = try await client.send(
            HTTPClientRequest(
                method: .get, url: BrowserAgentAPI.origin + BrowserAgentAPI.Route.deviceScreen,
                headers: ["Sec-Fetch-Site": "same-origin", BrowserAgentAPI.secretHeader: own]))
        return try JSONDecoder().decode(BrowserAgentAPI.DeviceScreen.self, from: answer.body)
    }

    /// Reads the screen until `condition` holds (the device process also syncs on its own every few seconds, and
    /// may apply an answer it fetched just before the change); at most 20 s.
    static func screen(
        _ client: HTTPClient, until condition: (BrowserAgentAPI.DeviceScreen) -> Bool
    ) async throws -> BrowserAgentAPI.DeviceScreen {
        var screen = try await screenJSON(client)
        for _ in 0..<80 where !condition(screen) {
            try await Task.sleep(for: .milliseconds(250))
            screen = try await screenJSON(client)
        }
        return screen
    }

    @Test("The device's screen shows lost mode once the device learns it from the Pay server, and clears it on resume")
    func deviceScreenShowsLostMode() async throws {
        let sandbox = try sandbox
        let data = sandbox.dataDirectory
        let device = BrowserSandbox.phone
        let client = try Self.agentClient(sandbox, device)
        defer { client.shutdown() }
        #expect(try await Self.screenJSON(client).lostMode == false)

        let lost = try await orchard(["device", "lost-mode", "--data-dir", data, "--name", device])
        #expect(lost.status == 0, "\(lost.stderr)")
        var resumed = false
        var failure: (any Error)?
        do {
            let synced = try await orchard(["device", "sync", "--data-dir", data, "--name", device])
            #expect(synced.status == 0, "\(synced.stderr)")
            let screen = try await Self.screen(client) {
                $0.lostMode && $0.cards.allSatisfy { $0.state == "suspended" }
            }
            #expect(screen.lostMode && screen.cards.first?.state == "suspended", "\(screen)")

            let browser = try await sandbox.browser(for: device)
            try await browser.navigate(BrowserAgentAPI.origin + BrowserAgentAPI.Page.screen)
            try await browser.wait("the lost-mode flag", until: "return document.body.dataset.lostMode === 'true';")
            #expect(
                try await browser.string("return document.getElementById('lost-mode').hidden ? 'hidden' : 'shown';")
                    == "shown")
            let text = try await browser.string("return document.body.innerText;")
            #expect(text.contains("Lost mode") && text.contains("suspended"), "\(text)")
            #expect(!Self.holdsAccountNumber(text), "\(text)")

            let resume = try await orchard(
                ["device", "resume", "--data-dir", data, "--name", device], stdin: BrowserSandbox.passcode + "\n")
            #expect(resume.status == 0, "\(resume.stderr)")
            resumed = resume.status == 0
            let again = try await orchard(["device", "sync", "--data-dir", data, "--name", device])
            #expect(again.status == 0, "\(again.stderr)")
            let cleared = try await Self.screen(client) { !$0.lostMode && $0.cards.allSatisfy { $0.state == "active" } }
            #expect(!cleared.lostMode && cleared.cards.first?.state == "active", "\(cleared)")
            try await browser.wait("the flag cleared", until: "return document.body.dataset.lostMode === 'false';")
            #expect(
                try await browser.string("return document.getElementById('lost-mode').hidden ? 'hidden' : 'shown';")
                    == "hidden")
        } catch {
            failure = error
        }
        if !resumed {  // the suite's other tests pay with this phone
            _ = try? await orchard(
                ["device", "resume", "--data-dir", data, "--name", device], stdin: BrowserSandbox.passcode + "\n")
            _ = try? await orchard(["device", "sync", "--data-dir", data, "--name", device])
        }
        if let failure { throw failure }
    }
}
