/// Why the device's exchange with the Pay server failed. Messages never hold a card number, CVV or key.
public struct PayClientError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(_ rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The card data entered is not a card (number, expiry, CVV or name).
        public static let invalidCard = Code("invalidCard")
        /// An argument is malformed.
        public static let invalidArgument = Code("invalidArgument")
        /// The Pay server cannot be reached.
        public static let unreachable = Code("unreachable")
        /// The Pay server refused the request (its HTTP status and error code are in the message).
        public static let refused = Code("refused")
        /// An answer that does not follow the protocol.
        public static let protocolViolation = Code("protocolViolation")
        /// The provisioning certificate does not chain to the Orchard root or is not the token service's.
        public static let untrustedProvisioningKey = Code("untrustedProvisioningKey")
        /// A step-up needs a one-time code and none was given.
        public static let oneTimeCodeRequired = Code("oneTimeCodeRequired")
        /// The user did not accept the terms.
        public static let termsNotAccepted = Code("termsNotAccepted")
        /// The device or its files failed.
        public static let deviceFailure = Code("deviceFailure")
        /// A relay key no device of the account vouched for (or a directory that changed this device's own keys):
        /// nothing is sent to it or accepted from it.
        public static let untrustedRelayKey = Code("untrustedRelayKey")
    }

    public let code: Code
    public let message: String
    /// The Pay server's HTTP status, for ``Code/refused``.
    public let httpStatus: Int?
    /// The Pay server's error code, for ``Code/refused``.
    public let serverCode: String?

    public init(_ code: Code, _ message: String, httpStatus: Int? = nil, serverCode: String? = nil) {
        self.code = code
        self.message = message
        self.httpStatus = httpStatus
        self.serverCode = serverCode
    }

    public var description: String { "\(code): \(message)" }
}
