public import AccessPolicy
public import DeviceControlAPI
import Foundation

/// The boundary between the browser agent's invisible frame (and its payment sheet page), which run in the
/// browser at `https://agent.orchard.test`, and the agent's server in `orchard device run` (docs/web.md, "The
/// browser agent").
///
/// The server writes the pages (`web/agent/`), whose scripts read and write these routes and bodies; the contract
/// test binds the scripts' paths and member names to this module. Every `/v1` route answers only a request of
/// the agent's own documents: `Sec-Fetch-Site: same-origin` and the page's secret in ``secretHeader``. No document
/// carries a secret: each page load asks for its own with ``Route/secret``, a `POST` that only a script of the
/// agent's origin can send (the browser's `Origin` and fetch metadata, a JSON body no form can post), and keeps it
/// in memory. Refusals are `{"error": {"code", "message"}}`.
public enum BrowserAgentAPI {
    /// The agent's host name; browsers map it to the device's agent port (`orchard browser setup`).
    public static let host = "agent.orchard.test"
    /// The agent's origin, which `orchard-pay.js` frames and posts messages to.
    public static let origin = "https://" + host
    /// The header carrying the page's secret.
    public static let secretHeader = "X-Orchard-Agent-Secret"
    /// The validation URL the agent hands the page's `onvalidatemerchant` (the sandbox's Apple gateway).
    public static let validationURL = "https://apple-pay-gateway.orchard.test/paymentservices/paymentSession"
    /// The highest `ApplePaySession` version `orchard-pay.js` supports.
    public static let latestVersion = 14

    /// The documents the agent serves (no secret needed to load them, and none in them).
    public enum Page {
        /// The invisible frame `orchard-pay.js` inserts (framable by https pages only).
        public static let frame = "/frame"
        /// The payment sheet on the device's screen (`frame-ancestors 'none'`).
        public static let sheet = "/sheet"
        /// The device's screen beside the sheet: lost mode, wallet cards and their states, recent payments, prompts
        /// (`frame-ancestors 'none'`, read-only).
        public static let screen = "/screen"
        /// Scripts and styles of the pages: `/assets/<name>`.
        public static let assets = "/assets/:name"
    }

    /// The routes of the frame and of the sheet page.
    public enum Route {
        /// `POST` ``SecretRequest`` → ``PageSecret``: a page load's secret, for a `fetch` of the agent's own
        /// document (`Origin` the agent's, `Sec-Fetch-Site: same-origin`, `Sec-Fetch-Dest: empty`, a JSON body).
        public static let secret = "/v1/secret"
        /// `POST {}` with the page's secret → `{}`: the page load ended (`pagehide`); the secret is refused from then
        /// on.
        public static let endSecret = "/v1/secret/end"
        /// `POST` ``PageContext`` → ``Hello``: the frame's first call, with what it read of its parents.
        public static let hello = "/v1/frame/hello"
        /// `POST` ``BeginSession`` → ``SessionBegun`` (201): `begin()`.
        public static let sessions = "/v1/frame/sessions"
        /// `POST` the merchant session JSON object, unchanged → ``SessionState``: `completeMerchantValidation`.
        public static let merchantSession = "/v1/frame/sessions/:session/merchant-session"
        /// `GET ?wait=SECONDS` → DeviceControlAPI's `PaymentSheetAppEvent` (the next event for the page).
        public static let events = "/v1/frame/sessions/:session/events"
        /// `POST` DeviceControlAPI's `AnswerPaymentSheetEvent.Body` → ``SessionState``: a completion.
        public static let answer = "/v1/frame/sessions/:session/answer"
        /// `POST {}` → ``SessionState``: `abort()`.
        public static let abort = "/v1/frame/sessions/:session/abort"
        /// `POST` ``ActiveCardQuery`` → ``ActiveCardAnswer``: `canMakePaymentsWithActiveCard`.
        public static let activeCard = "/v1/frame/active-card"
        /// `GET` → ``SheetScreen``: what the device's screen shows.
        public static let screen = "/v1/sheet/current"
        /// `POST /v1/sheet/current/<action>` with the device control API's action bodies (`card`,
        /// `shipping-contact`, `billing-contact`, `shipping-method`, `authenticate`, `cancel`), and on a Mac that pays
        /// with a nearby device, `handoff` with a ``HandoffChoice`` (`cancel` ends its choice too).
        public static let screenAction = "/v1/sheet/current/:action"

        /// `GET` → ``DeviceScreen``: the device's screen page's content (a screen page's secret).
        public static let deviceScreen = "/v1/screen"

        /// A session's path for a route pattern with `:session`.
        public static func path(_ pattern: String, session: String) -> String {
            pattern.replacingOccurrences(of: ":session", with: session)
        }
    }

    /// The routes with their policy: `anyone` at the router (no client certificates in a browser); the agent's
    /// server checks `Sec-Fetch-Site` and the secret before any handler runs.
    public enum Declared {
        public static let secret = DeclaredRoute("POST", Route.secret, .anyone)
        public static let endSecret = DeclaredRoute("POST", Route.endSecret, .anyone)
        public static let hello = DeclaredRoute("POST", Route.hello, .anyone)
        public static let sessions = DeclaredRoute("POST", Route.sessions, .anyone)
        public static let merchantSession = DeclaredRoute("POST", Route.merchantSession, .anyone)
        public static let events = DeclaredRoute("GET", Route.events, .anyone)
        public static let answer = DeclaredRoute("POST", Route.answer, .anyone)
        public static let abort = DeclaredRoute("POST", Route.abort, .anyone)
        public static let activeCard = DeclaredRoute("POST", Route.activeCard, .anyone)
        public static let screen = DeclaredRoute("GET", Route.screen, .anyone)
        public static let screenAction = DeclaredRoute("POST", Route.screenAction, .anyone)
        public static let deviceScreen = DeclaredRoute("GET", Route.deviceScreen, .anyone)
        /// The frame's routes (a frame's secret).
        public static let frame = [hello, sessions, merchantSession, events, answer, abort, activeCard]
        /// The sheet page's routes (a sheet's secret).
        public static let sheet = [screen, screenAction]
        /// The device screen page's routes (a screen page's secret).
        public static let screenPage = [deviceScreen]
    }

    /// The agent's documents that call its routes, each with secrets of its own kind.
    public enum Document: String, Codable, Sendable, Hashable, CaseIterable {
        /// ``Page/frame``: the frame's routes.
        case frame
        /// ``Page/sheet``: the sheet page's routes.
        case sheet
        /// ``Page/screen``: the device screen page's route.
        case screen
    }

    /// `{"document": "frame" | "sheet" | "screen"}`: which document's secret a page load asks for.
    public struct SecretRequest: Codable, Sendable, Hashable {
        public let document: Document

        public init(document: Document) { self.document = document }
    }

    /// `{"secret"}`: the page load's secret, for ``secretHeader``; it ends with the page load (``Route/endSecret``),
    /// the agent's process or a working day, whichever comes first.
    public struct PageSecret: Codable, Sendable, Hashable {
        public let secret: String

        public init(secret: String) { self.secret = secret }
    }

    /// What the frame read of the page that embeds it, from the browser (not from the page).
    public struct PageContext: Codable, Sendable, Hashable {
        /// `location.ancestorOrigins`, nearest first: the embedding page's origin, then its parents'.
        public let ancestorOrigins: [String]
        /// The frame's `isSecureContext` (false when any ancestor is not secure).
        public let secureContext: Bool
        /// Whether the `payment` permission policy allows the frame (false for a third-party frame without
        /// `allow="payment"` above it).
        public let paymentAllowed: Bool

        public init(ancestorOrigins: [String], secureContext: Bool, paymentAllowed: Bool) {
            self.ancestorOrigins = ancestorOrigins
            self.secureContext = secureContext
            self.paymentAllowed = paymentAllowed
        }
    }

    /// A refusal the page's script throws as a `DOMException` (WebKit's names and messages).
    public struct Refusal: Codable, Sendable, Hashable {
        /// `InvalidAccessError` or `SecurityError`.
        public let name: String
        public let message: String

        public init(name: String, message: String) {
            self.name = name
            self.message = message
        }
    }

    /// The answer of ``Route/hello``.
    public struct Hello: Codable, Sendable, Hashable {
        /// The device's capability (`canMakePayments()`), false when refused.
        public let canMakePayments: Bool
        /// Why this page may not use Apple Pay at all (insecure, third-party frame), or nil.
        public let refusal: Refusal?

        public init(canMakePayments: Bool, refusal: Refusal?) {
            self.canMakePayments = canMakePayments
            self.refusal = refusal
        }
    }

    /// A line item or total of Apple Pay JS (`ApplePayLineItem`).
    public struct LineItem: Codable, Sendable, Hashable {
        public let label: String
        /// A decimal string (absent for a `pending` item).
        public let amount: String?
        /// `final` (default) or `pending`.
        public let type: String?
        /// Version 14: `immediate` (default), `recurring`, `deferred` or `automaticReload`.
        public var paymentTiming: String?
        /// A recurring item's first and last billing (ISO 8601), its unit (`year`, `month`, `day`, `hour`,
        /// `minute`) and how many units between billings.
        public var recurringPaymentStartDate: String?
        public var recurringPaymentEndDate: String?
        public var recurringPaymentIntervalUnit: String?
        public var recurringPaymentIntervalCount: Int?
        /// A deferred item's billing date (ISO 8601).
        public var deferredPaymentDate: String?
        /// An automatic reload item's threshold: the balance below which it is charged.
        public var automaticReloadPaymentThresholdAmount: String?

        public init(label: String, amount: String?, type: String? = nil) {
            self.label = label
            self.amount = amount
            self.type = type
        }
    }

    /// The one version 14 payment type of a request (`orchard-pay.js` folds `recurringPaymentRequest`,
    /// `automaticReloadPaymentRequest`, `deferredPaymentRequest` and `multiTokenContexts` into this).
    public struct PaymentType: Codable, Sendable, Hashable {
        /// A merchant of a multi-token request (`ApplePayPaymentTokenContext`).
        public struct TokenContext: Codable, Sendable, Hashable {
            public let merchantIdentifier: String
            public let externalIdentifier: String
            public let merchantName: String
            public let merchantDomain: String?
            public let amount: String

            public init(
                merchantIdentifier: String, externalIdentifier: String, merchantName: String, merchantDomain: String?,
                amount: String
            ) {
                self.merchantIdentifier = merchantIdentifier
                self.externalIdentifier = externalIdentifier
                self.merchantName = merchantName
                self.merchantDomain = merchantDomain
                self.amount = amount
            }
        }

        /// `recurring`, `automaticReload`, `deferred` or `multiToken`.
        public let kind: String
        public var paymentDescription: String?
        /// `regularBilling`, `automaticReloadBilling` or `deferredBilling`.
        public var billing: LineItem?
        public var trialBilling: LineItem?
        public var billingAgreement: String?
        public var managementURL: String?
        public var tokenNotificationURL: String?
        public var freeCancellationDate: String?
        public var contexts: [TokenContext]?

        public init(kind: String) { self.kind = kind }
    }

    /// A shipping method of Apple Pay JS (`ApplePayShippingMethod`).
    public struct ShippingMethod: Codable, Sendable, Hashable {
        public let label: String
        public let detail: String?
        public let amount: String
        public let identifier: String

        public init(label: String, detail: String?, amount: String, identifier: String) {
            self.label = label
            self.detail = detail
            self.amount = amount
            self.identifier = identifier
        }
    }

    /// The members of `ApplePayPaymentRequest` the agent uses (`orchard-pay.js` validated the request first).
    public struct PaymentRequest: Codable, Sendable, Hashable {
        public let countryCode: String
        public let currencyCode: String
        public let supportedNetworks: [String]
        public let merchantCapabilities: [String]
        public let total: LineItem
        public let lineItems: [LineItem]?
        public let requiredShippingContactFields: [String]?
        public let requiredBillingContactFields: [String]?
        public let shippingMethods: [ShippingMethod]?
        /// Base64, as in Apple Pay JS.
        public let applicationData: String?
        /// Version 12: the sheet offers a coupon code field, starting with ``couponCode``.
        public var supportsCouponCode: Bool?
        public var couponCode: String?
        /// Version 14: a recurring, automatic reload, deferred or multi-token payment.
        public var paymentType: PaymentType?

        public init(
            countryCode: String, currencyCode: String, supportedNetworks: [String], merchantCapabilities: [String],
            total: LineItem, lineItems: [LineItem]? = nil, requiredShippingContactFields: [String]? = nil,
            requiredBillingContactFields: [String]? = nil, shippingMethods: [ShippingMethod]? = nil,
            applicationData: String? = nil
        ) {
            self.countryCode = countryCode
            self.currencyCode = currencyCode
            self.supportedNetworks = supportedNetworks
            self.merchantCapabilities = merchantCapabilities
            self.total = total
            self.lineItems = lineItems
            self.requiredShippingContactFields = requiredShippingContactFields
            self.requiredBillingContactFields = requiredBillingContactFields
            self.shippingMethods = shippingMethods
            self.applicationData = applicationData
        }
    }

    /// The body of ``Route/sessions``.
    public struct BeginSession: Codable, Sendable, Hashable {
        public let version: Int
        public let page: PageContext
        public let request: PaymentRequest

        public init(version: Int, page: PageContext, request: PaymentRequest) {
            self.version = version
            self.page = page
            self.request = request
        }
    }

    /// The answer of ``Route/sessions``: the session and the URL for `onvalidatemerchant`.
    public struct SessionBegun: Codable, Sendable, Hashable {
        public let session: String
        public let validationURL: String

        public init(session: String, validationURL: String) {
            self.session = session
            self.validationURL = validationURL
        }
    }

    /// A session's state after a call.
    public struct SessionState: Codable, Sendable, Hashable {
        /// `validating` (waits for the merchant session), `presented`, `ended`.
        public let state: String

        public init(state: String) { self.state = state }
    }

    /// The body of ``Route/activeCard``.
    public struct ActiveCardQuery: Codable, Sendable, Hashable {
        public let merchantIdentifier: String
        public let page: PageContext

        public init(merchantIdentifier: String, page: PageContext) {
            self.merchantIdentifier = merchantIdentifier
            self.page = page
        }
    }

    /// The answer of ``Route/activeCard``.
    public struct ActiveCardAnswer: Codable, Sendable, Hashable {
        public let canMakePayments: Bool
        /// `applePayCapabilities`' answer, without its prefix: `available`, `unavailable`, or `unknown` when the
        /// device's website queries are off (the wallet discloses nothing), `unsupported` when the device cannot pay
        /// or the page may not ask.
        public let credentialStatus: String?

        public init(canMakePayments: Bool, credentialStatus: String? = nil) {
            self.canMakePayments = canMakePayments
            self.credentialStatus = credentialStatus
        }
    }

    /// What the device's screen shows (``Route/screen``): nothing, a page waiting for its merchant's validation,
    /// or the sheet (DeviceControlAPI's `PaymentSheetStatusAnswer` as JSON in ``sheet``).
    public struct SheetScreen: Codable, Sendable, Hashable {
        /// `idle`, `validating`, `presented`, `ended`; on a Mac that pays with a nearby phone or watch (Handoff):
        /// `choosing` (``handoff`` lists them), `waiting` (the chosen device's user authorizes there), `completed`.
        public let state: String
        /// The top-level page's host.
        public let domain: String?
        /// The merchant's display name from its verified session.
        public let merchantName: String?
        /// Why the last session ended without a sheet (a refused merchant session), for the user.
        public let failure: String?
        /// The sheet: merchant, items, cards (network, type, suffix), contacts, shipping, what it needs.
        public let sheet: PaymentSheetView?
        /// Handoff: the phones and watches near the Mac that offer a card for this payment, as the sheet lists them.
        public let handoff: [HandoffChoice]?

        public init(
            state: String, domain: String?, merchantName: String?, failure: String?, sheet: PaymentSheetView?,
            handoff: [HandoffChoice]? = nil
        ) {
            self.state = state
            self.domain = domain
            self.merchantName = merchantName
            self.failure = failure
            self.sheet = sheet
            self.handoff = handoff
        }
    }

    /// A phone's or watch's card the Mac's sheet offers (Handoff, docs/handoff.md); posted back as the body of
    /// ``Route/screenAction`` `handoff` when the user chooses it.
    public struct HandoffChoice: Codable, Sendable, Hashable {
        /// The device's name.
        public let device: String
        /// "Pay with iPhone" or "Confirm with Apple Watch".
        public let label: String
        /// The random identifier the device gave the card for this Mac.
        public let card: String
        /// The card as the device's wallet shows it: display name, network, type and last four digits.
        public let cardDescription: String

        public init(device: String, label: String, card: String, cardDescription: String) {
            self.device = device
            self.label = label
            self.card = card
            self.cardDescription = cardDescription
        }
    }

    /// What the device's screen page shows (``Route/deviceScreen``): display data only, never a card number or
    /// device account number.
    public struct DeviceScreen: Codable, Sendable, Hashable {
        /// A wallet card as the wallet shows it.
        public struct Card: Codable, Sendable, Hashable {
            public let displayName: String
            /// `visa`, `masterCard`, `amex`, `discover`.
            public let network: String
            /// `credit`, `debit` or `prepaid`.
            public let type: String
            /// The last four digits of the card number.
            public let suffix: String
            /// `active`, `suspended` (the issuer, the token service or lost mode) or `terminated`.
            public let state: String
            /// Whether it is the wallet's default card.
            public let isDefault: Bool

            public init(
                displayName: String, network: String, type: String, suffix: String, state: String, isDefault: Bool
            ) {
                self.displayName = displayName
                self.network = network
                self.type = type
                self.suffix = suffix
                self.state = state
                self.isDefault = isDefault
            }
        }

        /// A payment sheet that ended since the device process started (newest first).
        public struct Payment: Codable, Sendable, Hashable {
            /// The merchant's display name (its identifier when the sheet had none).
            public let merchant: String
            /// The total as a decimal string, and its currency.
            public let amount: String
            public let currency: String
            /// `completed`, `cancelled` or `failed`; with ``detail``: the app's verdict, `timedOut` or the failure.
            public let outcome: String
            public let detail: String?
            /// When it ended (ISO 8601).
            public let endedAt: String

            public init(
                merchant: String, amount: String, currency: String, outcome: String, detail: String?, endedAt: String
            ) {
                self.merchant = merchant
                self.amount = amount
                self.currency = currency
                self.outcome = outcome
                self.detail = detail
                self.endedAt = endedAt
            }
        }

        /// Something waiting for the user: a payment sheet (shown at ``Page/sheet``).
        public struct Prompt: Codable, Sendable, Hashable {
            /// `paymentSheet`.
            public let kind: String
            public let merchant: String?
            /// The path of the page where the user answers it.
            public let page: String

            public init(kind: String, merchant: String?, page: String) {
                self.kind = kind
                self.merchant = merchant
                self.page = page
            }
        }

        /// The device's name and kind (`phone`, `watch`, `mac`, `ipad`).
        public let device: String
        public let kind: String
        /// Whether the account owner put the device in lost mode (Find My), as the Pay server last told the device:
        /// its cards are suspended and it starts no payment sheet until the owner leaves lost mode.
        public let lostMode: Bool
        public let cards: [Card]
        public let recentPayments: [Payment]
        public let prompts: [Prompt]

        public init(
            device: String, kind: String, lostMode: Bool, cards: [Card], recentPayments: [Payment], prompts: [Prompt]
        ) {
            self.device = device
            self.kind = kind
            self.lostMode = lostMode
            self.cards = cards
            self.recentPayments = recentPayments
            self.prompts = prompts
        }
    }
}
