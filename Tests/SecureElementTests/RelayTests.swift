import Foundation
import OrchardCrypto
import RelayAPI
import SecureElement
import Testing

/// The relay's per-device encryption in the Secure Enclave: frames sealed to one device's key
/// and signed by the sender's, checked in order.
@Suite("Relay frames")
struct RelayTests {
    static func peer(_ id: String, _ harness: Harness) async throws -> RelayPeer {
        RelayPeer(deviceID: id, keys: try await harness.enclave.relayPublicKeys())
    }

    static func text(_ message: RelayMessage) -> String {
        String(decoding: message.plaintext.unsafeCopyOfBytes(), as: UTF8.self)
    }

    @Test("The Secure Enclave makes its relay keys once and keeps them across a restart")
    func keysPersist() async throws {
        let phone = try await Harness(seed: "phone")
        let keys = try await phone.enclave.relayPublicKeys()
        #expect(try await phone.enclave.relayPublicKeys() == keys)
        #expect(try await phone.restarted().enclave.relayPublicKeys() == keys)
        #expect(keys.encryption.x963Representation != keys.signing.x963Representation)
        // The private halves are sealed at rest: no stored record holds a public key's X coordinate either.
        let x = Array(keys.encryption.x963Representation[1...32])
        #expect(!phone.enclaveStorage.allSealedBytes.contains { Self.contains($0, x) })
    }

    @Test("A frame opens on its recipient, from its sender, and its bytes parse back to themselves")
    func roundTrip() async throws {
        let mac = try await Harness(.mac, .touch, seed: "mac")
        let phone = try await Harness(seed: "phone")
        let frame = try await mac.enclave.sealRelayMessage(
            SecureBytes(Array("hello phone".utf8)), from: "mac-1", to: try await Self.peer("phone-1", phone))
        #expect(frame.header == RelayFrame.Header(sender: "mac-1", recipient: "phone-1", sequence: 1))
        #expect(try RelayFrame(parsing: frame.encoded) == frame)
        #expect(!Self.contains(frame.encoded, Array("hello phone".utf8)))
        let message = try await phone.enclave.openRelayMessage(
            try RelayFrame(parsing: frame.encoded), to: "phone-1", from: try await Self.peer("mac-1", mac))
        #expect(Self.text(message) == "hello phone")
        #expect(message.sender == "mac-1" && message.sequence == 1)
    }

    @Test("H1: Only the recipient device's key opens a frame: not another device's, not any other key")
    func onlyRecipient() async throws {
        let mac = try await Harness(.mac, .touch, seed: "mac")
        let phone = try await Harness(seed: "phone")
        let other = try await Harness(seed: "other-account")
        let frame = try await mac.enclave.sealRelayMessage(
            SecureBytes(Array("for the phone".utf8)), from: "mac-1", to: try await Self.peer("phone-1", phone))
        let macPeer = try await Self.peer("mac-1", mac)
        // Another device refuses a frame not addressed to it…
        await #expect(throws: SecureElementError(.invalidRelayFrame, "")) {
            try await other.enclave.openRelayMessage(frame, to: "other-1", from: macPeer)
        }
        // …and with the header rewritten to name it, the signature fails; re-signed would not help either: the
        // tag fails under any key but the recipient's.
        let readdressed = RelayFrame(
            header: RelayFrame.Header(sender: "mac-1", recipient: "other-1", sequence: 1),
            ephemeralKey: frame.ephemeralKey, sealed: frame.sealed, signature: frame.signature)
        await #expect(throws: SecureElementError(.invalidRelayFrame, "")) {
            try await other.enclave.openRelayMessage(readdressed, to: "other-1", from: macPeer)
        }
        for _ in 0..<8 {
            let stranger = try P256.KeyAgreement.PrivateKey()
            #expect(throws: SecureElementError(.invalidRelayFrame, "")) {
                try RelayCipher.open(frame, recipientKey: stranger, senderSigningKey: macPeer.keys.signing)
            }
        }
    }

    @Test("H2: Every changed byte of a frame is refused, and nothing is accepted from it")
    func tampered() async throws {
        let mac = try await Harness(.mac, .touch, seed: "mac")
        let phone = try await Harness(seed: "phone")
        let phonePeer = try await Self.peer("phone-1", phone)
        let macPeer = try await Self.peer("mac-1", mac)
        let frame = try await mac.enclave.sealRelayMessage(
            SecureBytes(Array("pay 12.34 EUR".utf8)), from: "mac-1", to: phonePeer)
        let bytes = frame.encoded
        for index in bytes.indices {
            var changed = bytes
            changed[index] ^= 0x01
            guard let parsed = try? RelayFrame(parsing: changed) else { continue }
            await #expect(throws: SecureElementError.self, "byte \(index)") {
                try await phone.enclave.openRelayMessage(parsed, to: "phone-1", from: macPeer)
            }
        }
        // A frame signed by a key other than the sender's directory key is refused.
        let impostor = try await Harness(.mac, .touch, seed: "impostor")
        let forged = try await impostor.enclave.sealRelayMessage(
            SecureBytes(Array("pay 99.00 EUR".utf8)), from: "mac-1", to: phonePeer)
        await #expect(throws: SecureElementError(.invalidRelayFrame, "")) {
            try await phone.enclave.openRelayMessage(forged, to: "phone-1", from: macPeer)
        }
        // The untouched frame still opens: the refusals above changed nothing.
        let message = try await phone.enclave.openRelayMessage(frame, to: "phone-1", from: macPeer)
        #expect(Self.text(message) == "pay 12.34 EUR")
    }

    @Test("H2: A replayed or reordered frame is refused, also after both devices restart")
    func replayedAndReordered() async throws {
        let mac = try await Harness(.mac, .touch, seed: "mac")
        let phone = try await Harness(seed: "phone")
        let phonePeer = try await Self.peer("phone-1", phone)
        let macPeer = try await Self.peer("mac-1", mac)
        var frames: [RelayFrame] = []
        for index in 1...3 {
            frames.append(
                try await mac.enclave.sealRelayMessage(
                    SecureBytes(Array("message \(index)".utf8)), from: "mac-1", to: phonePeer))
        }
        #expect(frames.map(\.header.sequence) == [1, 2, 3])
        _ = try await phone.enclave.openRelayMessage(frames[0], to: "phone-1", from: macPeer)
        _ = try await phone.enclave.openRelayMessage(frames[2], to: "phone-1", from: macPeer)
        await #expect(throws: SecureElementError(.relayFrameReplayed, "")) {
            try await phone.enclave.openRelayMessage(frames[1], to: "phone-1", from: macPeer)
        }
        await #expect(throws: SecureElementError(.relayFrameReplayed, "")) {
            try await phone.enclave.openRelayMessage(frames[2], to: "phone-1", from: macPeer)
        }
        let restartedPhone = try phone.restarted()
        await #expect(throws: SecureElementError(.relayFrameReplayed, "")) {
            try await restartedPhone.enclave.openRelayMessage(frames[2], to: "phone-1", from: macPeer)
        }
        // The sender's counter survives its restart: the next frame is 4, and it is accepted.
        let next = try await mac.restarted().enclave.sealRelayMessage(
            SecureBytes(Array("message 4".utf8)), from: "mac-1", to: phonePeer)
        #expect(next.header.sequence == 4)
        #expect(
            Self.text(try await restartedPhone.enclave.openRelayMessage(next, to: "phone-1", from: macPeer))
                == "message 4")
        // Sequences are per pair: the phone's first frame to the mac is 1.
        #expect(
            try await phone.enclave.sealRelayMessage(SecureBytes([1]), from: "phone-1", to: macPeer).header.sequence
                == 1)
    }

    @Test("A malformed frame does not parse: version, truncation, trailing bytes, empty device ID")
    func malformed() async throws {
        let mac = try await Harness(.mac, .touch, seed: "mac")
        let phone = try await Harness(seed: "phone")
        let bytes = try await mac.enclave.sealRelayMessage(
            SecureBytes([1, 2, 3]), from: "mac-1", to: try await Self.peer("phone-1", phone)
        ).encoded
        #expect(throws: RelayFrame.FormatError.self) { try RelayFrame(parsing: [2] + bytes.dropFirst()) }
        #expect(throws: RelayFrame.FormatError.self) { try RelayFrame(parsing: Array(bytes.dropLast())) }
        #expect(throws: RelayFrame.FormatError.self) { try RelayFrame(parsing: bytes + [0]) }
        #expect(throws: RelayFrame.FormatError.self) { try RelayFrame(parsing: [1, 0] + bytes.dropFirst(7)) }
        #expect(throws: RelayFrame.FormatError.self) { try RelayFrame(parsing: []) }
    }

    @Test("Mutated and random frames parse or are refused with a typed error, never a trap (frame parser property)")
    func mutations() async throws {
        let mac = try await Harness(.mac, .touch, seed: "mac")
        let phone = try await Harness(seed: "phone")
        let valid = try await mac.enclave.sealRelayMessage(
            SecureBytes(Array("property".utf8)), from: "mac-1", to: try await Self.peer("phone-1", phone)
        ).encoded
        let random = InsecureDeterministicRandom(seed: Array("relay-frame-mutations".utf8))
        var parsed = 0
        for round in 0..<5000 {
            var bytes = valid
            let choice = random.bytes(4)
            switch round % 4 {
            case 0: bytes[Int(choice[0]) % bytes.count] = choice[1]
            case 1: bytes = Array(bytes.prefix(Int(UInt16(choice[0]) << 8 | UInt16(choice[1])) % (bytes.count + 1)))
            case 2: bytes.insert(choice[1], at: Int(choice[0]) % bytes.count)
            default: bytes = random.bytes(Int(choice[0]))
            }
            if let frame = try? RelayFrame(parsing: bytes) {
                parsed += 1
                #expect(frame.encoded == bytes)
            }
        }
        #expect(parsed > 0)
        #expect(
            RelayFrame.Header(sender: String(repeating: "a", count: 300), recipient: "b", sequence: 1).encoded.count
                == 267)
    }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, haystack.count >= needle.count else { return false }
        return (0...(haystack.count - needle.count)).contains { Array(haystack[$0..<($0 + needle.count)]) == needle }
    }
}
