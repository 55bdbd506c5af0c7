import Device
import Foundation
import OrchardCrypto
import OrchardRuntime
import OrchardServices
import OrchardStore
import PayAPI
import PayClient
import PayServer
import RelayAPI
import SecureElement
import Testing
import Wallet

/// Address sync: the wallet's recent contacts, encrypted under an account key wrapped to each
/// device's relay key; the Pay server stores ciphertext only.
@Suite("Address sync through the Pay server", .serialized)
struct AddressSyncTests {
    typealias Joined = (Device, DeviceRelay)

    static let home = Contact(
        name: "Alice Doe", emailAddress: "alice@example.com",
        postalAddress: PostalAddress(
            street: "1 Orchard Lane", locality: "Springfield", administrativeArea: "IL", postalCode: "62701",
            countryCode: "US"))
    static let office = Contact(
        name: "Alice Doe",
        postalAddress: PostalAddress(
            street: "200 Market Street", locality: "Springfield", administrativeArea: "IL", postalCode: "62702",
            countryCode: "US"))

    static func account(_ sandbox: Sandbox, watch: Bool = false) async throws -> [Joined] {
        var joined = [
            try await RelayEndToEndTests.join(sandbox, "phone", kind: .phone, biometry: .face),
            try await RelayEndToEndTests.join(sandbox, "mac", kind: .mac, biometry: .touch),
        ]
        try await RelayEndToEndTests.approve(joined[0], joined[1])
        if watch {
            joined.append(try await RelayEndToEndTests.join(sandbox, "watch", kind: .watch, biometry: .none))
            try await RelayEndToEndTests.approve(joined[0], joined[2])
        }
        return joined
    }

    /// Every row of a Pay server table, read beside the running server.
    static func rows<T: Sendable>(
        _ sandbox: Sandbox, _ sql: String, _ transform: @escaping @Sendable (Row) throws -> T
    ) async throws -> [T] {
        let store = try PayStore.open(in: sandbox.deployment)
        let rows = try await store.read { db in try db.query(sql, [], transform) }
        await store.close()
        return rows
    }

    @Test("The phone's recent addresses reach the Mac through the Pay server, and the Mac's wallet offers them")
    func phoneToMac() async throws {
        let sandbox = try await Sandbox()
        let joined = try await Self.account(sandbox)
        let (phone, mac) = (joined[0], joined[1])
        try await phone.0.wallet.recordUse(Self.home, as: .shipping)
        try await phone.0.wallet.recordUse(Self.home, as: .contact)
        try await phone.0.wallet.recordUse(Self.office, as: .billing)
        #expect(try await mac.1.fetchAddresses() == nil)
        let synced = try await SyncedAddresses(wallet: phone.0.wallet)
        try await phone.1.syncAddresses(synced)
        let fetched = try #require(try await mac.1.fetchAddresses())
        #expect(fetched == synced && fetched.shipping == [Self.home] && fetched.billing == [Self.office])
        try await fetched.record(in: mac.0.wallet)
        #expect(try await mac.0.wallet.recentContacts(.shipping) == [Self.home])
        // The Mac's change goes back the same way.
        var changed = fetched
        changed.shipping.insert(Self.office, at: 0)
        try await mac.1.syncAddresses(changed)
        #expect(try await phone.1.fetchAddresses() == changed)
        await sandbox.close()
    }

    @Test("H1: No Pay server key opens an address record's key; no file holds an address; another account gets none")
    func payServerCannotRead() async throws {
        let sandbox = try await Sandbox()
        let joined = try await Self.account(sandbox)
        try await joined[0].1.syncAddresses(SyncedAddresses(shipping: [Self.home]))
        for (path, bytes) in try sandbox.files() {
            #expect(!Sandbox.contains(bytes, Array("1 Orchard Lane".utf8)), "\(path) holds the address")
        }
        let wraps = try await Self.rows(sandbox, "SELECT frame FROM relay_account_keys") { try $0.blob(0) }
        #expect(wraps.count == 2)
        let phoneSigning = try await joined[0].0.secureEnclave.relayPublicKeys().signing
        let payKeys = [
            PayService.Files.tokenRoot, PayService.Files.tokenIntegrationCA, PayService.Files.tokenSigning,
            PayService.Files.merchantCA, PayService.Files.client, "pay-tls",
        ]
        for name in payKeys {
            let pem = try sandbox.deployment.readPrivateKey(named: name)
            let key = try pem.withUnsafeBytes {
                try P256.KeyAgreement.PrivateKey(pemRepresentation: String(decoding: $0, as: UTF8.self))
            }
            for wrap in wraps {
                #expect(throws: SecureElementError.self, "pki/\(name).key opened an account key") {
                    _ = try RelayCipher.open(
                        try RelayFrame(parsing: wrap), recipientKey: key, senderSigningKey: phoneSigning)
                }
            }
        }
        let (_, intruder) = try await RelayEndToEndTests.join(
            sandbox, "intruder", kind: .mac, biometry: .touch, account: "mallory")
        #expect(try await intruder.fetchAddresses() == nil)
        #expect(try await sandbox.client("intruder").accountKeyState().generation == 0)
        await sandbox.close()
    }

    @Test("A removed device cannot read what is synced after: the account key rotates without it")
    func removedDevice() async throws {
        let sandbox = try await Sandbox()
        let joined = try await Self.account(sandbox, watch: true)
        let (phone, mac, watch) = (joined[0], joined[1], joined[2])
        try await phone.1.syncAddresses(SyncedAddresses(shipping: [Self.home]))
        #expect(try await watch.1.fetchAddresses()?.shipping == [Self.home])

        #expect(try await mac.1.rotateIfRemoved() == false)
        _ = try await sandbox.client("phone").lifecycle(device: "watch", action: .erase)
        // The first device to notice (at its next sync) rotates; the next finds nothing to do.
        #expect(try await phone.1.rotateIfRemoved())
        #expect(try await mac.1.rotateIfRemoved() == false)
        #expect(try await sandbox.client("mac").accountKeyState().generation == 2)
        try await phone.1.syncAddresses(SyncedAddresses(shipping: [Self.office, Self.home]))
        #expect(try await mac.1.fetchAddresses()?.shipping == [Self.office, Self.home])

        // Generation 2 is wrapped to the phone and the mac only; the watch's generation-1 key opens nothing new.
        let wrapped = try await Self.rows(
            sandbox, "SELECT generation, device_id FROM relay_account_keys ORDER BY generation, device_id"
        ) { "\(try $0.int64(0)):\(try $0.string(1))" }
        #expect(wrapped == ["1:mac", "1:phone", "1:watch", "2:mac", "2:phone"])
        let old = try #require(
            try await Self.rows(
                sandbox, "SELECT frame FROM relay_account_keys WHERE generation = 1 AND device_id = 'watch'"
            ) { try $0.blob(0) }.first)
        let phonePeer = RelayPeer(deviceID: "phone", keys: try await phone.0.secureEnclave.relayPublicKeys())
        let oldKey = try await watch.0.secureEnclave.unwrapAccountKey(
            try RelayFrame(parsing: old), generation: 1, to: "watch", from: phonePeer)
        let record = try #require(
            try await Self.rows(sandbox, "SELECT ciphertext FROM relay_synced_addresses") { try $0.blob(0) }.first)
        for generation: Int64 in [1, 2] {
            #expect(throws: CryptoError.self) {
                _ = try AES.GCM.open(
                    try AES.GCM.SealedBox(combined: record[12...]), using: oldKey, iv: record[..<12],
                    authenticating: SyncedRecord.additionalData(account: "demo", generation: generation))
            }
        }
        await sandbox.close()
    }

    @Test(
        "Wallets sync both ways and converge: each device's new contacts go up, the others' are recorded below its own")
    func walletsConverge() async throws {
        let sandbox = try await Sandbox()
        let joined = try await Self.account(sandbox)
        let (phone, mac) = (joined[0], joined[1])
        try await phone.0.wallet.recordUse(Self.home, as: .shipping)
        #expect(try await phone.1.syncWallet(phone.0.wallet) == (uploaded: true, recorded: false))
        #expect(try await mac.1.syncWallet(mac.0.wallet) == (uploaded: false, recorded: true))
        // The Mac's sheet offers the phone's address.
        #expect(try await mac.0.wallet.recentContacts(.shipping) == [Self.home])

        try await mac.0.wallet.recordUse(Self.office, as: .shipping)
        #expect(try await mac.1.syncWallet(mac.0.wallet) == (uploaded: true, recorded: false))
        #expect(try await phone.1.syncWallet(phone.0.wallet) == (uploaded: false, recorded: true))
        #expect(try await phone.0.wallet.recentContacts(.shipping) == [Self.home, Self.office])
        // Nothing new anywhere: no upload, no change, in either order.
        for _ in 0..<2 {
            #expect(try await phone.1.syncWallet(phone.0.wallet) == (uploaded: false, recorded: false))
            #expect(try await mac.1.syncWallet(mac.0.wallet) == (uploaded: false, recorded: false))
        }
        #expect(try await mac.1.fetchAddresses()?.shipping == [Self.office, Self.home])
        await sandbox.close()
    }
}
