import AccessPolicy
import AppPayments
import BrowserAgentAPI
import Device
import DeviceControlAPI
import Foundation
public import OrchardCrypto
import OrchardHTTP
import OrchardLogging
import OrchardWeb
public import PayClient
import RelayAPI
import SecureElement
import Wallet
import WebMerchantAPI

/// What the browser agent of `orchard device run` runs with.
public struct BrowserAgentConfiguration: Sendable {
    /// The loopback port (0: any free port; the one bound is written to `DIR/devices/NAME/agent.json`).
    public let port: Int
    /// The TLS certificate chain for `agent.orchard.test` (issued by the Orchard root) and its key.
    public let certificateChainPEM: String
    public let privateKeyPEM: SecureBytes
    /// Checks a page's merchant session before any sheet.
    public let sessions: MerchantSessionCheck
    /// WebKit's 30-second rule: a page that does not complete an event in this time ends its sheet.
    public let handlerTimeout: Duration
    /// `canMakePaymentsWithActiveCard(merchantID)` for a top-level page's host, when website queries are on (the
    /// Pay server's capability statement); nil answers false.
    public let activeCard: (@Sendable (_ merchantIdentifier: String, _ domain: String) async -> Bool)?

    public init(
        port: Int, certificateChainPEM: String, privateKeyPEM: SecureBytes, sessions: MerchantSessionCheck,
        handlerTimeout: Duration = .seconds(30),
        activeCard: (@Sendable (_ merchantIdentifier: String, _ domain: String) async -> Bool)? = nil
    ) {
        self.port = port
        self.certificateChainPEM = certificateChainPEM
        self.privateKeyPEM = privateKeyPEM
        self.sessions = sessions
        self.handlerTimeout = handlerTimeout
        self.activeCard = activeCard
    }
}

/// The device's browser agent (docs/web.md, "The browser agent"): the built-in side of a browser's Apple Pay,
/// served at `https://agent.orchard.test` by the device process. `orchard-pay.js` frames ``BrowserAgentAPI/Page/frame``
/// invisibly and talks to it only by `postMessage`; the frame reads the page's real origin from the browser and
/// calls this server, which answers only its own documents (`Sec-Fetch-Site: same-origin` and the secret the page
/// load fetched from `POST /v1/secret`). Before any sheet it verifies the merchant session (``MerchantSessionCheck``); the sheet
/// is the device's ``PaymentSheetService`` sheet, shown at ``BrowserAgentAPI/Page/sheet``, a page no other page
/// can frame.
final class BrowserAgent: Sendable {
    let server: HTTPServer
    private let state: AgentState

    init(
        configuration: BrowserAgentConfiguration, sheets: PaymentSheetService,
        canMakePayments: @escaping @Sendable () async -> Bool,
        activeCard: @escaping @Sendable (_ merchantIdentifier: String, _ domain: String) async -> Bool,
        handoff: Handoff? = nil, trace: @escaping @Sendable (String) -> Void
    ) throws {
        let state = AgentState(
            configuration: configuration, sheets: sheets, canMakePayments: canMakePayments, activeCard: activeCard,
            handoff: handoff, trace: trace)
        self.state = state
        var router = Router()
        router.add(.get, BrowserAgentAPI.Page.frame) { _ in
            let capable = await canMakePayments()
            return try state.document(
                "frame.html", frameAncestors: "https:", values: ["CAN_MAKE_PAYMENTS": capable ? "true" : "false"])
        }
        router.add(.get, BrowserAgentAPI.Page.sheet) { _ in
            try state.document("sheet.html", frameAncestors: "'none'")
        }
        router.add(.get, BrowserAgentAPI.Page.screen) { _ in
            try state.document("screen.html", frameAncestors: "'none'")
        }
        router.add(BrowserAgentAPI.Declared.secret) { request in state.secretRoute(request) }
        router.add(BrowserAgentAPI.Declared.endSecret) { request in state.endSecretRoute(request) }
        for route in BrowserAgentAPI.Declared.screenPage {
            router.add(route) { request in await state.screenRoute(route, request) }
        }
        router.add(.get, BrowserAgentAPI.Page.assets) { request in
            let name = try request.parameter("name")
            guard let file = WebAssets.file("agent", name), !name.hasSuffix(".html") else {
                throw HTTPError(.notFound, "no asset \(name)")
            }
            return HTTPResponse(
                status: .ok,
                headers: [
                    "Content-Type": WebAssets.contentType(of: name), "Cache-Control": "no-store",
                    "X-Content-Type-Options": "nosniff", "Cross-Origin-Resource-Policy": "same-origin",
                ], body: file)
        }
        for route in BrowserAgentAPI.Declared.frame {
            router.add(route) { request in await state.frameRoute(route, request) }
        }
        for route in BrowserAgentAPI.Declared.sheet {
            router.add(route) { request in await state.sheetRoute(route, request) }
        }
        var limits = HTTPServerConfiguration.Limits()
        limits.maxBodyBytes = 64 * 1024
        server = try HTTPServer(
            configuration: HTTPServerConfiguration(
                listeners: [
                    // The agent acts for the device's user: another user of the machine cannot connect to it.
                    .init(
                        host: "127.0.0.1", port: configuration.port,
                        tls: TLSServerConfiguration(
                            certificateChainPEM: configuration.certificateChainPEM,
                            privateKeyPEM: configuration.privateKeyPEM),
                        peers: .processOwner)
                ], threads: 1, limits: limits), router: router, logger: .disabled)
    }
}

/// The agent's state: the secrets it handed out, the pages' sessions.
private final class AgentState: @unchecked Sendable {
    // @unchecked: the mutable members are guarded by `lock`; the rest is immutable.
    typealias SecretKind = BrowserAgentSecrets.Kind

    /// A page's session, from `begin()` to its end.
    final class WebSession: @unchecked Sendable {
        // @unchecked: guarded by the agent's `lock`.
        let id: String
        let frameSecret: String
        let domain: String
        let version: Int
        let request: PaymentRequest
        var state = "validating"
        var sheet: String?
        var merchantName: String?
        /// The verified session's merchant (a fresh session must name the same one).
        var merchantIdentifier: String?
        var failure: String?
        /// Handoff (a Mac that cannot authenticate a payment itself): the page's merchant session as it came, the
        /// nearby devices' cards offered, and the payment the chosen device sent back.
        var merchantSessionJSON: String?
        var handoffChoices: [BrowserAgentAPI.HandoffChoice]?
        var handoffPayment: PaymentSheetPayment?
        /// The payment request sent to the chosen device (its ID and the device), and the task waiting for its result.
        var handoffRequest: (id: String, device: String)?
        var handoffTask: Task<Void, Never>?
        /// The page's version 14 payment type as the page wrote it (a Handoff request carries it to the device).
        var pageType: BrowserAgentAPI.PaymentType?
        let began = ContinuousClock.now
        init(id: String, frameSecret: String, domain: String, version: Int, request: PaymentRequest) {
            self.id = id
            self.frameSecret = frameSecret
            self.domain = domain
            self.version = version
            self.request = request
        }
    }

    let configuration: BrowserAgentConfiguration
    let sheets: PaymentSheetService
    let canMakePayments: @Sendable () async -> Bool
    let activeCard: @Sendable (String, String) async -> Bool
    /// The Mac's Handoff: a Mac that cannot authenticate a payment itself pays with a phone or watch it hears.
    let handoff: Handoff?
    let trace: @Sendable (String) -> Void
    private let secrets = BrowserAgentSecrets()
    /// The secrets whose page load ended, with when. An entry goes once its secret has expired anyway, so the table
    /// holds at most a lifetime of ended page loads, and nothing a client sends takes one out early.
    private var ended: [String: ContinuousClock.Instant] = [:]
    private let lock = NSLock()
    private var sessions: [String: WebSession] = [:]
    private var latest: WebSession?
    /// The events whose handler time is watched (each once).
    private var watched: Set<String> = []

    init(
        configuration: BrowserAgentConfiguration, sheets: PaymentSheetService,
        canMakePayments: @escaping @Sendable () async -> Bool,
        activeCard: @escaping @Sendable (String, String) async -> Bool, handoff: Handoff? = nil,
        trace: @escaping @Sendable (String) -> Void
    ) {
        self.configuration = configuration
        self.sheets = sheets
        self.canMakePayments = canMakePayments
        self.activeCard = activeCard
        self.handoff = handoff
        self.trace = trace
    }

    // MARK: Documents

    /// `web/agent/<name>` with `values` in place of `{{KEY}}`, never cached, framable only by `frameAncestors`.
    /// No document holds a secret (``secretRoute(_:)``).
    func document(_ name: String, frameAncestors: String, values: [String: String] = [:]) throws -> HTTPResponse {
        guard let template = WebAssets.file("agent", name) else { throw HTTPError(.notFound, "no page \(name)") }
        var page = String(decoding: template, as: UTF8.self)
        for (key, value) in values { page = page.replacingOccurrences(of: "{{\(key)}}", with: value) }
        var headers: HTTPHeaders = [
            "Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store",
            "Content-Security-Policy":
                "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                + "frame-ancestors \(frameAncestors)",
            "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
        ]
        if frameAncestors == "'none'" { headers.set("X-Frame-Options", "DENY") }
        return HTTPResponse(status: .ok, headers: headers, body: Data(page.utf8))
    }

    // MARK: Who may call

    /// `POST /v1/secret`: a fresh secret (``BrowserAgentSecrets``) for a page load of one of the agent's documents.
    /// Only a script of the agent's origin sends what this asks, as the browser writes it: its `Origin`, a
    /// same-origin `fetch` (`Sec-Fetch-Site: same-origin`, `Sec-Fetch-Dest: empty`, never a navigation or a
    /// subresource) and a JSON body, which no HTML form can post. A page of another origin cannot read an answer
    /// it may not send; a GET of a document hands out nothing.
    func secretRoute(_ request: HTTPRequest) -> HTTPResponse {
        let headers = request.headers
        guard headers["Origin"] == BrowserAgentAPI.origin, headers["Sec-Fetch-Site"] == "same-origin",
            headers["Sec-Fetch-Dest"] == "empty",
            headers["Content-Type"]?.lowercased().hasPrefix("application/json") == true
        else {
            return Self.failure(
                403, "notAgentDocument",
                "a secret is only for a fetch of the agent's own documents (Origin \(BrowserAgentAPI.origin), "
                    + "Sec-Fetch-Site same-origin, Sec-Fetch-Dest empty, a JSON body)")
        }
        let asked: BrowserAgentAPI.SecretRequest
        do throws(AgentBodyRefusal) {
            asked = try AgentBody.decode(
                request.body, otherwise: "the body is {\"document\": \"frame\"|\"sheet\"|\"screen\"}")
        } catch {
            return error.response
        }
        let kind: SecretKind =
            switch asked.document {
            case .frame: .frame
            case .sheet: .sheet
            case .screen: .screen
            }
        return Self.json(BrowserAgentAPI.PageSecret(secret: secrets.mint(kind)))
    }

    /// The secret's kind when `request` comes from one of the agent's own documents, else nil.
    private func caller(_ request: HTTPRequest) -> (kind: SecretKind, secret: String)? {
        guard request.headers["Sec-Fetch-Site"] == "same-origin",
            let secret = request.headers[BrowserAgentAPI.secretHeader],
            let kind = secrets.kind(of: secret), lock.withLock({ ended[secret] == nil })
        else { return nil }
        return (kind, secret)
    }

    /// `POST /v1/secret/end`: the caller's page load ended; its secret is refused from then on.
    func endSecretRoute(_ request: HTTPRequest) -> HTTPResponse {
        guard let caller = caller(request) else { return Self.forbidden }
        let now = ContinuousClock.now
        lock.withLock {
            ended = ended.filter { now - $0.value <= BrowserAgentSecrets.lifetime }
            ended[caller.secret] = now
        }
        return Self.json([String: String]())
    }

    /// The kind of the agent's own document that sent `request`, else nil.
    func callerKind(_ request: HTTPRequest) -> SecretKind? { caller(request)?.kind }

    private static let forbidden = failure(
        403, "notAgentDocument",
        "the browser agent answers only its own frame and sheet (Sec-Fetch-Site same-origin and their secret)")

    static func failure(_ status: Int, _ code: String, _ message: String) -> HTTPResponse {
        response(ControlResponse.error(status, code, message))
    }

    static func response(_ control: ControlResponse) -> HTTPResponse {
        HTTPResponse(
            status: HTTPStatus(code: control.status, reason: control.status < 400 ? "OK" : "Refused"),
            headers: ["Content-Type": "application/json", "Cache-Control": "no-store"], body: control.body)
    }

    static func json(_ value: some Encodable, status: Int = 200) -> HTTPResponse {
        response(ControlResponse.json(value, status: status))
    }

    private static let decoder = JSONDecoder()

    // MARK: The frame

    func frameRoute(_ route: DeclaredRoute, _ request: HTTPRequest) async -> HTTPResponse {
        guard let caller = caller(request), caller.kind == .frame else { return Self.forbidden }
        switch route.pattern {
        case BrowserAgentAPI.Route.hello:
            let page: BrowserAgentAPI.PageContext
            do throws(AgentBodyRefusal) {
                page = try AgentBody.decode(request.body, otherwise: "the body is a page context")
            } catch {
                return error.response
            }
            let refusal = Self.refusal(page)
            let capable = refusal == nil ? await canMakePayments() : false
            return Self.json(BrowserAgentAPI.Hello(canMakePayments: capable, refusal: refusal))
        case BrowserAgentAPI.Route.sessions:
            return await begin(request, secret: caller.secret)
        case BrowserAgentAPI.Route.activeCard:
            let query: BrowserAgentAPI.ActiveCardQuery
            do throws(AgentBodyRefusal) {
                query = try AgentBody.decode(request.body, otherwise: "the body is {merchantIdentifier, page}")
            } catch {
                return error.response
            }
            guard Self.refusal(query.page) == nil, let domain = Self.topHost(query.page) else {
                return Self.json(
                    BrowserAgentAPI.ActiveCardAnswer(canMakePayments: false, credentialStatus: "unsupported"))
            }
            // The wallet's answer (website queries off: as canMakePayments(), asking no server).
            let answer = await activeCard(query.merchantIdentifier, domain)
            let disclosed = await sheets.device.wallet.currentSettings.allowWebsiteQueries
            let capable = await canMakePayments()
            let status = !capable ? "unsupported" : !disclosed ? "unknown" : answer ? "available" : "unavailable"
            return Self.json(BrowserAgentAPI.ActiveCardAnswer(canMakePayments: answer, credentialStatus: status))
        default:
            break
        }
        guard let id = request.pathParameters["session"],
            let session = lock.withLock({ sessions[id] }), session.frameSecret == caller.secret
        else { return Self.failure(404, "notFound", "no such session of this frame") }
        switch route.pattern {
        case BrowserAgentAPI.Route.merchantSession:
            return await validate(session, request.body)
        case BrowserAgentAPI.Route.events:
            let wait = request.queryValue("wait").flatMap(Int.init) ?? 20
            guard let sheet = lock.withLock({ session.sheet }) else {
                if lock.withLock({ session.handoffChoices != nil }) { return await handoffEvent(session, wait: wait) }
                let ended = lock.withLock { session.state == "ended" }
                var event = PaymentSheetAppEvent(sheet: id, kind: ended ? .ended : .none)
                if ended { event.outcome = "cancelled" }
                return Self.json(event)
            }
            let answer = await sheets.handle(.sheetEvents(sheet, wait: wait), body: Data())
            watch(answer, sheet: sheet)
            return Self.response(answer)
        case BrowserAgentAPI.Route.answer:
            if lock.withLock({ session.handoffChoices != nil && session.sheet == nil }) {
                return handoffAnswer(session, request.body)
            }
            guard let sheet = lock.withLock({ session.sheet }) else {
                return Self.failure(409, "invalidAction", "the session has no sheet")
            }
            let answer = await sheets.handle(.sheetAnswer(sheet), body: request.body)
            // A failure that keeps the sheet spent the merchant session: the page validates again (part 4).
            if answer.status == 200,
                (try? AgentBody.decode(request.body, as: AnswerPaymentSheetEvent.Body.self))?.result?.keepsSheet
                    == true
            {
                lock.withLock { session.state = "revalidating" }
            }
            return Self.response(answer)
        case BrowserAgentAPI.Route.abort:
            await endHandoff(session, "the page aborted its session")
            let sheet = lock.withLock { () -> String? in
                if session.sheet == nil { session.state = "ended" }
                return session.sheet
            }
            if let sheet { _ = await sheets.handle(.sheetAction(sheet, .cancel), body: Data()) }
            trace("agent: the page at \(session.domain) aborted its session")
            return Self.json(BrowserAgentAPI.SessionState(state: "ended"))
        default:
            return Self.failure(404, "notFound", "no route")
        }
    }

    /// WebKit's refusals of a page, from what the frame read of it (notes/apple-pay-web.md §1.8).
    static func refusal(_ page: BrowserAgentAPI.PageContext) -> BrowserAgentAPI.Refusal? {
        guard let first = page.ancestorOrigins.first else {
            return .init(
                name: "InvalidAccessError", message: "Trying to start an Apple Pay session from an inactive document.")
        }
        guard first.hasPrefix("https://") else {
            return .init(
                name: "InvalidAccessError", message: "Trying to start an Apple Pay session from an insecure document.")
        }
        guard page.ancestorOrigins.allSatisfy({ $0.hasPrefix("https://") }), page.secureContext else {
            return .init(
                name: "InvalidAccessError",
                message: "Trying to start an Apple Pay session from a document with an insecure parent frame.")
        }
        guard page.ancestorOrigins.count == 1 || page.paymentAllowed else {
            return .init(
                name: "SecurityError",
                message:
                    "Third-party iframes are not allowed to request payments unless explicitly allowed via Feature-Policy (payment)"
            )
        }
        return nil
    }

    /// The top-level page's host (the last ancestor origin's), lower-cased, without a port.
    static func topHost(_ page: BrowserAgentAPI.PageContext) -> String? {
        guard let top = page.ancestorOrigins.last, let url = URL(string: top), let host = url.host else { return nil }
        return host.lowercased()
    }

    /// Whether the device's latest web session is still going: its sheet is up, or it waits for its merchant's
    /// validation (for at most the handler timeout, as WebKit's 30-second rule ends an unanswered
    /// `onvalidatemerchant`).
    private func busy() async -> Bool {
        guard let session = lock.withLock({ latest }) else { return false }
        let (state, sheet) = lock.withLock { (session.state, session.sheet) }
        if state == "ended" || state == "completed" { return false }
        if let sheet {
            guard let current = await sheets.session(sheet) else { return false }
            return await current.ending == nil
        }
        if ["choosing", "waiting", "authorized"].contains(state) { return true }
        guard ContinuousClock.now - session.began < configuration.handlerTimeout else {
            lock.withLock {
                session.state = "ended"
                session.failure = "the page did not complete its merchant's validation in time"
            }
            return false
        }
        return true
    }

    private func begin(_ request: HTTPRequest, secret: String) async -> HTTPResponse {
        let begin: BrowserAgentAPI.BeginSession
        do throws(AgentBodyRefusal) {
            begin = try AgentBody.decode(request.body, otherwise: "the body is {version, page, request}")
        } catch {
            return error.response
        }
        if let refusal = Self.refusal(begin.page) {
            return Self.failure(403, refusal.name, refusal.message)
        }
        guard let domain = Self.topHost(begin.page) else {
            return Self.failure(400, "invalidRequest", "the page has no top-level origin")
        }
        let converted: PaymentRequest
        switch WebPaymentTypes.paymentRequest(begin.request) {
        case .success(let request): converted = request
        case .failure(let problem): return Self.failure(400, "invalidRequest", problem.message)
        }
        let id = UUID().uuidString.lowercased()
        let session = WebSession(
            id: id, frameSecret: secret, domain: domain, version: begin.version, request: converted)
        session.pageType = begin.request.paymentType
        let running = await busy()
        let busy = lock.withLock { () -> Bool in
            if running { return true }
            sessions[id] = session
            latest = session
            if sessions.count > 64, let oldest = sessions.values.filter({ $0.state == "ended" }).first {
                sessions.removeValue(forKey: oldest.id)
            }
            return false
        }
        guard !busy else {
            return Self.failure(
                409, "InvalidAccessError", "Page already has an active payment session.")
        }
        trace("agent: \(domain) began a session (version \(begin.version)); waiting for its merchant session")
        return Self.json(
            BrowserAgentAPI.SessionBegun(session: id, validationURL: BrowserAgentAPI.validationURL), status: 201)
    }

    /// `completeMerchantValidation`: the session verified, then the sheet presented.
    private func validate(_ session: WebSession, _ body: Data) async -> HTTPResponse {
        let state = lock.withLock { session.state }
        guard state == "validating" || state == "revalidating" else {
            return Self.failure(409, "InvalidAccessError", "the session does not wait for its merchant's validation")
        }
        let problem: String?
        let merchantSession: MerchantSession?
        do {
            let parsed = try MerchantSession(json: Array(body))
            merchantSession = parsed
            problem = configuration.sessions.problem(with: parsed, domain: session.domain)
        } catch {
            merchantSession = nil
            problem = "the merchant session is not one: \(error.message)"
        }
        let (sheetID, merchant) = lock.withLock { (session.sheet, session.merchantIdentifier) }
        guard let merchantSession, problem == nil,
            state == "validating" || merchantSession.merchantIdentifier == merchant
        else {
            let reason = problem ?? "the fresh merchant session is for another merchant"
            lock.withLock {
                session.state = "ended"
                session.failure = reason
            }
            if let sheetID { _ = await sheets.handle(.sheetAction(sheetID, .cancel), body: Data()) }
            trace("agent: \(session.domain)'s merchant session refused: \(reason)")
            return Self.failure(422, "merchantSessionRefused", reason)
        }
        if state == "revalidating", let sheetID {
            return await renew(session, sheet: sheetID, with: merchantSession)
        }
        if let handoff, !sheets.device.profile.authorizesPayments {
            return await offerHandoff(session, merchantSession, json: String(decoding: body, as: UTF8.self), handoff)
        }
        var request = session.request
        request.merchantIdentifier = merchantSession.merchantIdentifier
        let web = WebPaymentContext(
            domain: session.domain, merchantSessionIdentifier: merchantSession.merchantSessionIdentifier,
            merchantSessionNonce: merchantSession.nonce)
        lock.withLock {
            session.merchantName = merchantSession.displayName
            session.merchantIdentifier = merchantSession.merchantIdentifier
            session.state = "presenting"
        }
        let presented = await sheets.presentWeb(request, web: web)
        guard presented.status == 201,
            let sheet = try? Self.decoder.decode(PresentedPaymentSheet.self, from: presented.body)
        else {
            let message =
                (try? Self.decoder.decode(DeviceControlErrorBody.self, from: presented.body))?.error.message
                ?? "the sheet could not be presented"
            lock.withLock {
                session.state = "ended"
                session.failure = message
            }
            return Self.response(presented)
        }
        let aborted = lock.withLock { () -> Bool in
            session.sheet = sheet.id
            // The page aborted while the sheet was being presented: no sheet stays up for a page that left.
            guard session.state != "ended" else { return true }
            session.state = "presented"
            return false
        }
        if aborted {
            _ = await sheets.handle(.sheetAction(sheet.id, .cancel), body: Data())
            return Self.failure(409, "InvalidAccessError", "the page aborted its session")
        }
        trace("agent: \(session.domain)'s merchant session verified; sheet \(sheet.id) on the device's screen")
        return Self.json(BrowserAgentAPI.SessionState(state: "presented"))
    }

    /// A fresh merchant session for a sheet whose session a refused payment spent: the sheet binds it for the
    /// user's next authorization (docs/web.md, "A failed payment the user can correct").
    private func renew(
        _ session: WebSession, sheet: String, with merchantSession: MerchantSession
    ) async
        -> HTTPResponse
    {
        let web = WebPaymentContext(
            domain: session.domain, merchantSessionIdentifier: merchantSession.merchantSessionIdentifier,
            merchantSessionNonce: merchantSession.nonce)
        guard let current = await sheets.session(sheet),
            case .success(let reply) = await current.submit(.merchantSession(web)),
            case .accepted = reply.result
        else {
            return Self.failure(409, "InvalidAccessError", "the sheet does not wait for a fresh merchant session")
        }
        lock.withLock { session.state = "presented" }
        trace("agent: \(session.domain)'s fresh merchant session verified for the sheet's next authorization")
        return Self.json(BrowserAgentAPI.SessionState(state: "presented"))
    }

    /// WebKit's 30-second rule: the page must complete each event it was handed within the handler timeout.
    private func watch(_ answer: ControlResponse, sheet: String) {
        guard answer.status == 200,
            let event = try? Self.decoder.decode(PaymentSheetAppEvent.self, from: answer.body),
            let sequence = event.sequence, event.kind != .none, event.kind != .ended,
            lock.withLock({ watched.insert("\(sheet) \(sequence)").inserted })
        else { return }
        let timeout = configuration.handlerTimeout
        let sheets = self.sheets
        let trace = self.trace
        Task {
            try? await Task.sleep(for: timeout)
            guard let session = await sheets.session(sheet) else { return }
            if await session.handlerTimedOut(sequence) {
                trace("agent: the page did not complete event \(sequence) in time: the sheet ends")
            }
        }
    }

    // MARK: The sheet page (the device's screen)

    func sheetRoute(_ route: DeclaredRoute, _ request: HTTPRequest) async -> HTTPResponse {
        guard let caller = caller(request), caller.kind == .sheet else { return Self.forbidden }
        if let session = lock.withLock({ latest }), lock.withLock({ session.handoffChoices != nil }) {
            return await handoffScreen(session, route, request)
        }
        if route.pattern == BrowserAgentAPI.Route.screenAction {
            guard let name = request.pathParameters["action"], let verb = PaymentSheetActionName(rawValue: name)
            else { return Self.failure(404, "notFound", "no such action") }
            // Only the sheet this agent presented for a page: never the device's current sheet, which may be an
            // app's, or one presented for another device's Handoff request.
            guard let sheet = lock.withLock({ latest?.sheet }), await sheets.session(sheet) != nil else {
                return Self.failure(409, "invalidAction", "no sheet of a web page is on this device's screen")
            }
            return Self.response(await sheets.handle(.sheetAction(sheet, verb), body: request.body))
        }
        let web = lock.withLock {
            latest.map {
                (state: $0.state, domain: $0.domain, name: $0.merchantName, failure: $0.failure, sheet: $0.sheet)
            }
        }
        if let web, web.sheet == nil {
            // Before its sheet: the page's merchant is being validated, or its session was refused.
            return Self.json(
                BrowserAgentAPI.SheetScreen(
                    state: web.state == "ended" ? "ended" : "validating", domain: web.domain, merchantName: web.name,
                    failure: web.failure, sheet: nil))
        }
        // The sheet of the page's session only (as the actions above).
        let current: PaymentSheetSession? = if let sheet = web?.sheet { await sheets.session(sheet) } else { nil }
        let view = await current?.currentSheet
        let state = view.map { $0.status == "presented" ? "presented" : "ended" } ?? "idle"
        return Self.json(
            BrowserAgentAPI.SheetScreen(
                state: state, domain: view == nil ? nil : web?.domain, merchantName: view == nil ? nil : web?.name,
                failure: view == nil ? nil : web?.failure ?? view?.failure, sheet: view))
    }
}

// MARK: The device's screen beside the sheet

extension AgentState {
    /// ``BrowserAgentAPI/Route/deviceScreen`` for the screen page: the wallet's cards (display data only), the sheets
    /// that ended since the device process started, and the sheet waiting for the user.
    fileprivate func screenRoute(_ route: DeclaredRoute, _ request: HTTPRequest) async -> HTTPResponse {
        guard let caller = callerKind(request), caller == .screen else {
            return Self.failure(
                403, "notAgentDocument",
                "the device's screen answers only its own page (Sec-Fetch-Site same-origin and its secret)")
        }
        let device = sheets.device
        let wallet = device.wallet
        let defaultCard = await wallet.defaultCard?.id
        let cards = await wallet.allCards.sorted { ($0.addedAt, $0.id) < ($1.addedAt, $1.id) }.map {
            BrowserAgentAPI.DeviceScreen.Card(
                displayName: $0.displayName, network: $0.network, type: String(describing: $0.type), suffix: $0.suffix,
                state: $0.state.rawValue, isDefault: $0.id == defaultCard)
        }
        let payments = await sheets.recentPayments().map {
            BrowserAgentAPI.DeviceScreen.Payment(
                merchant: $0.merchant, amount: $0.amount, currency: $0.currency, outcome: $0.outcome,
                detail: $0.detail, endedAt: $0.endedAt.formatted(.iso8601))
        }
        var prompts: [BrowserAgentAPI.DeviceScreen.Prompt] = []
        if let view = await sheets.session("current")?.currentSheet, view.status == "presented" {
            prompts.append(.init(kind: "paymentSheet", merchant: view.merchantName, page: BrowserAgentAPI.Page.sheet))
        } else if let web = lock.withLock({ latest.map { ($0.state, $0.merchantName ?? $0.domain) } }),
            ["validating", "presenting", "discovering", "choosing", "waiting"].contains(web.0)
        {
            prompts.append(.init(kind: "paymentSheet", merchant: web.1, page: BrowserAgentAPI.Page.sheet))
        }
        return Self.json(
            BrowserAgentAPI.DeviceScreen(
                device: device.name, kind: device.profile.kind.rawValue, lostMode: device.isInLostMode, cards: cards,
                recentPayments: payments, prompts: prompts))
    }
}

// MARK: Handoff (docs/handoff.md, "The browser on a Mac")

extension AgentState {
    /// A Mac that cannot authenticate a payment itself: its sheet lists the phones and watches near it that offer a
    /// card; none: the session ends (the page gets `oncancel`) with "iPhone could not be found…".
    fileprivate func offerHandoff(
        _ session: WebSession, _ merchantSession: MerchantSession, json: String, _ handoff: Handoff
    ) async -> HTTPResponse {
        lock.withLock {
            session.merchantName = merchantSession.displayName
            session.merchantIdentifier = merchantSession.merchantIdentifier
            session.merchantSessionJSON = json
            session.state = "discovering"
        }
        let offered = await handoff.discover()
        let choices = offered.devices.flatMap { device in
            device.cards.map { card in
                BrowserAgentAPI.HandoffChoice(
                    device: device.device, label: device.label, card: card.identifier,
                    cardDescription: "\(card.displayName) •••• \(card.suffix) (\(card.network), \(card.type))")
            }
        }
        let ended = lock.withLock { () -> Bool in
            session.handoffChoices = choices
            guard session.state == "discovering", !choices.isEmpty else {
                session.state = "ended"
                session.failure = session.failure ?? offered.message ?? Handoff.notFound
                return true
            }
            session.state = "choosing"
            return false
        }
        if ended {
            let reason = lock.withLock { session.failure ?? Handoff.notFound }
            trace("agent: \(session.domain)'s payment: \(reason)")
            return Self.failure(409, "InvalidAccessError", reason)
        }
        trace("agent: \(session.domain)'s merchant session verified; the sheet offers \(choices.count) nearby card(s)")
        return Self.json(BrowserAgentAPI.SessionState(state: "presented"))
    }

    /// The page's events for a Handoff session: the chosen device's payment (`paymentAuthorized`, sequence 1), then
    /// the end (`completed` after the page's success, else `cancelled`, which the page sees as `oncancel`).
    fileprivate func handoffEvent(_ session: WebSession, wait: Int) async -> HTTPResponse {
        let deadline = ContinuousClock.now + .seconds(max(0, min(wait, 30)))
        while true {
            let (state, payment) = lock.withLock { (session.state, session.handoffPayment) }
            switch state {
            case "authorized":
                var event = PaymentSheetAppEvent(sheet: session.id, kind: .paymentAuthorized)
                event.sequence = 1
                event.payment = payment
                return Self.json(event)
            case "completed", "ended":
                var event = PaymentSheetAppEvent(sheet: session.id, kind: .ended)
                event.outcome = state == "completed" ? "completed" : "cancelled"
                return Self.json(event)
            default:
                guard ContinuousClock.now < deadline else {
                    return Self.json(PaymentSheetAppEvent(sheet: session.id, kind: .none))
                }
                try? await Task.sleep(for: .milliseconds(50))
            }
        }
    }

    /// `completePayment` for a Handoff payment: success completes the sheet, a failure ends it.
    fileprivate func handoffAnswer(_ session: WebSession, _ body: Data) -> HTTPResponse {
        let problem = "the body is the payment's result {sequence, result}"
        let answer: AnswerPaymentSheetEvent.Body
        do throws(AgentBodyRefusal) {
            answer = try AgentBody.decode(body, otherwise: problem)
        } catch {
            return error.response
        }
        guard answer.sequence == 1, let result = answer.result else {
            return Self.failure(400, "invalidRequest", problem)
        }
        let done = lock.withLock { () -> (id: String, device: String)?? in
            guard session.state == "authorized" else { return nil }
            session.state = result.status == "success" ? "completed" : "ended"
            if result.status != "success" { session.failure = "the website did not accept the payment" }
            return .some(session.handoffRequest)
        }
        guard let done else { return Self.failure(409, "invalidAction", "no payment waits for its result") }
        // The device's sheet waited for the page's verdict: it ends as the page said.
        if let handoff, let request = done {
            Task {
                await handoff.complete(
                    requestID: request.id, device: request.device, success: result.status == "success")
            }
        }
        trace("agent: \(session.domain) completed its Handoff payment: \(result.status)")
        return Self.json(BrowserAgentAPI.SessionState(state: "ended"))
    }

    /// The Mac's sheet page for a Handoff session: the devices and cards offered, then the chosen device's progress;
    /// `handoff` sends the payment to the chosen device, `cancel` ends the session.
    fileprivate func handoffScreen(
        _ session: WebSession, _ route: DeclaredRoute, _ request: HTTPRequest
    ) async -> HTTPResponse {
        if route.pattern == BrowserAgentAPI.Route.screenAction {
            switch request.pathParameters["action"] {
            case "cancel":
                await endHandoff(session, "cancelled")
                lock.withLock {
                    if ["discovering", "choosing"].contains(session.state) {
                        session.state = "ended"
                        session.failure = "cancelled"
                    }
                }
                return Self.json(BrowserAgentAPI.SessionState(state: "ended"))
            case "handoff":
                return await chooseHandoff(session, request.body)
            default:
                return Self.failure(409, "invalidAction", "choose a nearby iPhone or Apple Watch, or cancel")
            }
        }
        let (state, domain, name, failure, choices) = lock.withLock {
            (session.state, session.domain, session.merchantName, session.failure, session.handoffChoices)
        }
        let shown = state == "authorized" ? "waiting" : state == "discovering" ? "validating" : state
        return Self.json(
            BrowserAgentAPI.SheetScreen(
                state: shown, domain: domain, merchantName: name, failure: failure, sheet: nil, handoff: choices))
    }

    /// The user chose a device's card: the payment request goes to that device (`Handoff.pay`), whose user
    /// authorizes there; its token, or its refusal, comes back for the page.
    private func chooseHandoff(_ session: WebSession, _ body: Data) async -> HTTPResponse {
        let problem = "the body is one of the sheet's handoff choices"
        guard let handoff else { return Self.failure(400, "invalidRequest", problem) }
        let choice: BrowserAgentAPI.HandoffChoice
        do throws(AgentBodyRefusal) {
            choice = try AgentBody.decode(body, otherwise: problem)
        } catch {
            return error.response
        }
        let requestID = handoff.newRequestID()
        let payment = lock.withLock { () -> HandoffPayment? in
            guard session.state == "choosing", let json = session.merchantSessionJSON,
                session.handoffChoices?.contains(where: { $0.device == choice.device && $0.card == choice.card })
                    == true
            else { return nil }
            session.state = "waiting"
            session.handoffRequest = (requestID, choice.device)
            // The page's recurring, automatic reload or deferred payment goes too: the device shows it and its
            // token carries the merchant token.
            var body = PaymentSheetRequestBody(session.request)
            WebPaymentTypes.carry(session.pageType, into: &body)
            return HandoffPayment(
                device: choice.device, card: choice.card, merchantSession: json, domain: session.domain,
                request: body)
        }
        guard let payment else { return Self.failure(409, "invalidAction", "the sheet offers no such choice now") }
        trace("agent: \(session.domain)'s payment goes to \(choice.device) (Handoff); its user authorizes there")
        let trace = self.trace
        let timeout = configuration.handlerTimeout
        let task = Task {
            // The device's sheet stays up until the page's verdict (or its end).
            let answer = await handoff.pay(payment, requestID: requestID, awaitsVerdict: true)
            let ended = lock.withLock { () -> Bool in
                guard session.state == "waiting" else { return true }
                if answer.outcome == "authorized", let result = answer.payment {
                    session.handoffPayment = result
                    session.state = "authorized"
                    return false
                }
                session.state = "ended"
                session.failure = answer.failure ?? "\(choice.device) did not authorize the payment"
                return true
            }
            trace("agent: \(choice.device)'s answer: \(ended ? "refused: \(answer.failure ?? "")" : "authorized")")
            guard !ended else { return }
            // WebKit's 30-second rule: the page must complete the payment it was handed within the handler timeout;
            // else the session ends (the page gets oncancel) and the device's sheet is dismissed.
            Task {
                try? await Task.sleep(for: timeout)
                guard lock.withLock({ session.state == "authorized" }) else { return }
                trace("agent: the page did not complete its Handoff payment in time: the session ends")
                await self.endHandoff(session, "the page did not complete its payment in time")
            }
        }
        lock.withLock { session.handoffTask = task }
        return Self.json(BrowserAgentAPI.SessionState(state: "waiting"))
    }

    /// The page or the Mac's sheet ended a Handoff payment sent to a device (the page aborted, the sheet was
    /// cancelled, the page did not complete in time): the session ends, the wait for the device's result stops, and
    /// the device is told, so its sheet is dismissed and a later authorization there refused.
    func endHandoff(_ session: WebSession, _ reason: String) async {
        let ending = lock.withLock { () -> (request: (id: String, device: String), task: Task<Void, Never>?)? in
            guard ["waiting", "authorized"].contains(session.state), let request = session.handoffRequest else {
                return nil
            }
            session.state = "ended"
            session.failure = session.failure ?? reason
            return (request, session.handoffTask)
        }
        guard let handoff, let ending else { return }
        ending.task?.cancel()
        trace("agent: \(session.domain)'s Handoff payment ended (\(reason)); \(ending.request.device) is told")
        await handoff.cancel(requestID: ending.request.id, device: ending.request.device, reason: reason)
    }
}

extension AgentBodyRefusal {
    /// The agent's 400 answer.
    var response: HTTPResponse { AgentState.failure(400, code, message) }
}

/// Why a page's request cannot be the device's payment request.
struct RequestProblem: Error {
    let message: String
    init(_ message: String) { self.message = message }
}
