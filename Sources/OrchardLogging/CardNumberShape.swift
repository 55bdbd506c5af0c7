/// Whether `text` contains a run of 13 or more ASCII digits: the shape of a card number (Visa's are 13, 16 or
/// 19 digits, Mastercard's 16). Services refuse client-chosen identifiers of this shape, such as idempotency
/// keys, because they are stored and logged in clear and must not carry a PAN there.
///
/// The run is 13, not 12, so that every canonical UUID passes: its last group is 12 hex characters, all of
/// them digits in about one UUID in 280, and a UUID is what clients are told to use as an idempotency key.
public func containsCardNumberShape(_ text: String) -> Bool {
    var run = 0
    for byte in text.utf8 {
        run = (0x30...0x39).contains(byte) ? run + 1 : 0
        if run >= cardNumberShapeMinimumRun { return true }
    }
    return false
}

let cardNumberShapeMinimumRun = 13

/// The refusal a service gives for an idempotency key of a card number's shape (``containsCardNumberShape(_:)``).
public let cardNumberShapedKeyMessage =
    "an idempotency key must not contain 13 or more digits in a row (a card number's shape); use a UUID"
