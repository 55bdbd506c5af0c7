import Foundation

/// The decrypted payment data (Apple's "payment data keys"), with the exact plaintext object kept.
///
/// Holds a device account number and a cryptogram: `description`, `debugDescription` and the mirror show
/// only the last four digits, the amount and the currency.
public struct DecryptedPaymentData: Sendable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// `paymentDataType`.
    public enum PaymentDataType: String, Sendable {
        /// `"3DSecure"`: the credential is an online payment cryptogram (in-app and web payments).
        case threeDSecure = "3DSecure"
        /// `"EMV"`: the credential is EMV data.
        case emv = "EMV"
    }

    /// The inner `paymentData`.
    public enum Credential: Sendable, Equatable {
        /// 3-D Secure: the online payment cryptogram (base64) and the optional ECI.
        case threeDSecure(onlinePaymentCryptogram: String, eciIndicator: String?)
        /// EMV: the EMV data (base64) and, for RSA_v1, encrypted PIN data (hex).
        case emv(emvData: String, encryptedPINData: String?)
    }

    /// One entry of `authenticationResponses` (multi-token requests).
    public struct AuthenticationResponse: Sendable, Equatable {
        /// The merchant identifier this response is for.
        public var merchantIdentifier: String
        /// The authentication data (base64) for that merchant.
        public var authenticationData: String
        /// The amount for that merchant, as Apple wrote it.
        public var transactionAmount: String
    }

    /// `merchantTokenMetadata` (Apple's `MerchantTokenMetadata`): the card art and card data of a merchant token,
    /// for the merchant to show the user which card pays. Display data only: never a card number.
    public struct MerchantTokenMetadata: Sendable, Equatable {
        /// One entry of `cardArt` (Apple's `CardArt`): art to represent the card.
        public struct CardArt: Sendable, Equatable {
            /// A name for the bank and card the art shows.
            public var name: String
            /// The card type.
            public var type: String
            /// Where to download the art, as the issuer provides it.
            public var url: String

            /// An entry with its three members.
            public init(name: String, type: String, url: String) {
                self.name = name
                self.type = type
                self.url = url
            }
        }

        /// `cardMetadata` (Apple's `CardMetadata`): each member optional, as Apple documents them.
        public struct CardMetadata: Sendable, Equatable {
            /// The card's country, ISO 3166 alpha-2.
            public var cardCountry: String?
            /// The card's expiration date.
            public var expirationDate: String?
            /// The last four digits of the card's number (the funding card, not the token).
            public var fpanSuffix: String?
            /// The long description of the card.
            public var longDescription: String?
            /// The short description of the card.
            public var shortDescription: String?

            /// Card data with the members given (absent ones nil).
            public init(
                cardCountry: String? = nil, expirationDate: String? = nil, fpanSuffix: String? = nil,
                longDescription: String? = nil, shortDescription: String? = nil
            ) {
                self.cardCountry = cardCountry
                self.expirationDate = expirationDate
                self.fpanSuffix = fpanSuffix
                self.longDescription = longDescription
                self.shortDescription = shortDescription
            }
        }

        /// `cardArt`: the art for the card (empty when the payment data has none).
        public var cardArt: [CardArt]
        /// `cardMetadata`, when the payment data has it.
        public var cardMetadata: CardMetadata?

        /// Metadata with its card art and card data.
        public init(cardArt: [CardArt] = [], cardMetadata: CardMetadata? = nil) {
            self.cardArt = cardArt
            self.cardMetadata = cardMetadata
        }
    }

    /// The plaintext object exactly as decrypted (key order, number text and all).
    public let json: JSONValue
    /// The device account number (DPAN).
    public let applicationPrimaryAccountNumber: String
    /// YYMMDD.
    public let applicationExpirationDate: String
    /// ISO 4217 numeric, e.g. "840".
    public let currencyCode: String
    /// In minor units, as Apple writes it (a JSON number).
    public let transactionAmount: Int64
    /// The cardholder's name, when the payment data has one.
    public let cardholderName: String?
    /// Identifies the device that made the payment (hex).
    public let deviceManufacturerIdentifier: String
    /// Which kind of credential `credential` is.
    public let paymentDataType: PaymentDataType
    /// The cryptogram to send to the processor; its case always matches `paymentDataType`.
    public let credential: Credential
    /// The per-merchant responses of a multi-token request, when present.
    public let authenticationResponses: [AuthenticationResponse]?
    /// The merchant token's identifier, for merchant tokens (recurring, automatic reload and deferred payments):
    /// the same for one merchant and one of the user's cards every time, another for another merchant.
    public let merchantTokenIdentifier: String?
    /// The merchant token's card art and card data, for merchant tokens.
    public let merchantTokenMetadata: MerchantTokenMetadata?

    /// Parses and validates a decrypted plaintext.
    public init(plaintext: some Collection<UInt8>) throws(PaymentTokenError) {
        try self.init(plaintext: Array(plaintext))
    }

    /// ``init(plaintext:)`` for a byte array (what decryption produces), with a concrete body.
    public init(plaintext: [UInt8]) throws(PaymentTokenError) {
        try self.init(json: StrictJSONParser.parse(plaintext, limits: JSONLimits(maxBytes: 32 * 1024, maxDepth: 8)))
    }

    /// Validates an already parsed object: every required key with the documented type, no unknown key; keeps `json` as
    /// given.
    public init(json: JSONValue) throws(PaymentTokenError) {
        guard case .object(let members) = json else {
            throw PaymentTokenError(.invalidField, "the payment data is not a JSON object")
        }
        let context = "payment data"
        // One pass over the members: each key is compared once, where a lookup per field would scan the
        // members again for every field of every token.
        var pan: JSONValue?
        var expiry: JSONValue?
        var currency: JSONValue?
        var amount: JSONValue?
        var type: JSONValue?
        var inner: JSONValue?
        var name: JSONValue?
        var manufacturer: JSONValue?
        var responses: JSONValue?
        var merchantToken: JSONValue?
        var merchantTokenMetadata: JSONValue?
        // A hand-built value can repeat a key (the parser refuses that): refused here too, not last-wins.
        func assign(_ slot: inout JSONValue?, _ value: JSONValue, _ key: String) throws(PaymentTokenError) {
            guard slot == nil else { throw PaymentTokenError(.duplicateKey, "\(context) repeats \"\(key)\"") }
            slot = value
        }
        for (key, value) in members {
            switch Self.memberIndex(key) {
            case 0: try assign(&pan, value, key)
            case 1: try assign(&expiry, value, key)
            case 2: try assign(&currency, value, key)
            case 3: try assign(&amount, value, key)
            case 4: try assign(&type, value, key)
            case 5: try assign(&inner, value, key)
            case 6: try assign(&name, value, key)
            case 7: try assign(&manufacturer, value, key)
            case 8: try assign(&responses, value, key)
            case 9: try assign(&merchantToken, value, key)
            case 10: try assign(&merchantTokenMetadata, value, key)
            default: throw PaymentTokenError(.unknownField, "unknown key \"\(key.prefix(40))\" in \(context)")
            }
        }
        // Missing keys are reported in alphabetical order.
        guard let expiry else { throw Self.missing("applicationExpirationDate") }
        guard let pan else { throw Self.missing("applicationPrimaryAccountNumber") }
        guard let currency else { throw Self.missing("currencyCode") }
        guard let inner else { throw Self.missing("paymentData") }
        guard let type else { throw Self.missing("paymentDataType") }
        guard let amount else { throw Self.missing("transactionAmount") }
        self.json = json
        let panText = try Fields.memberString(pan, "applicationPrimaryAccountNumber", in: context)
        guard (12...19).contains(panText.utf8.count), Self.isDigits(panText) else {
            throw PaymentTokenError(.invalidField, "applicationPrimaryAccountNumber must be 12 to 19 digits")
        }
        applicationPrimaryAccountNumber = panText
        let expiryText = try Fields.memberString(expiry, "applicationExpirationDate", in: context)
        guard expiryText.utf8.count == 6, Self.isDigits(expiryText) else {
            throw PaymentTokenError(.invalidField, "applicationExpirationDate must be YYMMDD")
        }
        applicationExpirationDate = expiryText
        let currencyText = try Fields.memberString(currency, "currencyCode", in: context)
        guard currencyText.utf8.count == 3, Self.isDigits(currencyText) else {
            throw PaymentTokenError(.invalidField, "currencyCode must be 3 digits (ISO 4217 numeric)")
        }
        currencyCode = currencyText
        guard case .number(let amountText) = amount, let value = Int64(amountText), value >= 0 else {
            throw PaymentTokenError(.invalidField, "transactionAmount must be a non-negative whole number")
        }
        transactionAmount = value
        cardholderName = try name.map { (v) throws(PaymentTokenError) in
            try Fields.memberString(v, "cardholderName", in: context)
        }
        deviceManufacturerIdentifier =
            try manufacturer.map { (v) throws(PaymentTokenError) in
                try Fields.memberString(v, "deviceManufacturerIdentifier", in: context)
            } ?? ""
        merchantTokenIdentifier = try merchantToken.map { (v) throws(PaymentTokenError) in
            try Fields.memberString(v, "merchantTokenIdentifier", in: context)
        }
        self.merchantTokenMetadata = try merchantTokenMetadata.map { (v) throws(PaymentTokenError) in
            try Self.merchantTokenMetadata(v)
        }
        guard
            let paymentDataType = PaymentDataType(
                rawValue: try Fields.memberString(type, "paymentDataType", in: context))
        else {
            throw PaymentTokenError(.invalidField, "paymentDataType must be 3DSecure or EMV")
        }
        self.paymentDataType = paymentDataType
        guard case .object(let innerMembers) = inner else {
            throw PaymentTokenError(.invalidField, "paymentData must be an object")
        }
        credential = try Self.credential(innerMembers, type: paymentDataType)
        if let responses {
            guard case .array(let items) = responses else {
                throw PaymentTokenError(.invalidField, "authenticationResponses must be an array")
            }
            var parsed: [AuthenticationResponse] = []
            for item in items {
                guard case .object(let m) = item else {
                    throw PaymentTokenError(.invalidField, "authenticationResponses holds a non-object")
                }
                try Fields.exact(
                    m, required: ["merchantIdentifier", "authenticationData", "transactionAmount"], optional: [],
                    in: "authenticationResponses")
                parsed.append(
                    AuthenticationResponse(
                        merchantIdentifier: try Fields.string(
                            item, "merchantIdentifier", in: "authenticationResponses")!,
                        authenticationData: try Fields.string(
                            item, "authenticationData", in: "authenticationResponses")!,
                        transactionAmount: try Fields.string(item, "transactionAmount", in: "authenticationResponses")!)
                )
            }
            authenticationResponses = parsed
        } else {
            authenticationResponses = nil
        }
    }

    /// `merchantTokenMetadata`: Apple's members exactly (each optional), every value of its documented type.
    private static func merchantTokenMetadata(_ value: JSONValue) throws(PaymentTokenError) -> MerchantTokenMetadata {
        let context = "merchantTokenMetadata"
        guard case .object(let members) = value else {
            throw PaymentTokenError(.invalidField, "\(context) must be an object")
        }
        try Fields.exact(members, required: [], optional: ["cardArt", "cardMetadata"], in: context)
        var art: [MerchantTokenMetadata.CardArt] = []
        if let items = value["cardArt"] {
            guard case .array(let entries) = items else {
                throw PaymentTokenError(.invalidField, "\(context).cardArt must be an array")
            }
            for entry in entries {
                guard case .object(let fields) = entry else {
                    throw PaymentTokenError(.invalidField, "\(context).cardArt holds a non-object")
                }
                try Fields.exact(fields, required: ["name", "type", "url"], optional: [], in: "cardArt")
                art.append(
                    MerchantTokenMetadata.CardArt(
                        name: try Fields.string(entry, "name", in: "cardArt")!,
                        type: try Fields.string(entry, "type", in: "cardArt")!,
                        url: try Fields.string(entry, "url", in: "cardArt")!))
            }
        }
        var card: MerchantTokenMetadata.CardMetadata?
        if let metadata = value["cardMetadata"] {
            guard case .object(let fields) = metadata else {
                throw PaymentTokenError(.invalidField, "\(context).cardMetadata must be an object")
            }
            try Fields.exact(
                fields, required: [],
                optional: ["cardCountry", "expirationDate", "fpanSuffix", "longDescription", "shortDescription"],
                in: "cardMetadata")
            func field(_ key: String) throws(PaymentTokenError) -> String? {
                try Fields.string(metadata, key, in: "cardMetadata", required: false)
            }
            card = MerchantTokenMetadata.CardMetadata(
                cardCountry: try field("cardCountry"), expirationDate: try field("expirationDate"),
                fpanSuffix: try field("fpanSuffix"), longDescription: try field("longDescription"),
                shortDescription: try field("shortDescription"))
        }
        return MerchantTokenMetadata(cardArt: art, cardMetadata: card)
    }

    /// The inner `paymentData` of a 3-D Secure or EMV token: its keys exactly, its base64 checked.
    private static func credential(
        _ members: [(String, JSONValue)], type: PaymentDataType
    ) throws(PaymentTokenError) -> Credential {
        let (requiredKey, optionalKey) =
            switch type {
            case .threeDSecure: ("onlinePaymentCryptogram", "eciIndicator")
            case .emv: ("emvData", "encryptedPINData")
            }
        var required: JSONValue?
        var optional: JSONValue?
        for (key, value) in members {
            if key == requiredKey, required == nil {
                required = value
            } else if key == optionalKey, optional == nil {
                optional = value
            } else if key == requiredKey || key == optionalKey {
                throw PaymentTokenError(.duplicateKey, "paymentData repeats \"\(key)\"")
            } else {
                throw PaymentTokenError(.unknownField, "unknown key \"\(key.prefix(40))\" in paymentData")
            }
        }
        guard let required else { throw PaymentTokenError(.missingField, "paymentData lacks \"\(requiredKey)\"") }
        let base64 = try Fields.memberString(required, requiredKey, in: "paymentData")
        guard StrictEncoding.base64Decode(base64) != nil else {
            throw PaymentTokenError(.invalidField, "\(requiredKey) is not standard base64")
        }
        let other = try optional.map { (v) throws(PaymentTokenError) in
            try Fields.memberString(v, optionalKey, in: "paymentData")
        }
        switch type {
        case .threeDSecure: return .threeDSecure(onlinePaymentCryptogram: base64, eciIndicator: other)
        case .emv: return .emv(emvData: base64, encryptedPINData: other)
        }
    }

    /// Apple's payment data keys, in the order `init(json:)` numbers them.
    private static let memberKeys = [
        "applicationPrimaryAccountNumber", "applicationExpirationDate", "currencyCode", "transactionAmount",
        "paymentDataType", "paymentData", "cardholderName", "deviceManufacturerIdentifier", "authenticationResponses",
        "merchantTokenIdentifier", "merchantTokenMetadata",
    ]

    /// The key's index in ``memberKeys``. Lengths are compared first (O(1) for native strings): they tell
    /// almost all of Apple's keys apart, so each member costs about one string comparison.
    private static func memberIndex(_ key: String) -> Int? {
        let length = key.utf8.count
        return memberKeys.firstIndex { $0.utf8.count == length && $0 == key }
    }

    private static func missing(_ key: String) -> PaymentTokenError {
        PaymentTokenError(.missingField, "payment data lacks \"\(key)\"")
    }

    /// ASCII digits only (checked on UTF-8 bytes: `Character.isNumber` also accepts other scripts' digits),
    /// read in place for native strings.
    private static func isDigits(_ text: String) -> Bool {
        func isDigit(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) }
        return text.utf8.withContiguousStorageIfAvailable { $0.allSatisfy(isDigit) } ?? text.utf8.allSatisfy(isDigit)
    }

    /// The plaintext as compact JSON, members in their original order.
    public var plaintextJSON: String { json.serialized }

    public var description: String {
        "DecryptedPaymentData(…\(applicationPrimaryAccountNumber.suffix(4)), \(transactionAmount) \(currencyCode), \(paymentDataType.rawValue))"
    }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
