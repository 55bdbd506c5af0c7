import EMV
import OrchardCrypto

/// Parses arbitrary bytes as command and response APDUs, then feeds a card (authorized, Visa and
/// Mastercard applications) a sequence of APDUs cut from the input (one length byte, then that many
/// bytes). Must never crash; every answer ends with a status word.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzEMVAPDU(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: count)) } ?? []
    if let command = try? CommandAPDU(bytes: bytes), let encoded = try? command.encoded() {
        guard (try? CommandAPDU(bytes: encoded)) == command else { fatalError("APDU re-encoding changed it") }
    }
    _ = try? ResponseAPDU(bytes: bytes)

    var card = Card.make()
    card.authorize(CardholderAuthorization(verifiedBy: .face))
    var index = 0
    while index < bytes.count {
        let length = Int(bytes[index])
        index += 1
        let end = min(bytes.count, index + length)
        let response = card.process(bytes: bytes[index..<end])
        guard response.count >= 2 else { fatalError("a response without a status word") }
        index = end
    }
    return 0
}

enum Card {
    static let key = SymmetricKey(data: [UInt8](repeating: 0x11, count: 16))

    static func make() -> ContactlessCard {
        do {
            let visa = try CardApplicationProfile(
                scheme: .visa, pan: "4895370012345671", expiry: "2812", masterKey: key)
            let mastercard = try CardApplicationProfile(
                scheme: .mastercard, pan: "5413330089020011", expiry: "2812", masterKey: key, priority: 2)
            return try ContactlessCard(applications: [
                CardApplication(profile: visa, atcStore: InMemoryATCStore(lastUsed: 0xFFF0)),
                CardApplication(profile: mastercard, atcStore: InMemoryATCStore()),
            ])
        } catch {
            fatalError("fuzz card setup failed: \(error)")
        }
    }
}
