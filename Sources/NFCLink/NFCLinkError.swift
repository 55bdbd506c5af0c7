/// The one error type of `NFCLink`: the local link between a terminal's reader and a device's NFC antenna.
///
/// A struct with an extensible code; equality compares the code only. Messages say what happened on the
/// link, never the bytes of an APDU (a response may carry a DPAN).
public struct NFCLinkError: Error, Hashable, CustomStringConvertible, Sendable {
    /// What went wrong, as a value a caller can branch on.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case invalidArgument, invalidPath, notInField, alreadyListening, busy, refused, deviceNotAllowed
            case timedOut, connectionLost, protocolViolation, frameTooLarge, limitExceeded, socketFailure
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// A polling description, frame or limit has the wrong form.
        public static let invalidArgument = Code(.invalidArgument)
        /// The socket path is too long for a Unix socket (107 bytes) or not usable.
        public static let invalidPath = Code(.invalidPath)
        /// No device listens at the antenna's path: nothing is in the reader's field.
        public static let notInField = Code(.notInField)
        /// Another antenna already listens on the path.
        public static let alreadyListening = Code(.alreadyListening)
        /// The device is already in another reader's field.
        public static let busy = Code(.busy)
        /// The device answered the field with a refusal (``NFCLinkError/peerCode`` says which).
        public static let refused = Code(.refused)
        /// Only phones and watches join an NFC field; a Mac or an iPad is refused.
        public static let deviceNotAllowed = Code(.deviceNotAllowed)
        /// The peer did not answer within the link's deadline.
        public static let timedOut = Code(.timedOut)
        /// The peer closed the link in the middle of an exchange.
        public static let connectionLost = Code(.connectionLost)
        /// The peer sent a frame that is malformed or not allowed at this point of the session.
        public static let protocolViolation = Code(.protocolViolation)
        /// A frame is larger than the link's limit.
        public static let frameTooLarge = Code(.frameTooLarge)
        /// A session went beyond a limit (number of exchanges, session length).
        public static let limitExceeded = Code(.limitExceeded)
        /// A socket call failed.
        public static let socketFailure = Code(.socketFailure)

        public var description: String { base.rawValue }
    }

    public let code: Code
    /// What happened and, where it helps, what to do about it.
    public let message: String
    /// For ``Code/refused``: the code the device gave (`deviceLocked`, `noCard`, ...).
    public let peerCode: String?

    public init(_ code: Code, _ message: String, peerCode: String? = nil) {
        self.code = code
        self.message = message
        self.peerCode = peerCode
    }

    public var description: String {
        if let peerCode { return "\(code) (\(peerCode)): \(message)" }
        return "\(code): \(message)"
    }

    public static func == (lhs: NFCLinkError, rhs: NFCLinkError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
