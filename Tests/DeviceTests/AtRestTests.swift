import CardBasics
import Device
import DeviceTestSupport
import EMV
import Foundation
import OrchardCrypto
import OrchardRuntime
import SecureElement
import Testing
import Wallet

@Suite("Device store at rest")
struct AtRestTests {
    /// Every byte of the store: the database file, its write-ahead log and shared-memory file.
    static func storeBytes(_ directory: TemporaryDirectory, _ name: String) throws -> [(String, [UInt8])] {
        let base = try Device.databasePath(of: name, in: directory.deployment)
        return [base, base + "-wal", base + "-shm"].compactMap { path in
            FileManager.default.contents(atPath: path).map { (path, Array($0)) }
        }
    }

    @Test("The .sqlite, -wal and -shm files hold no DPAN, card key, storage key, passcode or address in clear")
    func noSecretsOnDisk() async throws {
        let directory = try TemporaryDirectory()
        let (device, identity) = try await makeDevice(in: directory.deployment)
        let visa = try await device.installCard(
            envelope: try TestCards.envelope(for: identity, dpan: TestCards.visaDPAN), display: TestCards.display)
        _ = try await device.installCard(
            envelope: try TestCards.envelope(for: identity, dpan: TestCards.mastercardDPAN, network: "masterCard"),
            display: CardDisplayInput(type: .debit, suffix: "4444", displayName: "Orchard Debit"))
        for _ in 0..<3 {
            _ = try await device.authenticate(.faceID(matched: true), card: visa.id)
            #expect(try await tap(device).status == .onlineRequest)
        }
        let street = "742 Evergreen Terrace"
        try await device.wallet.recordUse(
            Contact(
                name: "Homer",
                postalAddress: PostalAddress(
                    street: street, locality: "Springfield", administrativeArea: "OR", postalCode: "97403",
                    countryCode: "US")),
            as: .shipping)
        // A removed card's data must be gone too.
        try await device.removeCard(visa.id)

        let storageKey = try SecureFile.readSecret(Device.storageKeyPath(of: "alice-phone", in: directory.deployment))
        var secrets: [(String, [UInt8])] = [
            ("storage key", storageKey.unsafeCopyOfBytes()),
            ("passcode", Array(TestCards.passcode.utf8)),
            ("street", Array(street.utf8)),
            ("remote key", TestCards.remoteKey.bytes.unsafeCopyOfBytes()),
        ]
        for dpan in [TestCards.visaDPAN, TestCards.mastercardDPAN] {
            secrets.append(("DPAN \(dpan.suffix(4)) ASCII", Array(dpan.utf8)))
            secrets.append(("DPAN \(dpan.suffix(4)) packed", try EMVNumeric.compressedNumeric(dpan)))
            secrets.append(("DPAN \(dpan.suffix(4)) first 12 digits", Array(dpan.prefix(12).utf8)))
            secrets.append(("master key \(dpan.suffix(4))", try TestCards.masterKey(dpan).bytes.unsafeCopyOfBytes()))
            secrets.append(
                (
                    "master key half \(dpan.suffix(4))",
                    Array(try TestCards.masterKey(dpan).bytes.unsafeCopyOfBytes().prefix(8))
                ))
        }
        // While open (the WAL holds recent pages) and after a checkpoint.
        var scanned = 0
        for phase in ["open", "checkpointed"] {
            if phase == "checkpointed" { try device.checkpoint() }
            for (path, bytes) in try Self.storeBytes(directory, "alice-phone") {
                scanned += bytes.count
                for (name, secret) in secrets {
                    #expect(
                        !bytes.containsSequence(secret),
                        "\(name) found in \((path as NSString).lastPathComponent) (\(phase))")
                }
            }
        }
        #expect(scanned > 10_000)
        // The scan can fail: the display data the wallet keeps is there in clear.
        let database = try Self.storeBytes(directory, "alice-phone").flatMap(\.1)
        #expect(database.containsSequence(Array("Orchard Debit".utf8)))
    }
}
