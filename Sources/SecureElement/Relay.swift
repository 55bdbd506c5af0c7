import Foundation
public import OrchardCrypto
public import RelayAPI

/// The public halves of a device's relay keys, as published to its account's directory.
public struct RelayPublicKeys: Sendable, Equatable {
    /// P-256 key agreement: senders encrypt to it.
    public let encryption: P256.KeyAgreement.PublicKey
    /// ECDSA P-256: the device signs every frame it sends with its private half.
    public let signing: P256.Signing.PublicKey
    public init(encryption: P256.KeyAgreement.PublicKey, signing: P256.Signing.PublicKey) {
        self.encryption = encryption
        self.signing = signing
    }
}

/// Another device of the account, with the relay keys this device trusts for it.
public struct RelayPeer: Sendable, Equatable {
    public let deviceID: String
    public let keys: RelayPublicKeys
    public init(deviceID: String, keys: RelayPublicKeys) {
        self.deviceID = deviceID
        self.keys = keys
    }
}

/// A relay message this device accepted: signed by its sender, for this device, in order, and intact.
public struct RelayMessage: Sendable, Equatable {
    public let sender: String
    public let sequence: UInt64
    public let plaintext: SecureBytes
}

/// The relay's per-recipient encryption (the seeds' IDS, with ECIES in place of RSA-OAEP):
///
/// - a fresh ephemeral P-256 key per frame; Z = ECDH(ephemeral, recipient's encryption key);
/// - HKDF-SHA256 (Z, salt = ephemeral key ‖ recipient key, info = `orchard-relay-v1` 00 ‖ len ‖ sender ID ‖ len ‖
///   recipient ID) → 32-byte AES-256 key ‖ 12-byte IV (the key is used once);
/// - AES-256-GCM with the routing header and the ephemeral key as additional data;
/// - ECDSA P-256 by the sender's relay signing key over the whole frame (``RelayFrame/signedContent``).
///
/// Opening checks the signature first, so only frames from a key the recipient trusts are decrypted.
public enum RelayCipher {
    static let infoLabel: [UInt8] = Array("orchard-relay-v1".utf8) + [0]

    /// Seals `plaintext` from `header.sender` (signing with `signingKey`) to the device whose encryption key is
    /// `recipientKey`.
    public static func seal(
        _ plaintext: SecureBytes, header: RelayFrame.Header, to recipientKey: P256.KeyAgreement.PublicKey,
        signingKey: P256.Signing.PrivateKey, random: any RandomSource
    ) throws(SecureElementError) -> RelayFrame {
        guard RelayFrame.isDeviceID(header.sender), RelayFrame.isDeviceID(header.recipient) else {
            throw SecureElementError(.invalidArgument, "relay device IDs are 1 to 64 bytes")
        }
        let ephemeral = try freshAgreementKey(random)
        let ephemeralKey = ephemeral.publicKey.x963Representation
        do {
            let (key, iv) = try derive(
                try ephemeral.sharedSecretFromKeyAgreement(with: recipientKey), ephemeralKey: ephemeralKey,
                recipientKey: recipientKey, header: header)
            let box = try plaintext.withUnsafeBytes { (bytes) throws(CryptoError) in
                try AES.GCM.seal(Array(bytes), using: key, iv: iv, authenticating: header.encoded + ephemeralKey)
            }
            let unsigned = RelayFrame(header: header, ephemeralKey: ephemeralKey, sealed: box.combined, signature: [])
            let signature = try signingKey.signature(for: unsigned.signedContent).derRepresentation
            return RelayFrame(header: header, ephemeralKey: ephemeralKey, sealed: box.combined, signature: signature)
        } catch {
            throw SecureElementError(.internalFailure, "sealing the relay frame failed: \(error.message)")
        }
    }

    /// Checks `frame`'s signature under `senderSigningKey`, then decrypts it with `recipientKey`. Refuses (and
    /// returns nothing) when the signature or the tag fails.
    public static func open(
        _ frame: RelayFrame, recipientKey: P256.KeyAgreement.PrivateKey, senderSigningKey: P256.Signing.PublicKey
    ) throws(SecureElementError) -> SecureBytes {
        guard let signature = try? P256.Signing.ECDSASignature(derRepresentation: frame.signature),
            senderSigningKey.isValidSignature(signature, for: frame.signedContent)
        else {
            throw SecureElementError(.invalidRelayFrame, "the relay frame is not signed by its sender's relay key")
        }
        do {
            let ephemeral = try P256.KeyAgreement.PublicKey(x963Representation: frame.ephemeralKey)
            let (key, iv) = try derive(
                try recipientKey.sharedSecretFromKeyAgreement(with: ephemeral), ephemeralKey: frame.ephemeralKey,
                recipientKey: recipientKey.publicKey, header: frame.header)
            let plaintext = try AES.GCM.open(
                try AES.GCM.SealedBox(combined: frame.sealed), using: key, iv: iv,
                authenticating: frame.additionalData)
            return SecureBytes(plaintext)
        } catch {
            throw SecureElementError(.invalidRelayFrame, "the relay frame does not open with this device's key")
        }
    }

    static func derive(
        _ shared: SecureBytes, ephemeralKey: [UInt8], recipientKey: P256.KeyAgreement.PublicKey,
        header: RelayFrame.Header
    ) throws(CryptoError) -> (SymmetricKey, [UInt8]) {
        let sender = Array(header.sender.utf8)
        let recipient = Array(header.recipient.utf8)
        let info = infoLabel + [UInt8(sender.count)] + sender + [UInt8(recipient.count)] + recipient
        let material = try HKDF.deriveKey(
            inputKeyMaterial: SymmetricKey(shared), salt: ephemeralKey + recipientKey.x963Representation, info: info,
            outputByteCount: 44)
        return material.withUnsafeBytes { bytes in
            (SymmetricKey(data: bytes.prefix(32)), Array(bytes.suffix(12)))
        }
    }
}

extension SecureEnclave {
    static let relaySequenceKind = "relay-sequence"

    /// The public halves of this device's relay keys. The Secure Enclave makes both keys at the first call and
    /// keeps them (sealed) for the device's life; the private halves never leave it.
    public func relayPublicKeys() throws(SecureElementError) -> RelayPublicKeys {
        let (encryption, signing) = try relayKeys()
        return RelayPublicKeys(encryption: encryption.publicKey, signing: signing.publicKey)
    }

    /// Seals `plaintext` from this device (`deviceID`) to `recipient` with the pair's next sequence number, which
    /// is persisted before the frame is returned (so a restart never reuses one).
    public func sealRelayMessage(
        _ plaintext: SecureBytes, from deviceID: String, to recipient: RelayPeer
    ) throws(SecureElementError) -> RelayFrame {
        let (_, signing) = try relayKeys()
        let slot = Self.sequenceSlot(outgoing: true, deviceID: deviceID, peer: recipient.deviceID)
        let sequence = try storedSequence(slot) + 1
        try storeSequence(sequence, slot)
        return try RelayCipher.seal(
            plaintext, header: RelayFrame.Header(sender: deviceID, recipient: recipient.deviceID, sequence: sequence),
            to: recipient.keys.encryption, signingKey: signing, random: random)
    }

    /// Opens a frame for this device (`deviceID`) from `sender`: the header must name both, the signature must be
    /// `sender`'s, the sequence must be above the last accepted from `sender` (a replayed or reordered frame is
    /// ``SecureElementError/Code/relayFrameReplayed``), and the tag must hold. The new sequence is persisted
    /// before the plaintext is returned.
    public func openRelayMessage(
        _ frame: RelayFrame, to deviceID: String, from sender: RelayPeer
    ) throws(SecureElementError) -> RelayMessage {
        guard frame.header.recipient == deviceID, frame.header.sender == sender.deviceID else {
            throw SecureElementError(
                .invalidRelayFrame, "the relay frame is not from \(sender.deviceID) to this device")
        }
        let (encryption, _) = try relayKeys()
        let plaintext = try RelayCipher.open(
            frame, recipientKey: encryption, senderSigningKey: sender.keys.signing)
        let slot = Self.sequenceSlot(outgoing: false, deviceID: deviceID, peer: sender.deviceID)
        guard frame.header.sequence > (try storedSequence(slot)) else {
            throw SecureElementError(
                .relayFrameReplayed,
                "relay frame \(frame.header.sequence) from \(sender.deviceID) is not newer than the last accepted")
        }
        try storeSequence(frame.header.sequence, slot)
        return RelayMessage(sender: sender.deviceID, sequence: frame.header.sequence, plaintext: plaintext)
    }

    /// Vouches for `peer`'s relay keys once the user entered this device's passcode: signs ``RelayVouch`` (account
    /// of this device, `voucherID` this device) with the relay signing key. A wrong passcode is counted and refused
    /// as for any passcode entry.
    /// - Throws: ``SecureElementError/Code/passcodeIncorrect``, ``SecureElementError/Code/lockedOut``,
    ///   ``SecureElementError/Code/passcodeRequired``.
    public func vouchForRelayDevice(
        _ peer: RelayPeer, voucherID: String, passcode: SecureBytes
    ) throws(SecureElementError) -> P256.Signing.ECDSASignature {
        try requirePasscodeAttemptAllowed()
        guard try verify(.passcode(passcode)) else {
            throw SecureElementError(.passcodeIncorrect, "the passcode is not right")
        }
        let (_, signing) = try relayKeys()
        let content = RelayVouch.signedContent(
            account: profile.account, voucher: voucherID, device: peer.deviceID,
            encryptionKey: peer.keys.encryption.x963Representation, signingKey: peer.keys.signing.x963Representation)
        do {
            return try signing.signature(for: content)
        } catch {
            throw SecureElementError(.internalFailure, "signing the vouch failed")
        }
    }

    /// Wraps the account key of `generation` (32 bytes) from this device to `recipient`: a frame whose sequence is the
    /// generation (the pair's message counters are not used).
    public func wrapAccountKey(
        _ key: SymmetricKey, generation: UInt64, from deviceID: String, to recipient: RelayPeer
    ) throws(SecureElementError) -> RelayFrame {
        guard key.byteCount == 32, generation > 0 else {
            throw SecureElementError(.invalidArgument, "an account key is 32 bytes, of generation 1 or more")
        }
        let (_, signing) = try relayKeys()
        return try RelayCipher.seal(
            key.bytes,
            header: RelayFrame.Header(sender: deviceID, recipient: recipient.deviceID, sequence: generation),
            to: recipient.keys.encryption, signingKey: signing, random: random)
    }

    /// Opens an account key wrapped to this device (`deviceID`) by `sender`, checking that the frame is for this
    /// device, from `sender`, of `generation`, signed and intact.
    public func unwrapAccountKey(
        _ frame: RelayFrame, generation: UInt64, to deviceID: String, from sender: RelayPeer
    ) throws(SecureElementError) -> SymmetricKey {
        guard frame.header.recipient == deviceID, frame.header.sender == sender.deviceID,
            frame.header.sequence == generation
        else {
            throw SecureElementError(
                .invalidRelayFrame, "the wrapped account key is not this device's of that generation")
        }
        let (encryption, _) = try relayKeys()
        let key = try RelayCipher.open(frame, recipientKey: encryption, senderSigningKey: sender.keys.signing)
        guard key.count == 32 else { throw SecureElementError(.invalidRelayFrame, "an account key is 32 bytes") }
        return SymmetricKey(key)
    }

    private func relayKeys() throws(SecureElementError) -> (P256.KeyAgreement.PrivateKey, P256.Signing.PrivateKey) {
        if let encryption = persisted.relayEncryptionKey, let signing = persisted.relaySigningKey {
            return (encryption, signing)
        }
        let encryption = try freshAgreementKey(random)
        let signing = try freshSigningKey(random)
        try update { state in
            state.relayEncryptionKey = encryption
            state.relaySigningKey = signing
        }
        return (encryption, signing)
    }

    static func sequenceSlot(outgoing: Bool, deviceID: String, peer: String) -> String {
        outgoing ? "out:\(deviceID)>\(peer)" : "in:\(peer)>\(deviceID)"
    }

    private func storedSequence(_ slot: String) throws(SecureElementError) -> UInt64 {
        guard let record = try storage.loadRecords(kind: Self.relaySequenceKind).first(where: { $0.id == slot }) else {
            return 0
        }
        let bytes = try sealer.open(record.sealed, kind: Self.relaySequenceKind, id: slot).unsafeCopyOfBytes()
        guard bytes.count == 8 else {
            throw SecureElementError(.corruptState, "a relay sequence record is not 8 bytes")
        }
        return bytes.reduce(0) { $0 << 8 | UInt64($1) }
    }

    private func storeSequence(_ sequence: UInt64, _ slot: String) throws(SecureElementError) {
        let bytes = (0..<8).reversed().map { UInt8(truncatingIfNeeded: sequence >> (8 * UInt64($0))) }
        let sealed = try sealer.seal(SecureBytes(bytes), kind: Self.relaySequenceKind, id: slot)
        try storage.write([SealedRecordChange(kind: Self.relaySequenceKind, id: slot, sealed: sealed)])
    }
}
