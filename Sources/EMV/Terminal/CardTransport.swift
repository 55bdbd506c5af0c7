/// The reader's side of the contactless link: sends a command APDU to the card in the field and returns
/// its answer. Implementations: ``InProcessCardLink`` here; a socket link in the terminal and device.
public protocol CardTransport: Sendable {
    func transmit(_ command: CommandAPDU) async throws -> ResponseAPDU
}

/// A card in the same process as the reader (simulations, tests, benchmarks). An actor, so the card's
/// state changes one APDU at a time.
public actor InProcessCardLink: CardTransport {
    public private(set) var card: ContactlessCard

    public init(card: ContactlessCard) { self.card = card }

    public func transmit(_ command: CommandAPDU) -> ResponseAPDU { card.process(command) }

    /// Passes the host's authorization to the card (what the Secure Element does after the user authenticates).
    public func authorize(_ authorization: CardholderAuthorization) { card.authorize(authorization) }

    /// The field went away.
    public func reset() { card.reset() }
}

/// One command and its response, as bytes on the link.
public struct APDUExchange: Hashable, Sendable {
    public let command: [UInt8]
    public let response: [UInt8]

    public init(command: [UInt8], response: [UInt8]) {
        self.command = command
        self.response = response
    }
}
