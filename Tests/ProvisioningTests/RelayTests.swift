import Device
import DeviceControlAPI
import DeviceProcess
import Foundation
import OrchardCrypto
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import OrchardStore
import PayClient
import PayServer
import RelayAPI
import SecureElement
import Testing

/// The relay between a user's devices through the running Pay server: keys from each device's Secure
/// Enclave in the account's directory, frames queued durably and delivered by long poll.
@Suite("Relay through the Pay server", .serialized)
struct RelayEndToEndTests {
    /// Registers `name` and publishes its relay keys.
    static func join(
        _ sandbox: Sandbox, _ name: String, kind: DeviceKind, biometry: Biometry, account: String = "demo"
    ) async throws -> (Device, DeviceRelay) {
        let device = try await sandbox.makeDevice(name, kind: kind, biometry: biometry, account: account)
        try await sandbox.register(name)
        let client = try sandbox.client(name)
        let relay = DeviceRelay(deviceID: name, client: client, enclave: device.secureEnclave)
        try await relay.publishKeys()
        return (device, relay)
    }

    static let passcode = SecureBytes(Array("123456".utf8))

    /// The users of both devices approve each other: each vouches for the keys the other shows it.
    static func approve(_ a: (Device, DeviceRelay), _ b: (Device, DeviceRelay)) async throws {
        try await a.1.approve(b.1.deviceID, keys: try await b.0.secureEnclave.relayPublicKeys(), passcode: passcode)
        try await b.1.approve(a.1.deviceID, keys: try await a.0.secureEnclave.relayPublicKeys(), passcode: passcode)
    }

    static func text(_ message: RelayMessage) -> String {
        String(decoding: message.plaintext.unsafeCopyOfBytes(), as: UTF8.self)
    }

    static func bytes(_ text: String) -> SecureBytes { SecureBytes(Array(text.utf8)) }

    @Test("Two devices of one account exchange messages through the running Pay server, the receiver long-polling")
    func exchange() async throws {
        let sandbox = try await Sandbox()
        let phoneJoined = try await Self.join(sandbox, "phone", kind: .phone, biometry: .face)
        let macJoined = try await Self.join(sandbox, "mac", kind: .mac, biometry: .touch)
        let (phone, mac) = (phoneJoined.1, macJoined.1)
        // Before the users approve, neither device trusts the other's keys: the mac joined, the phone is alerted.
        #expect(try await phone.trust().unvouched == ["mac"])
        await #expect(throws: PayClientError.self) { try await mac.send(Self.bytes("too early"), to: "phone") }
        try await Self.approve(phoneJoined, macJoined)
        #expect(try await phone.trust().trusted.map(\.deviceID) == ["mac"])
        #expect(try await phone.trust().unvouched.isEmpty)
        #expect(try await phone.peers().map(\.deviceID) == ["mac"])
        #expect(try await sandbox.client("mac").relayDirectory().devices.map(\.deviceID) == ["mac", "phone"])
        // Publishing again is idempotent.
        #expect(try await phone.publishKeys().deviceID == "phone")

        // The phone waits first; the mac's frame ends its wait.
        let waiting = Task { try await phone.receive(after: 0, waitSeconds: 10) }
        try await mac.send(Self.bytes("payment request: 12.34 EUR at shop.example"), to: "phone")
        let receipt = try await waiting.value
        #expect(receipt.refused.isEmpty)
        #expect(receipt.accepted.map(Self.text) == ["payment request: 12.34 EUR at shop.example"])
        #expect(receipt.accepted.first?.sender == "mac")

        try await phone.send(Self.bytes("authorized"), to: "mac")
        try await phone.send(Self.bytes("token follows"), to: "mac")
        let answer = try await mac.receive(after: 0, waitSeconds: 0)
        #expect(answer.accepted.map(Self.text) == ["authorized", "token follows"])
        #expect(answer.accepted.map(\.sequence) == [1, 2])
        // Acknowledged frames are gone from the queue.
        #expect(try await mac.receive(after: answer.lastID, waitSeconds: 0).accepted.isEmpty)
        #expect(try await phone.receive(after: receipt.lastID, waitSeconds: 0).accepted.isEmpty)
        await sandbox.close()
    }

    @Test("H1: No key the Pay server owns opens a queued frame, and its files hold no plaintext")
    func payServerCannotRead() async throws {
        let sandbox = try await Sandbox()
        let phoneJoined = try await Self.join(sandbox, "phone", kind: .phone, biometry: .face)
        let macJoined = try await Self.join(sandbox, "mac", kind: .mac, biometry: .touch)
        try await Self.approve(phoneJoined, macJoined)
        let (phone, mac) = (phoneJoined.1, macJoined.1)
        let secret = "ship to 1 Orchard Lane, Springfield"
        try await mac.send(Self.bytes(secret), to: "phone")
        for (path, bytes) in try sandbox.files() {
            #expect(!Sandbox.contains(bytes, Array(secret.utf8)), "\(path) holds the plaintext")
        }
        let inbox = try await sandbox.client("phone").receiveRelayFrames(after: 0, waitSeconds: 0)
        let frame = try RelayFrame(parsing: Array(try #require(Data(base64Encoded: inbox.messages[0].frame))))
        let macKeys = try #require(try await phone.peers().first).keys
        let payKeys = [
            PayService.Files.tokenRoot, PayService.Files.tokenIntegrationCA, PayService.Files.tokenSigning,
            PayService.Files.merchantCA, PayService.Files.client, "pay-tls",
        ]
        for name in payKeys {
            let pem = try sandbox.deployment.readPrivateKey(named: name)
            let key = try pem.withUnsafeBytes {
                try P256.KeyAgreement.PrivateKey(pemRepresentation: String(decoding: $0, as: UTF8.self))
            }
            #expect(throws: SecureElementError(.invalidRelayFrame, ""), "pki/\(name).key opened the frame") {
                _ = try RelayCipher.open(frame, recipientKey: key, senderSigningKey: macKeys.signing)
            }
        }
        // The phone itself opens it.
        #expect(try await phone.receive(after: 0, waitSeconds: 0).accepted.map(Self.text) == [secret])
        await sandbox.close()
    }

    @Test("H1: A device of another account sees no key of the account, cannot send to it or as it, receives nothing")
    func otherAccount() async throws {
        let sandbox = try await Sandbox()
        let phoneJoined = try await Self.join(sandbox, "phone", kind: .phone, biometry: .face)
        let macJoined = try await Self.join(sandbox, "mac", kind: .mac, biometry: .touch)
        try await Self.approve(phoneJoined, macJoined)
        let (phoneDevice, phone, mac) = (phoneJoined.0, phoneJoined.1, macJoined.1)
        let (intruderDevice, intruder) = try await Self.join(
            sandbox, "intruder", kind: .mac, biometry: .touch, account: "mallory")
        let intruderClient = try sandbox.client("intruder")
        #expect(try await intruderClient.relayDirectory().devices.map(\.deviceID) == ["intruder"])
        #expect(try await intruder.peers().isEmpty)

        // Even with the phone's keys in hand, the Pay server does not queue a frame across accounts…
        let phonePeer = RelayPeer(deviceID: "phone", keys: try await phoneDevice.secureEnclave.relayPublicKeys())
        let across = try await intruderDevice.secureEnclave.sealRelayMessage(
            Self.bytes("hello"), from: "intruder", to: phonePeer)
        await #expect(throws: PayClientError.self) { try await intruderClient.sendRelayFrame(across) }
        // …nor one whose header names another device as its sender.
        let spoofed = try await intruderDevice.secureEnclave.sealRelayMessage(
            Self.bytes("from the mac"), from: "mac", to: phonePeer)
        do {
            _ = try await intruderClient.sendRelayFrame(spoofed)
            Issue.record("a frame sent as another device was queued")
        } catch {
            #expect(error.httpStatus == 403)
        }
        // Publishing other keys over a device's keys is refused.
        let replacement = RelayPublicKeys(
            encryption: try P256.KeyAgreement.PrivateKey().publicKey, signing: try P256.Signing.PrivateKey().publicKey)
        await #expect(throws: PayClientError.self) { try await sandbox.client("phone").publishRelayKeys(replacement) }

        try await mac.send(Self.bytes("for the phone only"), to: "phone")
        #expect(try await intruderClient.receiveRelayFrames(after: 0, waitSeconds: 0).messages.isEmpty)
        #expect(try await phone.receive(after: 0, waitSeconds: 0).accepted.map(Self.text) == ["for the phone only"])
        await sandbox.close()
    }

    @Test("H2: A frame the relay replays, reorders or alters is refused by the recipient device")
    func relayTampering() async throws {
        let sandbox = try await Sandbox()
        let phoneJoined = try await Self.join(sandbox, "phone", kind: .phone, biometry: .face)
        let macJoined = try await Self.join(sandbox, "mac", kind: .mac, biometry: .touch)
        try await Self.approve(phoneJoined, macJoined)
        let (phoneDevice, phone, macDevice) = (phoneJoined.0, phoneJoined.1, macJoined.0)
        let macClient = try sandbox.client("mac")
        let phonePeer = RelayPeer(deviceID: "phone", keys: try await phoneDevice.secureEnclave.relayPublicKeys())
        var frames: [RelayFrame] = []
        for text in ["first", "second", "third"] {
            frames.append(
                try await macDevice.secureEnclave.sealRelayMessage(Self.bytes(text), from: "mac", to: phonePeer))
        }
        // Queued out of order, the third once more, and the first with one ciphertext byte changed.
        var altered = frames[0].sealed
        altered[0] ^= 0x80
        let changed = RelayFrame(
            header: frames[0].header, ephemeralKey: frames[0].ephemeralKey, sealed: altered,
            signature: frames[0].signature)
        for frame in [changed, frames[0], frames[2], frames[1], frames[2]] {
            _ = try await macClient.sendRelayFrame(frame)
        }
        let receipt = try await phone.receive(after: 0, waitSeconds: 0)
        #expect(receipt.accepted.map(Self.text) == ["first", "third"])
        #expect(
            receipt.refused.map(\.error.code) == [
                SecureElementError.Code.invalidRelayFrame, .relayFrameReplayed, .relayFrameReplayed,
            ])
        await sandbox.close()
    }

    @Test("H1: A key the directory substitutes is refused by senders and reported by the device it belongs to")
    func substitutedKey() async throws {
        let sandbox = try await Sandbox()
        let phoneJoined = try await Self.join(sandbox, "phone", kind: .phone, biometry: .face)
        let macJoined = try await Self.join(sandbox, "mac", kind: .mac, biometry: .touch)
        try await Self.approve(phoneJoined, macJoined)
        let (phone, mac) = (phoneJoined.1, macJoined.1)
        try await mac.send(Self.bytes("before"), to: "phone")
        // The directory swaps the phone's keys for keys it holds (written to pay.sqlite beside the running server).
        let store = try PayStore.open(in: sandbox.deployment)
        let encryption = try P256.KeyAgreement.PrivateKey().publicKey.x963Representation
        let signing = try P256.Signing.PrivateKey().publicKey.x963Representation
        try await store.write { db in
            try db.execute(
                "UPDATE relay_keys SET encryption_key = ?, signing_key = ? WHERE device_id = 'phone'",
                [.blob(encryption), .blob(signing)])
        }
        await store.close()
        let macTrust = try await mac.trust()
        #expect(macTrust.unvouched == ["phone"] && macTrust.trusted.isEmpty)
        do {
            try await mac.send(Self.bytes("after"), to: "phone")
            Issue.record("the mac sent to a substituted key")
        } catch let error as PayClientError {
            #expect(error.code == .untrustedRelayKey)
        }
        #expect(try await phone.trust().ownKeysSubstituted)
        await #expect(throws: PayClientError.self) { try await phone.send(Self.bytes("reply"), to: "mac") }
        await sandbox.close()
    }

    @Test(
        "A device that joins unapproved is an alert and gets nothing; approved with the passcode, trust is transitive")
    func joinAndApprove() async throws {
        let sandbox = try await Sandbox()
        let phoneJoined = try await Self.join(sandbox, "phone", kind: .phone, biometry: .face)
        let macJoined = try await Self.join(sandbox, "mac", kind: .mac, biometry: .touch)
        try await Self.approve(phoneJoined, macJoined)
        let watchJoined = try await Self.join(sandbox, "watch", kind: .watch, biometry: .none)
        let (phone, mac, watch) = (phoneJoined.1, macJoined.1, watchJoined.1)
        #expect(try await mac.trust().unvouched == ["watch"])
        #expect(try await phone.trust().unvouched == ["watch"])
        await #expect(throws: PayClientError.self) { try await mac.send(Self.bytes("hi watch"), to: "watch") }
        // The watch's frame reaches the phone's queue, and the phone refuses it.
        let phonePeer = RelayPeer(
            deviceID: "phone", keys: try await phoneJoined.0.secureEnclave.relayPublicKeys())
        let frame = try await watchJoined.0.secureEnclave.sealRelayMessage(
            Self.bytes("unapproved"), from: "watch", to: phonePeer)
        _ = try await sandbox.client("watch").sendRelayFrame(frame)
        let receipt = try await phone.receive(after: 0, waitSeconds: 0)
        #expect(receipt.accepted.isEmpty && receipt.refused.count == 1)
        // A wrong passcode on the phone vouches for nothing.
        let watchKeys = try await watchJoined.0.secureEnclave.relayPublicKeys()
        await #expect(throws: SecureElementError(.passcodeIncorrect, "")) {
            try await phone.approve("watch", keys: watchKeys, passcode: SecureBytes(Array("000000".utf8)))
        }
        #expect(try await mac.trust().unvouched == ["watch"])
        // Approved on the phone, the watch is trusted by the mac too (mac → phone → watch).
        try await Self.approve(phoneJoined, watchJoined)
        #expect(try await mac.trust().trusted.map(\.deviceID) == ["phone", "watch"])
        try await mac.send(Self.bytes("hi watch"), to: "watch")
        #expect(try await watch.receive(after: 0, waitSeconds: 0).accepted.map(Self.text) == ["hi watch"])
        await sandbox.close()
    }

    @Test("Every device is alerted once when a device joins unapproved, and when its own keys are substituted")
    func joinAlerts() async throws {
        let sandbox = try await Sandbox()
        let phoneJoined = try await Self.join(sandbox, "phone", kind: .phone, biometry: .face)
        let macJoined = try await Self.join(sandbox, "mac", kind: .mac, biometry: .touch)
        try await Self.approve(phoneJoined, macJoined)
        let alerts = RelayJoinAlerts()
        let phoneClient = try sandbox.client("phone")
        #expect(await alerts.check(device: phoneJoined.0, client: phoneClient).isEmpty)
        let watchJoined = try await Self.join(sandbox, "watch", kind: .watch, biometry: .none)
        let shown = await alerts.check(device: phoneJoined.0, client: phoneClient)
        #expect(shown.count == 1 && shown[0].contains("device watch joined account demo"), "\(shown)")
        #expect(await alerts.check(device: phoneJoined.0, client: phoneClient).isEmpty)  // once
        // The control API shows what the process's sync showed.
        let control = DeviceControl(device: phoneJoined.0, relayAlerts: alerts)
        #expect(try await control.send(GetRelayAlerts()).get().alerts == shown)
        #expect(try await DeviceControl(device: phoneJoined.0).send(GetRelayAlerts()).get().alerts.isEmpty)
        #expect(await RelayJoinAlerts().check(device: macJoined.0, client: try sandbox.client("mac")).count == 1)
        try await Self.approve(phoneJoined, watchJoined)
        #expect(await RelayJoinAlerts().check(device: macJoined.0, client: try sandbox.client("mac")).isEmpty)

        let store = try PayStore.open(in: sandbox.deployment)
        let encryption = try P256.KeyAgreement.PrivateKey().publicKey.x963Representation
        try await store.write { db in
            try db.execute(
                "UPDATE relay_keys SET encryption_key = ? WHERE device_id = 'phone'", [.blob(encryption)])
        }
        await store.close()
        let substituted = await alerts.check(device: phoneJoined.0, client: phoneClient)
        #expect(substituted.contains { $0.contains("other relay keys for phone") }, "\(substituted)")
        await sandbox.close()
    }

    @Test("Bad relay requests are refused with a typed error and change nothing")
    func badRequests() async throws {
        let sandbox = try await Sandbox()
        let phoneJoined = try await Self.join(sandbox, "phone", kind: .phone, biometry: .face)
        let macJoined = try await Self.join(sandbox, "mac", kind: .mac, biometry: .touch)
        try await Self.approve(phoneJoined, macJoined)
        _ = try await Self.join(sandbox, "intruder", kind: .mac, biometry: .touch, account: "mallory")
        let phone = try sandbox.client("phone")
        let identity = try Device.clientIdentity(of: "phone", in: sandbox.deployment)
        let raw = try HTTPClient(
            configuration: HTTPClientConfiguration(
                trustedRootsPEM: sandbox.connections.rootCertificatePEM,
                clientCertificateChainPEM: identity.certificateChainPEM, clientPrivateKeyPEM: identity.privateKeyPEM))
        defer { raw.shutdown() }
        let base = try sandbox.connections.baseURL(of: .pay)
        for query in ["?wait=31", "?wait=-1", "?after=-1", "?after=x"] {
            let answer = try await raw.send(HTTPClientRequest(url: base + RelayAPI.Route.messages + query))
            #expect(answer.status.code == 400 && answer.errorBody?.code == "invalidRequest", "\(query)")
        }
        let garbage = try await raw.send(
            try HTTPClientRequest.json(.post, base + RelayAPI.Route.messages, RelaySendRequest(frame: "AQID")))
        #expect(garbage.status.code == 400)

        func refused(_ status: Int, _ body: () async throws -> Void) async {
            do {
                try await body()
                Issue.record("accepted")
            } catch {
                #expect((error as? PayClientError)?.httpStatus == status, "\(error)")
            }
        }
        let macKeys = try await macJoined.0.secureEnclave.relayPublicKeys()
        let phoneEnclave = phoneJoined.0.secureEnclave
        let toNobody = try await phoneEnclave.sealRelayMessage(
            Self.bytes("x"), from: "phone", to: RelayPeer(deviceID: "nobody", keys: macKeys))
        await refused(404) { _ = try await phone.sendRelayFrame(toNobody) }
        await refused(400) { _ = try await phone.vouchRelayKeys(of: "mac", signature: [0x30, 0x00]) }
        let vouchForOther = try await phoneEnclave.vouchForRelayDevice(
            RelayPeer(deviceID: "intruder", keys: macKeys), voucherID: "phone", passcode: Self.passcode)
        await refused(404) {
            _ = try await phone.vouchRelayKeys(of: "intruder", signature: vouchForOther.derRepresentation)
        }
        let key = SymmetricKey(data: [UInt8](repeating: 7, count: 32))
        let phonePeer = RelayPeer(deviceID: "phone", keys: try await phoneEnclave.relayPublicKeys())
        func wrap(_ peer: RelayPeer, generation: UInt64) async throws -> WrappedAccountKey {
            let frame = try await phoneEnclave.wrapAccountKey(key, generation: generation, from: "phone", to: peer)
            return WrappedAccountKey(
                generation: Int64(generation), device: peer.deviceID, frame: Data(frame.encoded).base64EncodedString())
        }
        await refused(400) {
            _ = try await phone.uploadAccountKey(
                AccountKeyUpload(generation: 5, wrapped: [try await wrap(phonePeer, generation: 5)]))
        }
        await refused(400) {
            _ = try await phone.uploadAccountKey(
                AccountKeyUpload(
                    generation: 1, wrapped: [try await wrap(RelayPeer(deviceID: "mac", keys: macKeys), generation: 1)]))
        }
        await refused(400) {
            _ = try await phone.uploadAccountKey(
                AccountKeyUpload(generation: 1, wrapped: [try await wrap(phonePeer, generation: 2)]))
        }
        await refused(404) {
            _ = try await phone.uploadAccountKey(
                AccountKeyUpload(
                    generation: 1,
                    wrapped: [
                        try await wrap(phonePeer, generation: 1),
                        try await wrap(RelayPeer(deviceID: "intruder", keys: macKeys), generation: 1),
                    ]))
        }
        #expect(try await phone.accountKeyState().generation == 0)
        await refused(400) { _ = try await phone.uploadAddresses(SyncedRecord(generation: 0, ciphertext: "AQID")) }
        await refused(400) {
            _ = try await phone.uploadAddresses(
                SyncedRecord(generation: 1, ciphertext: Data(repeating: 1, count: 40).base64EncodedString()))
        }
        #expect(try await phone.syncedAddresses() == nil)
        await sandbox.close()
    }
}
