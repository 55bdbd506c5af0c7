import AccessPolicy
import AppPayments
import BrowserAgentAPI
import DeviceControlAPI
import Foundation
import OrchardWeb
import Testing
import WebMerchantAPI

/// The browser agent's boundary (BrowserAgentAPI): the frame's and the sheet page's scripts (web/agent/) use the
/// contract's routes, header and member names, which the agent's server registers and decodes.
@Suite("The browser agent's contract")
struct BrowserAgentContractTests {
    static func script(_ name: String) throws -> String {
        String(decoding: try #require(WebAssets.file("agent", name)), as: UTF8.self)
    }

    /// The JSON member names of `value`.
    static func members(_ value: some Encodable) throws -> Set<String> {
        let object = try JSONSerialization.jsonObject(with: try JSONEncoder().encode(value)) as? [String: Any]
        return Set((object ?? [:]).keys)
    }

    @Test("Each page's script asks the agent for its page load's secret, naming its own document")
    func secretRequests() throws {
        let scripts: [BrowserAgentAPI.Document: String] = [
            .frame: "frame.js", .sheet: "sheet.js", .screen: "screen.js",
        ]
        #expect(Set(scripts.keys) == Set(BrowserAgentAPI.Document.allCases))
        #expect(try Self.members(BrowserAgentAPI.SecretRequest(document: .frame)) == ["document"])
        #expect(try Self.members(BrowserAgentAPI.PageSecret(secret: "s")) == ["secret"])
        for (document, name) in scripts {
            let script = try Self.script(name)
            #expect(script.contains("fetch(\"\(BrowserAgentAPI.Route.secret)\""), "\(name) asks for no secret")
            #expect(script.contains("document: \"\(document.rawValue)\""), "\(name) names another document")
            #expect(script.contains("json.secret") && !script.contains("orchard-agent-secret"), "\(name)")
            #expect(
                script.contains("addEventListener(\"pagehide\"")
                    && script.contains("fetch(\"\(BrowserAgentAPI.Route.endSecret)\""),
                "\(name) does not end its secret with the page load")
            let page = name.replacingOccurrences(of: ".js", with: ".html")
            #expect(!(try Self.script(page)).contains("SECRET"), "\(page) still carries a secret")
        }
    }

    @Test("The frame's script calls every frame route with the secret header, and writes the bodies' members")
    func frameScript() throws {
        let frame = try Self.script("frame.js")
        for route in BrowserAgentAPI.Declared.frame {
            #expect(frame.contains("\"\(route.pattern)\""), "frame.js does not call \(route.pattern)")
        }
        #expect(frame.contains("\"\(BrowserAgentAPI.secretHeader)\""))
        let page = BrowserAgentAPI.PageContext(ancestorOrigins: [], secureContext: true, paymentAllowed: true)
        let begin = BrowserAgentAPI.BeginSession(
            version: 3, page: page,
            request: .init(
                countryCode: "US", currencyCode: "USD", supportedNetworks: [], merchantCapabilities: [],
                total: .init(label: "x", amount: "1")))
        for member in try Self.members(page).union(try Self.members(begin))
            .union(try Self.members(BrowserAgentAPI.ActiveCardQuery(merchantIdentifier: "m", page: page)))
        {
            #expect(frame.contains("\(member):") || frame.contains("\(member) ="), "frame.js never writes \(member)")
        }
        // What it reads of the answers.
        for member in try Self.members(BrowserAgentAPI.SessionBegun(session: "s", validationURL: "u"))
            .union(try Self.members(BrowserAgentAPI.ActiveCardAnswer(canMakePayments: true)))
        {
            #expect(frame.contains(".\(member)"), "frame.js never reads \(member)")
        }
        // The answer it posts is DeviceControlAPI's AnswerPaymentSheetEvent.Body.
        let answer = AnswerPaymentSheetEvent.Body(
            sequence: 1,
            update: PaymentSheetUpdateBody(.init(paymentSummaryItems: [], shippingMethods: [], errors: ["e"])))
        for member in try Self.members(answer) { #expect(frame.contains(member), "frame.js never writes \(member)") }
        // Its result: a failure with errors the user corrects on the sheet (keepsSheet).
        let verdict = PaymentSheetVerdict(.init(status: .failure, errors: ["e"], keepsSheet: true))
        #expect(try Self.members(verdict) == ["status", "errors", "keepsSheet"])
        for member in try Self.members(verdict) {
            #expect(frame.contains("result.\(member)"), "frame.js never writes \(member)")
        }
    }

    @Test("The sheet page's script reads the screen and posts every action of the device's sheet")
    func sheetScript() throws {
        let sheet = try Self.script("sheet.js")
        #expect(sheet.contains("\"\(BrowserAgentAPI.Route.screen)\""))
        #expect(sheet.contains("\"/v1/sheet/current/\" + action"))
        for action in PaymentSheetActionName.allCases where action != .billingContact {
            #expect(sheet.contains("\"\(action.rawValue)\""), "sheet.js never posts \(action.rawValue)")
        }
        let screen = BrowserAgentAPI.SheetScreen(
            state: "idle", domain: "d", merchantName: "m", failure: "f", sheet: nil)
        for member in try Self.members(screen) {
            #expect(sheet.contains(".\(member)"), "sheet.js never reads \(member)")
        }
    }

    @Test("The device screen page's script reads its route with the secret header and every member it shows")
    func screenScript() throws {
        let screen = try Self.script("screen.js")
        for route in BrowserAgentAPI.Declared.screenPage {
            #expect(screen.contains("\"\(route.pattern)\""), "screen.js does not call \(route.pattern)")
        }
        #expect(screen.contains("\"\(BrowserAgentAPI.secretHeader)\""))
        #expect(try Self.script("screen.html").contains("/assets/screen.js"))
        let card = BrowserAgentAPI.DeviceScreen.Card(
            displayName: "d", network: "visa", type: "credit", suffix: "1111", state: "active", isDefault: true)
        let payment = BrowserAgentAPI.DeviceScreen.Payment(
            merchant: "m", amount: "1.00", currency: "USD", outcome: "completed", detail: "success", endedAt: "t")
        let prompt = BrowserAgentAPI.DeviceScreen.Prompt(kind: "paymentSheet", merchant: "m", page: "/sheet")
        let whole = BrowserAgentAPI.DeviceScreen(
            device: "p", kind: "phone", lostMode: true, cards: [card], recentPayments: [payment], prompts: [prompt])
        for member in try Self.members(whole).union(Self.members(card)).union(Self.members(payment))
            .union(Self.members(prompt))
        {
            #expect(screen.contains(".\(member)"), "screen.js never reads \(member)")
        }
        // Display data only: nothing that could carry a card number or device account number.
        let decoded = try JSONDecoder().decode(BrowserAgentAPI.DeviceScreen.self, from: JSONEncoder().encode(whole))
        #expect(decoded == whole)
        #expect(try Self.members(card) == ["displayName", "network", "type", "suffix", "state", "isDefault"])
    }

    @Test("orchard-pay.js is pinned by its SRI hash; the agent's origin is the contract's")
    func pinnedScript() throws {
        let script = WebAssets.orchardPayScript
        #expect(!script.isEmpty)
        let integrity = WebAssets.integrity(of: script)
        #expect(integrity.hasPrefix("sha384-") && integrity.count == 7 + 64)
        #expect(String(decoding: script, as: UTF8.self).contains("\"\(BrowserAgentAPI.origin)\""))
        #expect(WebAssets.file("agent", "../jsapi/orchard-pay.js") == nil)
        // The Pay server's declared routes are the files' paths.
        #expect(WebMerchantAPI.Script.latest == WebAssets.latestScriptPath)
        #expect(WebMerchantAPI.Script.pinned == WebAssets.pinnedScriptPath)
    }
}
