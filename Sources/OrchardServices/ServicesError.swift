/// The one error type of `OrchardServices`: deployment initialisation, service building and hosting.
///
/// A struct with an extensible code (the `CryptoError` pattern). Equality compares the code only. Messages
/// say what went wrong and what to do; they never hold a key or a card number.
public struct ServicesError: Error, Hashable, CustomStringConvertible, Sendable {
    /// What went wrong, as a value a caller can branch on.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case directoryNotEmpty, alreadyInitialized, servicesRunning, notInitialized, unknownService
            case invalidConfiguration, pkiFailure, storeFailure, startFailed, notReady, internalFailure, invalidBundle
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// `init` was asked to use a directory that holds other files (pass `--force` to replace them).
        public static let directoryNotEmpty = Code(.directoryNotEmpty)
        /// `init` was asked to use a directory that already holds a deployment (pass `--force`).
        public static let alreadyInitialized = Code(.alreadyInitialized)
        /// A deployment cannot be replaced while its services run.
        public static let servicesRunning = Code(.servicesRunning)
        /// The directory holds no deployment (run `orchard init` first).
        public static let notInitialized = Code(.notInitialized)
        /// A service name that no registered service has.
        public static let unknownService = Code(.unknownService)
        /// The configuration cannot be used (a bad port range, a missing key file, an invalid value).
        public static let invalidConfiguration = Code(.invalidConfiguration)
        /// A key or certificate could not be made, read or used.
        public static let pkiFailure = Code(.pkiFailure)
        /// A service's SQLite store could not be opened or written.
        public static let storeFailure = Code(.storeFailure)
        /// A service could not start (its port is taken, its TLS identity is refused).
        public static let startFailed = Code(.startFailed)
        /// Something a step needs was not provided by an earlier step (a registry out of order).
        public static let notReady = Code(.notReady)
        /// Something failed that the input does not explain.
        public static let internalFailure = Code(.internalFailure)
        /// A party bundle (`orchard pki import`) is malformed, of another version, the importer's own, or carries a
        /// certificate that does not check; nothing was changed.
        public static let invalidBundle = Code(.invalidBundle)

        public var description: String { base.rawValue }
    }

    public let code: Code
    /// What happened and, where it helps, what to do about it.
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// Wraps any error from a lower layer into `code`, keeping its description (which never holds secrets:
    /// every Orchard error type guarantees that).
    public init(_ code: Code, _ context: String, underlying: any Error) {
        if let error = underlying as? ServicesError {
            self = error
        } else {
            self.init(code, "\(context): \(underlying)")
        }
    }

    public var description: String { "\(code): \(message)" }

    public static func == (lhs: ServicesError, rhs: ServicesError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
