/// The one error type of `OrchardRuntime`.
///
/// A struct with an extensible code (the `CryptoError` pattern). Equality compares the code only. A
/// configuration error lists every problem found, one per entry of ``problems``, each naming where the bad
/// value came from (`config.json: pay.port` or `ORCHARD_PAY_PORT`), so a user fixes them all in one go.
public struct RuntimeError: Error, Hashable, CustomStringConvertible, Sendable {
    /// What went wrong, as a value a caller can branch on.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case invalidConfiguration, notFound, io, insecurePermissions, invalidName, internalFailure
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The configuration file or an `ORCHARD_*` environment variable holds something invalid.
        public static let invalidConfiguration = Code(.invalidConfiguration)
        /// A file or directory the deployment needs does not exist (for example, no `orchard init` yet).
        public static let notFound = Code(.notFound)
        /// The operating system failed to read, write, rename or sync a file.
        public static let io = Code(.io)
        /// A deployment directory or key file is open to other users; nothing secret is read from it.
        public static let insecurePermissions = Code(.insecurePermissions)
        /// A party, service, device or file name is not acceptable (it could escape the directory).
        public static let invalidName = Code(.invalidName)
        /// Something failed that the input does not explain.
        public static let internalFailure = Code(.internalFailure)

        public var description: String { base.rawValue }
    }

    public let code: Code
    /// What happened and, where it helps, what to do about it.
    public let message: String
    /// For ``Code/invalidConfiguration``: every problem found, each starting with where it was found.
    public let problems: [String]

    public init(_ code: Code, _ message: String, problems: [String] = []) {
        self.code = code
        self.message = message
        self.problems = problems
    }

    public var description: String {
        guard !problems.isEmpty else { return "\(code): \(message)" }
        return "\(code): \(message)\n" + problems.map { "  - \($0)" }.joined(separator: "\n")
    }

    public static func == (lhs: RuntimeError, rhs: RuntimeError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
