import Foundation
public import OrchardCrypto
import PaymentCredential

/// One change to a ``SealedRecordStorage``: store `sealed` under (`kind`, `id`), or delete it when nil.
public struct SealedRecordChange: Sendable, Hashable {
    public let kind: String
    public let id: String
    public let sealed: [UInt8]?

    public init(kind: String, id: String, sealed: [UInt8]?) {
        self.kind = kind
        self.id = id
        self.sealed = sealed
    }
}

/// Where the Secure Element and the Secure Enclave keep their state: opaque, already encrypted records.
///
/// The components encrypt every record themselves (``RecordSealer``) before it reaches the storage, so no
/// implementation can write a card number or a key in clear. Calls are synchronous because the card applet
/// must have its counter on disk before it answers, inside one APDU exchange.
public protocol SealedRecordStorage: Sendable {
    /// The records of `kind`, as (id, sealed bytes).
    func records(kind: String) throws -> [(id: String, sealed: [UInt8])]

    /// Applies `changes` atomically and durably: when this returns, all of them survive a crash; when it
    /// throws, none was applied.
    func apply(_ changes: [SealedRecordChange]) throws
}

/// A ``SealedRecordStorage`` in memory, for tests and simulations.
public final class InMemorySealedRecordStorage: SealedRecordStorage, @unchecked Sendable {
    // @unchecked: `items` is guarded by `lock`.
    private let lock = NSLock()
    private var items: [String: [String: [UInt8]]] = [:]

    public init() {}

    public func records(kind: String) throws -> [(id: String, sealed: [UInt8])] {
        lock.withLock { (items[kind] ?? [:]).sorted { $0.key < $1.key }.map { (id: $0.key, sealed: $0.value) } }
    }

    public func apply(_ changes: [SealedRecordChange]) throws {
        lock.withLock {
            for change in changes {
                if let sealed = change.sealed {
                    items[change.kind, default: [:]][change.id] = sealed
                } else {
                    items[change.kind]?[change.id] = nil
                }
            }
        }
    }

    /// Every sealed byte stored, for tests that scan for secrets.
    public var allSealedBytes: [[UInt8]] { lock.withLock { items.values.flatMap { $0.values } } }
}

/// Encrypts records at rest: AES-256-GCM under a key derived from the device's storage key for one owner
/// (`secure-element`, `secure-enclave`), a fresh 96-bit IV per record, and the owner, kind and id as
/// associated data, so a record moved to another slot or another owner fails to open.
///
/// Format: `01 ‖ IV (12) ‖ ciphertext ‖ tag (16)`.
public struct RecordSealer: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    static let version: UInt8 = 1
    private let key: SymmetricKey
    private let owner: String
    private let random: any RandomSource

    /// A sealer for `owner` under `storageKey` (32 bytes).
    public init(storageKey: SymmetricKey, owner: String, random: any RandomSource) throws(SecureElementError) {
        guard storageKey.byteCount == 32 else {
            throw SecureElementError(.invalidArgument, "a device storage key is 32 bytes")
        }
        do {
            key = try HKDF.deriveKey(
                inputKeyMaterial: storageKey, salt: Array("orchard-device-storage-v1".utf8),
                info: Array(owner.utf8), outputByteCount: 32)
        } catch {
            throw SecureElementError(.internalFailure, "cannot derive the \(owner) storage key")
        }
        self.owner = owner
        self.random = random
    }

    private func aad(_ kind: String, _ id: String) -> [UInt8] {
        Array("orchard-sealed-record-v1".utf8) + [0] + Array(owner.utf8) + [0] + Array(kind.utf8) + [0]
            + Array(id.utf8)
    }

    /// Encrypts `plaintext` for the slot (`kind`, `id`).
    public func seal(_ plaintext: SecureBytes, kind: String, id: String) throws(SecureElementError) -> [UInt8] {
        let iv = random.bytes(12)
        let aad = aad(kind, id)
        do {
            let box = try plaintext.withUnsafeBytes { (bytes) throws(CryptoError) in
                try AES.GCM.seal(bytes, using: key, iv: iv, authenticating: aad)
            }
            return [Self.version] + iv + box.ciphertext + box.tag
        } catch {
            throw SecureElementError(.internalFailure, "cannot encrypt a \(owner) record")
        }
    }

    /// Decrypts the record of slot (`kind`, `id`); a record altered, moved or sealed under another key gives
    /// ``SecureElementError/Code/corruptState``.
    public func open(_ sealed: [UInt8], kind: String, id: String) throws(SecureElementError) -> SecureBytes {
        guard sealed.count >= 1 + 12 + 16, sealed[0] == Self.version else {
            throw SecureElementError(.corruptState, "a \(owner) record has an unknown format")
        }
        let box = AES.GCM.SealedBox(ciphertext: Array(sealed[13..<(sealed.count - 16)]), tag: Array(sealed.suffix(16)))
        do {
            var plain = try AES.GCM.open(box, using: key, iv: sealed[1..<13], authenticating: aad(kind, id))
            defer { for index in plain.indices { plain[index] = 0 } }
            return SecureBytes(plain)
        } catch {
            throw SecureElementError(
                .corruptState, "a \(owner) record does not open under this device's storage key (altered or moved)")
        }
    }

    public var description: String { "RecordSealer(\(owner), key redacted)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}

/// The Secure Element's records use the shared secret TLV layout (``SecretTLV`` in `PaymentCredential`); these
/// adapters give its failures the Secure Element's error codes.
enum SecretFields {
    static func encode(_ items: [(tag: UInt8, value: SecureBytes)]) throws(SecureElementError) -> SecureBytes {
        do {
            return try SecretTLV.encode(items)
        } catch {
            throw SecureElementError(.internalFailure, "cannot encode a record: \(error.message)")
        }
    }

    /// Decodes `data` into a reader whose failures carry `code` and name the record (`what`).
    static func decode(
        _ data: SecureBytes, allowed: Set<UInt8>, code: SecureElementError.Code, what: String
    ) throws(SecureElementError) -> FieldReader {
        do {
            return FieldReader(items: try SecretTLV.decode(data, allowedTags: allowed), code: code, what: what)
        } catch {
            throw SecureElementError(code, "\(what): \(error.message)")
        }
    }

    static func text(_ value: String) -> SecureBytes { SecretTLV.text(value) }

    static func integer(_ value: UInt64, _ count: Int) -> SecureBytes { SecretTLV.integer(value, byteCount: count) }
}

/// Reads the fields of one decoded record, failing with the record's error code when one is missing.
struct FieldReader {
    let items: SecretTLV.Items
    let code: SecureElementError.Code
    let what: String

    func bytes(_ tag: UInt8, _ name: String, count: Int? = nil) throws(SecureElementError) -> SecureBytes {
        do {
            return try items.bytes(tag, name, count: count)
        } catch {
            throw SecureElementError(code, "\(what): \(error.message)")
        }
    }

    func optionalBytes(_ tag: UInt8, _ name: String, count: Int? = nil) throws(SecureElementError) -> SecureBytes? {
        guard items.contains(tag) else { return nil }
        return try bytes(tag, name, count: count)
    }

    func text(_ tag: UInt8, _ name: String) throws(SecureElementError) -> String {
        let value = try bytes(tag, name)
        return value.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
    }

    func integer(_ tag: UInt8, _ name: String, count: Int) throws(SecureElementError) -> UInt64 {
        readBigEndian(try bytes(tag, name, count: count).unsafeCopyOfBytes())
    }
}
