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
        case threeDSecure = "3DSecure"
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
        public var merchantIdentifier: String
        public var authenticationData: String
        public var transactionAmount: String
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
    public let cardholderName: String?
    public let deviceManufacturerIdentifier: String
    public let paymentDataType: PaymentDataType
    public let credential: Credential
    public let authenticationResponses: [AuthenticationResponse]?
    public let merchantTokenIdentifier: String?

    /// Parses and validates a decrypted plaintext.
    public init(plaintext: some Collection<UInt8>) throws(PaymentTokenError) {
        try self.init(json: StrictJSONParser.parse(plaintext, limits: JSONLimits(maxBytes: 32 * 1024, maxDepth: 8)))
    }

    public init(json: JSONValue) throws(PaymentTokenError) {
        guard case .object(let members) = json else {
            throw PaymentTokenError(.invalidField, "the payment data is not a JSON object")
        }
        let context = "payment data"
        try Fields.exact(
            members,
            required: [
                "applicationPrimaryAccountNumber", "applicationExpirationDate", "currencyCode", "transactionAmount",
                "paymentDataType", "paymentData",
            ],
            optional: [
                "cardholderName", "deviceManufacturerIdentifier", "authenticationResponses", "merchantTokenIdentifier",
                "merchantTokenMetadata",
            ], in: context)
        self.json = json
        let pan = try Fields.string(json, "applicationPrimaryAccountNumber", in: context)!
        guard (12...19).contains(pan.utf8.count), pan.utf8.allSatisfy(Self.isDigit) else {
            throw PaymentTokenError(.invalidField, "applicationPrimaryAccountNumber must be 12 to 19 digits")
        }
        applicationPrimaryAccountNumber = pan
        let expiry = try Fields.string(json, "applicationExpirationDate", in: context)!
        guard expiry.utf8.count == 6, expiry.utf8.allSatisfy(Self.isDigit) else {
            throw PaymentTokenError(.invalidField, "applicationExpirationDate must be YYMMDD")
        }
        applicationExpirationDate = expiry
        let currency = try Fields.string(json, "currencyCode", in: context)!
        guard currency.utf8.count == 3, currency.utf8.allSatisfy(Self.isDigit) else {
            throw PaymentTokenError(.invalidField, "currencyCode must be 3 digits (ISO 4217 numeric)")
        }
        currencyCode = currency
        guard case .number(let amountText) = json["transactionAmount"]!, let amount = Int64(amountText), amount >= 0
        else {
            throw PaymentTokenError(.invalidField, "transactionAmount must be a non-negative whole number")
        }
        transactionAmount = amount
        cardholderName = try Fields.string(json, "cardholderName", in: context, required: false)
        deviceManufacturerIdentifier =
            try Fields.string(json, "deviceManufacturerIdentifier", in: context, required: false) ?? ""
        merchantTokenIdentifier = try Fields.string(json, "merchantTokenIdentifier", in: context, required: false)
        let typeText = try Fields.string(json, "paymentDataType", in: context)!
        guard let type = PaymentDataType(rawValue: typeText) else {
            throw PaymentTokenError(.invalidField, "paymentDataType must be 3DSecure or EMV")
        }
        paymentDataType = type
        let inner = json["paymentData"]!
        guard case .object(let innerMembers) = inner else {
            throw PaymentTokenError(.invalidField, "paymentData must be an object")
        }
        switch type {
        case .threeDSecure:
            try Fields.exact(
                innerMembers, required: ["onlinePaymentCryptogram"], optional: ["eciIndicator"], in: "paymentData")
            let cryptogram = try Fields.string(inner, "onlinePaymentCryptogram", in: "paymentData")!
            guard StrictEncoding.base64Decode(cryptogram) != nil else {
                throw PaymentTokenError(.invalidField, "onlinePaymentCryptogram is not standard base64")
            }
            credential = .threeDSecure(
                onlinePaymentCryptogram: cryptogram,
                eciIndicator: try Fields.string(inner, "eciIndicator", in: "paymentData", required: false))
        case .emv:
            try Fields.exact(innerMembers, required: ["emvData"], optional: ["encryptedPINData"], in: "paymentData")
            let emv = try Fields.string(inner, "emvData", in: "paymentData")!
            guard StrictEncoding.base64Decode(emv) != nil else {
                throw PaymentTokenError(.invalidField, "emvData is not standard base64")
            }
            credential = .emv(
                emvData: emv,
                encryptedPINData: try Fields.string(inner, "encryptedPINData", in: "paymentData", required: false))
        }
        if let responses = json["authenticationResponses"] {
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

    /// An ASCII digit (checked on UTF-8 bytes: `Character.isNumber` also accepts other scripts' digits).
    private static func isDigit(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) }

    /// The plaintext as compact JSON, members in their original order.
    public var plaintextJSON: String { json.serialized }

    public var description: String {
        "DecryptedPaymentData(…\(applicationPrimaryAccountNumber.suffix(4)), \(transactionAmount) \(currencyCode), \(paymentDataType.rawValue))"
    }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
