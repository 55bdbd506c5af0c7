/// The reader's side of the contactless link: sends a command APDU to the card in the field and returns
/// its answer. Implementations: ``InProcessCardLink`` here; a socket link in the terminal and device.
public protocol CardTransport: Sendable {
    /// Sends `command` to the card and returns its response; throws when the link fails (a refusal is a response with a
    /// status word, not an error).
    func transmit(_ command: CommandAPDU) async throws -> ResponseAPDU
}

/// A card in the same process as the reader (simulations, tests, benchmarks). An actor, so the card's
/// state changes one APDU at a time.
public actor InProcessCardLink: CardTransport {
    /// The card, with the state its last APDU left it in.
    public private(set) var card: ContactlessCard

    /// A link to its own copy of `card`: the copy's state changes only through this actor.
    public init(card: ContactlessCard) { self.card = card }

    /// Lets the card process `command`; never throws, since nothing lies between reader and card.
    public func transmit(_ command: CommandAPDU) -> ResponseAPDU { card.process(command) }

    /// Passes the host's authorization to the card (what the Secure Element does after the user authenticates).
    public func authorize(_ authorization: CardholderAuthorization) { card.authorize(authorization) }

    /// The field went away.
    public func reset() { card.reset() }
}

/// One command and its response, as bytes on the link.
public struct APDUExchange: Hashable, Sendable {
    /// The command APDU's bytes, as sent.
    public let command: [UInt8]
    /// The response APDU's bytes, as received (data and status word).
    public let response: [UInt8]

    /// One exchange of the given bytes.
    public init(command: [UInt8], response: [UInt8]) {
        self.command = command
        self.response = response
    }
}
