import Foundation
import OrchardCrypto
import OrchardFixtures
import RelayAPI
import SecureElement
import Testing

/// Proximity advertisements: their bytes, their encryption under a device's advertising key, and
/// the tracker that counts what a device hears.
@Suite("Proximity advertisements")
struct ProximityTests {
    static let wall: UInt64 = 1_790_000_000_000
    static let phoneKey = SymmetricKey(SecureBytes(Array(repeating: 0x11, count: 32)))
    static let macKey = SymmetricKey(SecureBytes(Array(repeating: 0x22, count: 32)))

    static func advert(
        _ counter: UInt64, kind: String = "mac", key: SymmetricKey = macKey, seed: String = "advert"
    ) throws -> ProximityAdvertisement {
        try ProximityCipher.seal(
            ProximityAdvertisement.Body(counter: counter, kind: kind), key: key, identifier: [1, 2, 3, 4, 5, 6],
            random: InsecureDeterministicRandom(seed: Array(seed.utf8)))
    }

    @Test("An advertisement is 46 bytes: magic, version, rotating identifier, IV, sealed body; nothing in clear")
    func layout() throws {
        let advert = try Self.advert(Self.wall)
        let bytes = advert.encoded
        #expect(bytes.count == 46 && ProximityAdvertisement.byteCount == 46)
        #expect(Array(bytes[0..<9]) == [0x4F, 0x50, 0x01, 1, 2, 3, 4, 5, 6])
        #expect(try ProximityAdvertisement(parsing: bytes) == advert)
        let body = ProximityAdvertisement.Body(counter: Self.wall, kind: "mac")
        #expect(body.encoded == [0, 0, 0x01, 0xA0, 0xC4, 0x50, 0x6C, 0x00, 3])
        #expect(try ProximityAdvertisement.Body(parsing: body.encoded) == body)
        #expect(ProximityCipher.open(advert, key: Self.macKey) == body)
        // The counter's bytes do not appear in clear.
        #expect(!bytes.indices.dropLast(7).contains { Array(bytes[$0..<($0 + 8)]) == Array(body.encoded.prefix(8)) })
        for bad in [
            [UInt8](), Array(bytes.dropLast()), bytes + [0], [0x4F, 0x51] + bytes.dropFirst(2),
            Array(bytes.prefix(2)) + [2] + bytes.dropFirst(3),
        ] {
            #expect(throws: ProximityAdvertisement.FormatError.self) { try ProximityAdvertisement(parsing: bad) }
        }
        #expect(throws: ProximityAdvertisement.FormatError.self) {
            try ProximityAdvertisement.Body(parsing: [0, 0, 0, 0, 0, 0, 0, 1, 9])
        }
    }

    @Test("The Handoff messages' JSON is pinned: what one device writes, the other reads")
    func handoffMessages() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let card = HandoffCard(
            identifier: String(repeating: "ab", count: 16), network: "visa", type: "credit",
            displayName: "Orchard Bank Visa", suffix: "1111")
        let messages = [
            HandoffMessage(kind: .advertisingKey, advertisingKey: [1, 2]),
            HandoffMessage(kind: .discoveryRequest, requestID: "r1"),
            HandoffMessage(kind: .discoveryAnswer, requestID: "r1", deviceKind: "phone", cards: [card]),
            HandoffMessage(kind: .discoveryAnswer, requestID: "r1", deviceKind: "watch", refusal: "off"),
            {
                var request = HandoffMessage(kind: .paymentRequest, requestID: "p1", card: "c1", domain: "d")
                request.awaitsVerdict = true
                return request
            }(),
            HandoffMessage(kind: .paymentCancel, requestID: "p1", refusal: "the page aborted its session"),
            {
                var complete = HandoffMessage(kind: .paymentComplete, requestID: "p1")
                complete.verdict = "success"
                return complete
            }(),
        ]
        let pinned = [
            #"{"advertisingKey":[1,2],"kind":"advertising-key"}"#,
            #"{"kind":"discovery-request","requestID":"r1"}"#,
            #"{"cards":[{"displayName":"Orchard Bank Visa","identifier":"abababababababababababababababab","#
                + #""network":"visa","suffix":"1111","type":"credit"}],"deviceKind":"phone","#
                + #""kind":"discovery-answer","requestID":"r1"}"#,
            #"{"deviceKind":"watch","kind":"discovery-answer","refusal":"off","requestID":"r1"}"#,
            #"{"awaitsVerdict":true,"card":"c1","domain":"d","kind":"payment-request","requestID":"p1"}"#,
            #"{"kind":"payment-cancel","refusal":"the page aborted its session","requestID":"p1"}"#,
            #"{"kind":"payment-complete","requestID":"p1","verdict":"success"}"#,
        ]
        for (message, json) in zip(messages, pinned) {
            #expect(String(decoding: try encoder.encode(message), as: UTF8.self) == json)
            #expect(try JSONDecoder().decode(HandoffMessage.self, from: Data(json.utf8)) == message)
        }
        #expect(throws: (any Error).self) {
            try JSONDecoder().decode(HandoffMessage.self, from: Data(#"{"kind":"unknown-kind"}"#.utf8))
        }
    }

    @Test("H3: A heard advertisement counts once: its replay, an older one and a changed byte are ignored")
    func replayIgnored() throws {
        var tracker = ProximityTracker(windowMilliseconds: 5000)
        let keys = ["phone": Self.phoneKey, "mac": Self.macKey]
        let first = try Self.advert(Self.wall).encoded
        #expect(tracker.hear(first, keys: keys, wall: Self.wall, monotonic: 1000) == .counted(device: "mac"))
        #expect(tracker.near(at: 1000).map(\.device) == ["mac"])
        #expect(tracker.near(at: 1000).first?.kind == "mac")
        // The same bytes again, even much later: replayed.
        #expect(tracker.hear(first, keys: keys, wall: Self.wall + 10, monotonic: 7000) == .replayed(device: "mac"))
        #expect(tracker.near(at: 7000).isEmpty)
        // An older counter sealed anew: replayed.
        let older = try Self.advert(Self.wall - 1, seed: "older").encoded
        #expect(tracker.hear(older, keys: keys, wall: Self.wall, monotonic: 7000) == .replayed(device: "mac"))
        // Every changed byte: no key opens it.
        let next = try Self.advert(Self.wall + 100, seed: "next").encoded
        for index in next.indices {
            var changed = next
            changed[index] ^= 0x01
            #expect(tracker.hear(changed, keys: keys, wall: Self.wall + 100, monotonic: 7000) == .foreign)
        }
        #expect(tracker.near(at: 7000).isEmpty)
        #expect(tracker.hear(next, keys: keys, wall: Self.wall + 100, monotonic: 7000) == .counted(device: "mac"))
        #expect(tracker.near(at: 7000).map(\.device) == ["mac"])
    }

    @Test(
        "H3: An advertisement recorded elsewhere and played later is stale, even to a device that never heard it or restarted"
    )
    func staleIgnored() throws {
        var tracker = ProximityTracker(windowMilliseconds: 5000)
        let keys = ["mac": Self.macKey]
        let recorded = try Self.advert(Self.wall).encoded
        #expect(tracker.hear(recorded, keys: keys, wall: Self.wall + 5001, monotonic: 1) == .stale(device: "mac"))
        #expect(tracker.hear(recorded, keys: keys, wall: Self.wall - 5001, monotonic: 1) == .stale(device: "mac"))
        #expect(tracker.near(at: 1).isEmpty)
        #expect(tracker.hear(recorded, keys: keys, wall: Self.wall + 4999, monotonic: 1) == .counted(device: "mac"))
        // A device that restarted (a new tracker) counts nothing sent before it started, though within the window.
        var restarted = ProximityTracker(windowMilliseconds: 5000, notBefore: Self.wall + 1000)
        #expect(restarted.hear(recorded, keys: keys, wall: Self.wall + 1000, monotonic: 2) == .stale(device: "mac"))
        let fresh = try Self.advert(Self.wall + 1001, seed: "fresh").encoded
        #expect(restarted.hear(fresh, keys: keys, wall: Self.wall + 1001, monotonic: 2) == .counted(device: "mac"))
    }

    @Test("A foreign device's advertisement, or junk, is ignored; nearness ends with the window and with a move")
    func foreignAndWindow() throws {
        var tracker = ProximityTracker(windowMilliseconds: 5000)
        let keys = ["mac": Self.macKey]
        let stranger = SymmetricKey(SecureBytes(Array(repeating: 0x33, count: 32)))
        #expect(
            tracker.hear(try Self.advert(Self.wall, key: stranger).encoded, keys: keys, wall: Self.wall, monotonic: 10)
                == .foreign)
        #expect(tracker.hear([], keys: keys, wall: Self.wall, monotonic: 10) == .foreign)
        #expect(tracker.hear(Array(repeating: 0x4F, count: 46), keys: keys, wall: Self.wall, monotonic: 10) == .foreign)
        #expect(
            tracker.hear(try Self.advert(Self.wall).encoded, keys: keys, wall: Self.wall, monotonic: 10)
                == .counted(device: "mac"))
        #expect(tracker.near(at: 5010).count == 1)
        #expect(tracker.near(at: 5011).isEmpty)
        tracker.forgetNearby()
        #expect(tracker.near(at: 10).isEmpty)
        // Its counter is still remembered: the old advertisement stays a replay after the move.
        #expect(
            tracker.hear(try Self.advert(Self.wall).encoded, keys: keys, wall: Self.wall, monotonic: 20)
                == .replayed(device: "mac"))
    }

    @Test("The Secure Enclave makes its advertising key once, keeps it sealed, and records the peers' keys")
    func keys() async throws {
        let phone = try await Harness(seed: "phone")
        let key = try await phone.enclave.advertisingKey()
        #expect(key.byteCount == 32)
        #expect(try await phone.enclave.advertisingKey() == key)
        let restarted = try phone.restarted()
        #expect(try await restarted.enclave.advertisingKey() == key)
        try await restarted.enclave.recordAdvertisingKey(Self.macKey, of: "mac")
        #expect(try await restarted.enclave.peerAdvertisingKeys() == ["mac": Self.macKey])
        await #expect(throws: SecureElementError.self) {
            try await restarted.enclave.recordAdvertisingKey(SymmetricKey(SecureBytes([1, 2, 3])), of: "mac")
        }
        let own = key.bytes.unsafeCopyOfBytes()
        #expect(!restarted.enclaveStorage.allSealedBytes.contains { RelayTests.contains($0, own) })
    }
}

/// Replays Tests/Fixtures/fuzz-regressions/FuzzProximityAdvertisement through what the fuzz target drives.
@Suite("Proximity advertisement fuzz regressions")
struct ProximityFuzzRegressionTests {
    @Test("F1: the proximity advertisement fuzz corpus gives typed errors; the one valid advertisement round-trips")
    func advertisementInputs() throws {
        let directory = "fuzz-regressions/FuzzProximityAdvertisement"
        let names = try FileManager.default.contentsOfDirectory(atPath: Fixtures.path(directory)).sorted()
        #expect(names.count >= 12)
        for name in names {
            let bytes = Array(try Fixtures.data("\(directory)/\(name)"))
            if name == "valid" {
                #expect(try ProximityAdvertisement(parsing: bytes).encoded == bytes)
            } else {
                #expect(throws: ProximityAdvertisement.FormatError.self, "\(name)") {
                    try ProximityAdvertisement(parsing: bytes)
                }
            }
        }
    }
}
