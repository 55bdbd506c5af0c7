import OrchardCrypto

/// The persisted data of one card applet. Active: DPAN and keys present. Terminated: only what the wallet
/// displays remains (token reference, network, the DPAN's last four digits).
struct AppletRecord: Sendable {
    enum State: UInt8, Sendable {
        case active = 1
        case terminated = 2
    }

    let card: CardIdentifier
    let tokenReference: String
    let dpan: SecureBytes?
    let dpanSuffix: String
    let panSequenceNumber: UInt8
    let expiry: String
    let network: String
    let proximityMasterKey: SymmetricKey?
    let remoteMasterKey: SymmetricKey?
    let authorizationRandomDigest: [UInt8]
    let state: State

    /// The record with its secrets erased.
    var terminated: AppletRecord {
        AppletRecord(
            card: card, tokenReference: tokenReference, dpan: nil, dpanSuffix: dpanSuffix,
            panSequenceNumber: panSequenceNumber, expiry: expiry, network: network, proximityMasterKey: nil,
            remoteMasterKey: nil, authorizationRandomDigest: authorizationRandomDigest, state: .terminated)
    }

    var dpanString: String? { dpan.map { $0.withUnsafeBytes { String(decoding: $0, as: UTF8.self) } } }

    var display: CardDisplayData {
        CardDisplayData(
            card: card, tokenReference: tokenReference, network: network, deviceAccountSuffix: dpanSuffix,
            state: state == .active ? .active : .terminated)
    }

    private enum Tag {
        static let version: UInt8 = 0x00
        static let tokenReference: UInt8 = 0x01
        static let dpan: UInt8 = 0x02
        static let dpanSuffix: UInt8 = 0x03
        static let psn: UInt8 = 0x04
        static let expiry: UInt8 = 0x05
        static let network: UInt8 = 0x06
        static let proximityKey: UInt8 = 0x07
        static let remoteKey: UInt8 = 0x08
        static let authorizationRandom: UInt8 = 0x09
        static let state: UInt8 = 0x0A
        static let all: Set<UInt8> = Set(0x00...0x0A)
    }

    init(
        card: CardIdentifier, tokenReference: String, dpan: SecureBytes?, dpanSuffix: String, panSequenceNumber: UInt8,
        expiry: String, network: String, proximityMasterKey: SymmetricKey?, remoteMasterKey: SymmetricKey?,
        authorizationRandomDigest: [UInt8], state: State
    ) {
        self.card = card
        self.tokenReference = tokenReference
        self.dpan = dpan
        self.dpanSuffix = dpanSuffix
        self.panSequenceNumber = panSequenceNumber
        self.expiry = expiry
        self.network = network
        self.proximityMasterKey = proximityMasterKey
        self.remoteMasterKey = remoteMasterKey
        self.authorizationRandomDigest = authorizationRandomDigest
        self.state = state
    }

    func encoded() throws(SecureElementError) -> SecureBytes {
        var items: [(tag: UInt8, value: SecureBytes)] = [
            (Tag.version, SecureBytes([1])),
            (Tag.tokenReference, SecretFields.text(tokenReference)),
            (Tag.dpanSuffix, SecretFields.text(dpanSuffix)),
            (Tag.psn, SecureBytes([panSequenceNumber])),
            (Tag.expiry, SecretFields.text(expiry)),
            (Tag.network, SecretFields.text(network)),
            (Tag.authorizationRandom, SecureBytes(authorizationRandomDigest)),
            (Tag.state, SecureBytes([state.rawValue])),
        ]
        if state == .active, let dpan, let proximityMasterKey, let remoteMasterKey {
            items.append((Tag.dpan, dpan))
            items.append((Tag.proximityKey, proximityMasterKey.bytes))
            items.append((Tag.remoteKey, remoteMasterKey.bytes))
        }
        return try SecretFields.encode(items)
    }

    init(decoding plaintext: SecureBytes, id: String) throws(SecureElementError) {
        let what = "applet record \(id)"
        let fields = try SecretFields.decode(plaintext, allowed: Tag.all, code: .corruptState, what: what)
        guard try fields.bytes(Tag.version, "version").unsafeCopyOfBytes() == [1] else {
            throw SecureElementError(.corruptState, "\(what) has an unknown version")
        }
        guard let state = State(rawValue: try fields.bytes(Tag.state, "state", count: 1).unsafeCopyOfBytes()[0]) else {
            throw SecureElementError(.corruptState, "\(what) has an unknown state")
        }
        card = try CardIdentifier(hex: id)
        tokenReference = try fields.text(Tag.tokenReference, "token reference")
        dpanSuffix = try fields.text(Tag.dpanSuffix, "DPAN suffix")
        panSequenceNumber = try fields.bytes(Tag.psn, "PSN", count: 1).unsafeCopyOfBytes()[0]
        expiry = try fields.text(Tag.expiry, "expiry")
        network = try fields.text(Tag.network, "network")
        authorizationRandomDigest = try fields.bytes(Tag.authorizationRandom, "AR", count: 32).unsafeCopyOfBytes()
        self.state = state
        if state == .active {
            dpan = try fields.bytes(Tag.dpan, "DPAN")
            proximityMasterKey = SymmetricKey(try fields.bytes(Tag.proximityKey, "proximity key", count: 16))
            remoteMasterKey = SymmetricKey(try fields.bytes(Tag.remoteKey, "remote key", count: 16))
        } else {
            dpan = nil
            proximityMasterKey = nil
            remoteMasterKey = nil
        }
    }
}
