/// An advertisement on the simulated radio medium (docs/handoff.md, "Proximity"): what a device broadcasts to the
/// devices in its room so that the devices of its account know it is near. 46 bytes:
///
/// ```
/// 4F 50                                 magic ("OP")
/// 01                                    version
/// 6 bytes rotating identifier           random, changed every rotation period and at every move
/// 12 bytes IV                           random, never repeated under one key
/// 9 bytes ciphertext ‖ 16-byte tag      AES-256-GCM under the sender's advertising key,
///                                       additional data = magic ‖ version ‖ rotating identifier
/// ```
///
/// The plaintext (``Body``) is the sender's counter (u64, big-endian: its clock in milliseconds, strictly increasing)
/// and its kind (one byte). Nothing in clear names the sender: a listener without the key sees random bytes whose
/// identifier changes. Parsing checks the structure only; a device of the account opens the body with the keys its
/// peers sent it over the relay.
public struct ProximityAdvertisement: Sendable, Hashable {
    /// Why bytes are not an advertisement.
    public struct FormatError: Error, Sendable, Hashable, CustomStringConvertible {
        public let message: String
        public var description: String { message }
    }

    /// What the sender encrypts.
    public struct Body: Sendable, Hashable {
        /// The sender's counter: its clock in milliseconds since 1970, strictly increasing per sender.
        public let counter: UInt64
        /// The sender's kind (`phone`, `ipad`, `watch`, `mac`), one byte on the air (``kinds``).
        public let kind: String

        public init(counter: UInt64, kind: String) {
            self.counter = counter
            self.kind = kind
        }

        /// The body's 9 bytes; an unknown kind is `FF`.
        public var encoded: [UInt8] {
            var bytes = (0..<8).reversed().map { UInt8(truncatingIfNeeded: counter >> (8 * UInt64($0))) }
            bytes.append(UInt8(ProximityAdvertisement.kinds.firstIndex(of: kind) ?? 0xFF))
            return bytes
        }

        /// Parses the 9 bytes of a body.
        public init(parsing bytes: [UInt8]) throws(FormatError) {
            guard bytes.count == ProximityAdvertisement.bodyByteCount else {
                throw FormatError(message: "an advertisement's body is 9 bytes")
            }
            let index = Int(bytes[8])
            guard index < ProximityAdvertisement.kinds.count else {
                throw FormatError(message: "an advertisement's body names no known kind of device")
            }
            counter = bytes.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
            kind = ProximityAdvertisement.kinds[index]
        }
    }

    public static let magic: [UInt8] = [0x4F, 0x50]
    public static let version: UInt8 = 1
    /// The device kinds by their byte on the air.
    public static let kinds = ["phone", "ipad", "watch", "mac"]
    public static let identifierByteCount = 6
    public static let ivByteCount = 12
    public static let bodyByteCount = 9
    public static let tagByteCount = 16
    /// Every advertisement's length.
    public static let byteCount = 3 + identifierByteCount + ivByteCount + bodyByteCount + tagByteCount

    /// The rotating identifier (random).
    public let identifier: [UInt8]
    public let iv: [UInt8]
    /// Ciphertext ‖ tag.
    public let sealed: [UInt8]

    /// An advertisement of these parts; nil when one has the wrong length.
    public init?(identifier: [UInt8], iv: [UInt8], sealed: [UInt8]) {
        guard identifier.count == Self.identifierByteCount, iv.count == Self.ivByteCount,
            sealed.count == Self.bodyByteCount + Self.tagByteCount
        else { return nil }
        self.identifier = identifier
        self.iv = iv
        self.sealed = sealed
    }

    /// Parses `bytes`, refusing another length, magic or version.
    public init(parsing bytes: [UInt8]) throws(FormatError) {
        guard bytes.count == Self.byteCount else {
            throw FormatError(message: "an advertisement is \(Self.byteCount) bytes")
        }
        guard Array(bytes[0..<2]) == Self.magic else { throw FormatError(message: "not an Orchard advertisement") }
        guard bytes[2] == Self.version else { throw FormatError(message: "unknown advertisement version") }
        var offset = 3
        func take(_ count: Int) -> [UInt8] {
            defer { offset += count }
            return Array(bytes[offset..<(offset + count)])
        }
        identifier = take(Self.identifierByteCount)
        iv = take(Self.ivByteCount)
        sealed = take(Self.bodyByteCount + Self.tagByteCount)
    }

    /// The additional data of the encryption: magic ‖ version ‖ rotating identifier.
    public var additionalData: [UInt8] { Self.magic + [Self.version] + identifier }

    /// The advertisement's bytes.
    public var encoded: [UInt8] { additionalData + iv + sealed }
}

/// What the devices of an account send each other over the relay for Handoff (a relay message's plaintext, JSON).
public struct HandoffMessage: Codable, Sendable, Hashable {
    /// What the message carries.
    public enum Kind: String, Codable, Sendable, Hashable {
        /// The sender's advertising key (``advertisingKey``): the recipient can now recognise its advertisements.
        case advertisingKey = "advertising-key"
        /// A Mac asks a phone or watch near it which cards it can pay with (``requestID``).
        case discoveryRequest = "discovery-request"
        /// The answer: the device's kind and its cards (``cards``), or why it does not offer them (``refusal``).
        case discoveryAnswer = "discovery-answer"
        /// A Mac asks a phone or watch to pay (``requestID``, ``card``, ``merchantSession``, ``paymentRequest``,
        /// ``domain``).
        case paymentRequest = "payment-request"
        /// The phone's or watch's answer: the authorized payment (``payment``), or why not (``refusal``).
        case paymentResult = "payment-result"
        /// The Mac's page ended the payment (``requestID``; why in ``refusal``): it aborted, the Mac's sheet was
        /// cancelled, or the page did not complete in time (WebKit's 30-second rule). The phone or watch dismisses
        /// its sheet and refuses any later authorization of that request.
        case paymentCancel = "payment-cancel"
        /// The Mac's page completed the payment (``requestID``, ``verdict``): the phone's or watch's sheet, which
        /// waited for it (a request with ``awaitsVerdict``), ends as the page said.
        case paymentComplete = "payment-complete"
    }

    public let kind: Kind
    /// For ``Kind/advertisingKey``: the sender's 32-byte AES-256-GCM advertising key.
    public let advertisingKey: [UInt8]?
    /// For discovery: the request's random ID, which the answer repeats.
    public let requestID: String?
    /// For ``Kind/discoveryAnswer``: the answering device's kind (`phone`, `watch`).
    public let deviceKind: String?
    /// For ``Kind/discoveryAnswer``: the cards offered (display data and a random identifier each; never a card
    /// number).
    public let cards: [HandoffCard]?
    /// For ``Kind/discoveryAnswer`` and ``Kind/paymentResult``: why no card is offered or no payment made
    /// (payments on a Mac turned off, the Mac not heard, the user cancelled).
    public let refusal: String?
    /// For ``Kind/paymentRequest``: the identifier of the card chosen, from the device's discovery answer.
    public let card: String?
    /// For ``Kind/paymentRequest``: the merchant session the page received, as its JSON (the phone or watch
    /// verifies it itself).
    public let merchantSession: [UInt8]?
    /// For ``Kind/paymentRequest``: the payment request, as the device control API's JSON
    /// (`PaymentSheetRequestBody`).
    public let paymentRequest: [UInt8]?
    /// For ``Kind/paymentRequest``: the top-level page's host.
    public let domain: String?
    /// For ``Kind/paymentResult``: the authorized payment, as the device control API's JSON (`PaymentSheetPayment`:
    /// the token encrypted to the merchant, the contacts).
    public let payment: [UInt8]?
    /// For ``Kind/paymentRequest``: true when the Mac's page gives its verdict (``Kind/paymentComplete``) after the
    /// payment: the phone's or watch's sheet stays up until then (absent: it completes at authorization).
    public var awaitsVerdict: Bool?
    /// For ``Kind/paymentComplete``: `success` or `failure`, the page's `completePayment`.
    public var verdict: String?

    public init(
        kind: Kind, advertisingKey: [UInt8]? = nil, requestID: String? = nil, deviceKind: String? = nil,
        cards: [HandoffCard]? = nil, refusal: String? = nil, card: String? = nil, merchantSession: [UInt8]? = nil,
        paymentRequest: [UInt8]? = nil, domain: String? = nil, payment: [UInt8]? = nil
    ) {
        self.kind = kind
        self.advertisingKey = advertisingKey
        self.requestID = requestID
        self.deviceKind = deviceKind
        self.cards = cards
        self.refusal = refusal
        self.card = card
        self.merchantSession = merchantSession
        self.paymentRequest = paymentRequest
        self.domain = domain
        self.payment = payment
    }
}

/// A card a phone or watch offers a Mac (discovery): what a payment sheet shows, and an identifier the device drew at
/// random for this discovery (not derived from any card number) by which the Mac names the card it chooses.
public struct HandoffCard: Codable, Sendable, Hashable {
    /// Random, 32 hexadecimal digits.
    public let identifier: String
    public let network: String
    /// `credit`, `debit` or `prepaid`.
    public let type: String
    public let displayName: String
    /// The card number's last four digits, as the wallet shows them.
    public let suffix: String

    public init(identifier: String, network: String, type: String, displayName: String, suffix: String) {
        self.identifier = identifier
        self.network = network
        self.type = type
        self.displayName = displayName
        self.suffix = suffix
    }
}
