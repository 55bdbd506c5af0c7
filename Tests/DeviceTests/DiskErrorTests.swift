import Device
import DeviceTestSupport
import EMV
import Foundation
import SQLiteCrashVFS
import SecureElement
import Testing
import Wallet

/// The device's store on a failing disk (the crash VFS): the Secure Element stores a card's ATC before it
/// releases the cryptogram, so a failed fsync releases none, and the device writes nothing more until reopened.
@Suite("R4: the device's store on a failing disk", .serialized)
struct DeviceDiskErrorTests {
    @Test("R4: a failed fsync while the ATC is stored: no cryptogram, nothing written after it; reopened, it goes on")
    func failedSyncReleasesNoCryptogram() async throws {
        let directory = try TemporaryDirectory()
        CrashVFS.install(under: directory.path)
        let (device, identity) = try await makeDevice(in: directory.deployment, name: "phone")
        let card = try await device.installCard(
            envelope: try TestCards.envelope(for: identity, dpan: TestCards.visaDPAN), display: TestCards.display)
        let cardID = try CardIdentifier(hex: card.id)
        _ = try await device.authenticate(.faceID(matched: true))
        let first = try #require(try await tap(device).card)

        CrashVFS.fail(.sync, with: .io, under: directory.path)
        defer { CrashVFS.clearFault(under: directory.path) }
        for attempt in 1...2 {
            _ = try? await device.authenticate(.faceID(matched: true))
            let outcome = try? await tap(device)
            #expect(outcome?.card == nil, "attempt \(attempt): a cryptogram was released without its ATC on disk")
        }
        #expect(CrashVFS.faultHits(under: directory.path) == 1)
        #expect(CrashVFS.operationsAfterFault(under: directory.path) == 0, "the device wrote after the failed fsync")

        // Restarted on a good disk: the stored ATC is at least the last one released, and the next is above it.
        CrashVFS.clearFault(under: directory.path)
        let reopened = try await Device.open(in: directory.deployment, name: "phone")
        let stored = try await reopened.secureElement.lastATC(cardID)
        #expect(stored >= first.atc)
        _ = try await reopened.authenticate(.faceID(matched: true))
        let next = try #require(try await tap(reopened).card)
        #expect(next.atc > stored)
    }
}
