/// The one error type of `Wallet`.
///
/// A struct with an extensible code (the `CryptoError` pattern). Equality compares the code only. Messages
/// never hold a card number or an address.
public struct WalletError: Error, Hashable, CustomStringConvertible, Sendable {
    /// What went wrong, as a value a caller can branch on.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case invalidArgument, cardNotFound, cardNotActive, duplicateCard, storageFailure
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// A display field, setting or address has the wrong form.
        public static let invalidArgument = Code(.invalidArgument)
        /// No card with this identifier is in the wallet.
        public static let cardNotFound = Code(.cardNotFound)
        /// The card is suspended or terminated, so it cannot be the default or be chosen.
        public static let cardNotActive = Code(.cardNotActive)
        /// A card with this identifier is already in the wallet.
        public static let duplicateCard = Code(.duplicateCard)
        /// The wallet's store failed; the change was not made.
        public static let storageFailure = Code(.storageFailure)

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

    public static func == (lhs: WalletError, rhs: WalletError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
