import AccessPolicy
import Foundation
import MerchantServer
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import PayServer
import RelayAPI
import Testing

/// The relay's contract (`RelayAPI`, which devices and the Pay server import): paths, policies, bodies and the
/// frame's bytes are pinned, and the Pay server registers every route with its declared policy. The end-to-end
/// relay tests bind writer to reader over HTTPS.
@Suite("Device ↔ Pay server relay contract (RelayAPI) is pinned")
struct RelayAPIContractTests {
    func json(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    func roundTrips<T: Codable & Equatable>(_ value: T, as expected: String) throws {
        #expect(try json(value) == expected)
        #expect(try JSONDecoder().decode(T.self, from: Data(expected.utf8)) == value)
    }

    @Test("Routes and policies: only a device's certificate calls any relay route")
    func routes() {
        #expect(RelayAPI.Route.keys == "/v1/relay/keys")
        #expect(RelayAPI.Route.directory == "/v1/relay/directory")
        #expect(RelayAPI.Route.messages == "/v1/relay/messages")
        #expect(RelayAPI.Route.vouches == "/v1/relay/vouches")
        #expect(RelayAPI.Route.accountKey == "/v1/relay/account-key")
        #expect(RelayAPI.Route.addresses == "/v1/relay/addresses")
        #expect(
            RelayAPI.Declared.all.map(\.method) == ["POST", "GET", "POST", "GET", "POST", "POST", "GET", "POST", "GET"])
        #expect(RelayAPI.Declared.all.allSatisfy { $0.policy == .role(CallerRoles.device) })
    }

    @Test("Bodies are pinned key for key")
    func bodies() throws {
        try roundTrips(
            RelayKeyPublication(encryptionKey: "BAE=", signingKey: "BAI="),
            as: #"{"encryptionKey":"BAE=","signingKey":"BAI="}"#)
        let entry = RelayDirectoryEntry(
            deviceID: "mac", kind: "mac", encryptionKey: "BAE=", signingKey: "BAI=",
            vouches: [RelayVouchRecord(voucher: "phone", signature: "MEQ=")])
        let entryJSON =
            #"{"deviceID":"mac","encryptionKey":"BAE=","kind":"mac","signingKey":"BAI=","#
            + #""vouches":[{"signature":"MEQ=","voucher":"phone"}]}"#
        try roundTrips(entry, as: entryJSON)
        try roundTrips(
            RelayDirectory(account: "demo", devices: [entry]), as: #"{"account":"demo","devices":["# + entryJSON + "]}")
        try roundTrips(
            RelayVouchRequest(device: "mac", signature: "MEQ="), as: #"{"device":"mac","signature":"MEQ="}"#)
        let wrap = WrappedAccountKey(generation: 2, device: "mac", frame: "AQ==")
        try roundTrips(wrap, as: #"{"device":"mac","frame":"AQ==","generation":2}"#)
        try roundTrips(
            AccountKeyUpload(generation: 2, wrapped: [wrap]),
            as: #"{"generation":2,"wrapped":[{"device":"mac","frame":"AQ==","generation":2}]}"#)
        try roundTrips(
            AccountKeyState(generation: 2, wrapped: wrap, holders: ["mac", "phone"]),
            as: #"{"generation":2,"holders":["mac","phone"],"wrapped":{"device":"mac","frame":"AQ==","generation":2}}"#)
        try roundTrips(AccountKeyGeneration(generation: 2), as: #"{"generation":2}"#)
        try roundTrips(SyncedRecord(generation: 2, ciphertext: "AQ=="), as: #"{"ciphertext":"AQ==","generation":2}"#)
        #expect(
            SyncedRecord.additionalData(account: "demo", generation: 2)
                == Array("orchard-address-sync-v1".utf8) + [0, 4] + Array("demo".utf8) + [0, 0, 0, 0, 0, 0, 0, 2])
        // What a vouch signs: context, account, voucher, device, both keys.
        #expect(
            RelayVouch.signedContent(
                account: "demo", voucher: "phone", device: "mac", encryptionKey: [4, 1], signingKey: [4, 2])
                == Array("orchard-relay-vouch-v1".utf8) + [0, 4] + Array("demo".utf8) + [5] + Array("phone".utf8) + [3]
                + Array("mac".utf8) + [4, 1, 4, 2])
        try roundTrips(RelaySendRequest(frame: "AQ=="), as: #"{"frame":"AQ=="}"#)
        try roundTrips(RelaySendResult(id: 7), as: #"{"id":7}"#)
        try roundTrips(
            RelayInbox(messages: [RelayDelivery(id: 7, frame: "AQ==")]), as: #"{"messages":[{"frame":"AQ==","id":7}]}"#)
    }

    @Test("The frame's bytes are pinned: header, ephemeral key, ciphertext, signature")
    func frameBytes() throws {
        let frame = RelayFrame(
            header: RelayFrame.Header(sender: "mac", recipient: "phone", sequence: 258),
            ephemeralKey: [0x04] + [UInt8](repeating: 0x11, count: 64),
            sealed: [UInt8](repeating: 0xAA, count: 16) + [1, 2], signature: [0x30, 0x00])
        let expected =
            "01" + "03" + "6d6163" + "05" + "70686f6e65" + "0000000000000102" + "04"
            + String(repeating: "11", count: 64) + "00000012" + String(repeating: "aa", count: 16) + "0102"
            + "0002" + "3000"
        #expect(frame.encoded.map { String(format: "%02x", $0) }.joined() == expected)
        #expect(try RelayFrame(parsing: frame.encoded) == frame)
        #expect(
            frame.header.encoded == [1, 3] + Array("mac".utf8) + [5] + Array("phone".utf8) + [0, 0, 0, 0, 0, 0, 1, 2])
        #expect(frame.signedContent.starts(with: Array("orchard-relay-frame-v1".utf8) + [0]))
        #expect(frame.additionalData == frame.header.encoded + frame.ephemeralKey)
    }

    @Test("The Pay server registers every relay route with its declared policy")
    func registered() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("orchard-relay-\(UUID().uuidString)")
            .path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = DeploymentDirectory(path: path)
        let registry = try ServiceRegistry([PayService(), MerchantService()])
        _ = try await DeploymentInitializer.initialize(directory, registry: registry)
        let configuration = try registry.loadConfiguration(from: directory, environment: [:])
        let built = try await PayService().build(
            configuration: configuration, directory: directory, environment: ServiceEnvironment())
        let pay = try #require(built as? PayServiceInstance)
        let registered = Set(
            pay.http.server.registeredRoutes.compactMap { r in r.policy.map { DeclaredRoute(r.method, r.pattern, $0) } }
        )
        #expect(Set(RelayAPI.Declared.all).isSubset(of: registered))
        await pay.http.shutdown()
    }
}
