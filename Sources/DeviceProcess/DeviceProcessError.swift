public import DeviceControlAPI

/// The one error type of `DeviceProcess` (the device's control socket, server and client).
///
/// A struct with an extensible code; equality compares the code only.
public struct DeviceProcessError: Error, Hashable, CustomStringConvertible, Sendable {
    /// What went wrong, as a value a caller can branch on.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case notRunning, alreadyRunning, invalidPath, socketFailure, protocolError, timedOut, refused
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
        /// The device refused the request: ``DeviceProcessError/refusal`` holds its code and message,
        /// ``DeviceProcessError/status`` the HTTP status.
        public static let refused = Code(.refused)

        public var description: String { base.rawValue }
    }

    public let code: Code
    /// What happened and, where it helps, what to do about it.
    public let message: String

    /// The device's error body, for ``Code/refused``.
    public let refusal: DeviceControlErrorBody.Detail?
    /// The HTTP status of a refusal.
    public let status: Int?

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
        refusal = nil
        status = nil
    }

    /// The device's refusal `refusal`, answered with `status`.
    public init(refusal: DeviceControlErrorBody.Detail, status: Int) {
        code = .refused
        message = "\(refusal.code): \(refusal.message)"
        self.refusal = refusal
        self.status = status
    }

    public var description: String { "\(code): \(message)" }

    public static func == (lhs: DeviceProcessError, rhs: DeviceProcessError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
