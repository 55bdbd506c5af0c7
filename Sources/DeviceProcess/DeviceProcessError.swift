/// The one error type of `DeviceProcess` (the device's control socket, server and client).
///
/// A struct with an extensible code; equality compares the code only.
public struct DeviceProcessError: Error, Hashable, CustomStringConvertible, Sendable {
    /// What went wrong, as a value a caller can branch on.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case notRunning, alreadyRunning, invalidPath, socketFailure, protocolError, timedOut
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// No device process listens on the socket.
        public static let notRunning = Code(.notRunning)
        /// Another device process already listens on the socket.
        public static let alreadyRunning = Code(.alreadyRunning)
        /// The socket path is too long for a Unix socket (107 bytes) or not usable.
        public static let invalidPath = Code(.invalidPath)
        /// A socket call failed.
        public static let socketFailure = Code(.socketFailure)
        /// The peer sent something that is not the HTTP/1.1 this socket speaks.
        public static let protocolError = Code(.protocolError)
        /// The peer did not answer in time.
        public static let timedOut = Code(.timedOut)

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

    public static func == (lhs: DeviceProcessError, rhs: DeviceProcessError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
