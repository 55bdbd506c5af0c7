/// The one error type of `Device` (the factory and the wiring of a device to its files).
///
/// The device's components keep their own errors: refusals of the Secure Element and Secure Enclave are
/// `SecureElementError`, of the wallet `WalletError`, and pass through ``Device`` unchanged so callers can
/// branch on their codes. A struct with an extensible code; equality compares the code only.
public struct DeviceError: Error, Hashable, CustomStringConvertible, Sendable {
    /// What went wrong, as a value a caller can branch on.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case invalidArgument, alreadyExists, notFound, storageFailure, insecurePermissions, unsupported
            case internalFailure
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// A name or option has the wrong form.
        public static let invalidArgument = Code(.invalidArgument)
        /// A device of this name already exists in the deployment.
        public static let alreadyExists = Code(.alreadyExists)
        /// No device of this name exists (its store or storage key is missing).
        public static let notFound = Code(.notFound)
        /// The device's store or storage key could not be read or written.
        public static let storageFailure = Code(.storageFailure)
        /// The storage key file is open to other users; it was not used.
        public static let insecurePermissions = Code(.insecurePermissions)
        /// The device cannot do this (an iPad in an NFC field, a watch's wrist on a phone).
        public static let unsupported = Code(.unsupported)
        /// Something failed that the input does not explain.
        public static let internalFailure = Code(.internalFailure)

        public var description: String { base.rawValue }
    }

    public let code: Code
    /// What happened and, where it helps, what to do about it.
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }

    public static func == (lhs: DeviceError, rhs: DeviceError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
