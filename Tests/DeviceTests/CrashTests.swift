import CommandTestSupport
import Device
import DeviceTestSupport
import EMV
import Foundation
import OrchardCrypto
import OrchardRuntime
import SQLiteCrashVFS
import SecureElement
import Testing
import Wallet

/// A child process (`orchard-device-crasher`) releases cryptograms and loses power (SIGKILL under the crash VFS:
/// what it did not sync is lost) at arbitrary moments; across 10,000 cryptograms no ATC may ever be released twice.
@Suite("Crash: power loss while releasing cryptograms", .serialized)
struct DeviceCrashTests {
    static func crasherPath() throws -> String {
        let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let path = URL(fileURLWithPath: executable).deletingLastPathComponent()
            .appendingPathComponent("orchard-device-crasher").path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw DeviceError(.notFound, "orchard-device-crasher not found at \(path)")
        }
        return path
    }

    static func offCooperativePool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: body()) }.start()
        }
    }

    /// A running crasher and the lines it printed.
    final class Child: Sendable {
        let process: ChildProcess

        init(directory: String, name: String, count: Int) throws {
            // Under the crash VFS: each SIGKILL is a power loss that drops whatever was not synced.
            process = try ChildProcess(
                try DeviceCrashTests.crasherPath(), [directory, name, String(count)],
                environment: [CrashVFS.environmentKey: "1"], stdout: .capture)
        }

        /// The next line, or nil when the output ended.
        func nextLine() -> String? { process.nextLine() }

        func kill() { process.kill() }
    }

    @Test("D5: 10,000 cryptograms with power losses in between: the ATC strictly increases and is never reused")
    func tenThousandCryptograms() async throws {
        let directory = try TemporaryDirectory()
        let name = "crash-phone"
        let (device, identity) = try await makeDevice(in: directory.deployment, name: name)
        let card = try await device.installCard(
            envelope: try TestCards.envelope(for: identity, dpan: TestCards.visaDPAN), display: TestCards.display)
        let cardID = try CardIdentifier(hex: card.id)
        _ = device  // the parent's copy stays closed to writes while the child runs

        let total = 10_000
        var released: [UInt16] = []
        var cryptograms = Set<String>()
        var kills = 0
        var random = SystemRandomNumberGenerator()
        while released.count < total {
            let child = try Child(directory: directory.path, name: name, count: total - released.count)
            // Kill after a random number of released cryptograms (or let the last run finish).
            let killAfter = kills < 8 ? Int.random(in: 50...1_100, using: &random) : Int.max
            // Reading the child's pipe blocks, so it runs on its own thread: a blocked cooperative thread
            // would stall every other test in the process (the pool has two threads here).
            let lines = await Self.offCooperativePool { () -> [String] in
                var lines: [String] = []
                while let line = child.nextLine() {
                    if line == "DONE" { break }
                    lines.append(line)
                    if lines.count >= killAfter {
                        child.kill()
                        break
                    }
                }
                return lines
            }
            if lines.count >= killAfter { kills += 1 }
            for line in lines {
                let parts = line.split(separator: " ")
                guard parts.count == 3, parts[0] == "ATC", let atc = UInt16(parts[1]) else {
                    Issue.record("unexpected line from the crasher: \(line)")
                    child.kill()
                    return
                }
                if let last = released.last {
                    #expect(atc > last, "ATC \(atc) released after \(last)")
                }
                released.append(atc)
                #expect(cryptograms.insert(String(parts[2])).inserted, "a cryptogram was released twice")
            }
            child.process.waitUntilExit()
            // After a kill the stored ATC is at least the last one released: it was stored first.
            let reopened = try await Device.open(in: directory.deployment, name: name)
            let stored = try await reopened.secureElement.lastATC(cardID)
            #expect(stored >= released.last ?? 0)
            // ATCs the child stored but the parent never read (still in the pipe when it was killed) are
            // burned, never reused: the next run continues above `stored`, which the checks above enforce.
        }
        #expect(released.count == total)
        #expect(kills >= 8)
        #expect(Set(released).count == released.count)
        // The last cryptogram verifies for the token service with its ATC.
        let reopened = try await Device.open(in: directory.deployment, name: name)
        _ = try await reopened.authenticate(.faceID(matched: true))
        let outcome = try await tap(reopened)
        let verified = try CryptogramVerifier().verify(
            ChipAuthorizationData(try #require(outcome.card)), issuerMasterKey: TestCards.issuerMasterKey,
            lastSeenATC: released.last)
        #expect(verified.isValid)
    }
}
