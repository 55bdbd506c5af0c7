import CardBasics
import CommandTestSupport
import DeviceControlAPI
import Foundation
import NetworkServer
import OrchardRuntime
import OrchardStore
import RelayAPI
import Testing
import TokenService

extension HandoffProcesses {
    /// Handoff discovery, as the devices run it: `orchard up`, a Mac without Touch ID, a phone and a
    /// watch of one account (each with a card), approved for each other, each `orchard device run` on the radio.
    @Suite("Handoff discovery over the relay", .serialized)
    struct HandoffDiscoveryTests {
        static func discover(_ path: String) async throws -> (HandoffDevicesAnswer, String) {
            let result = try await orchard(["device", "handoff", "--data-dir", path, "--name", "mac"])
            #expect(result.status == 0, "\(result.stderr)")
            return (try JSONDecoder().decode(HandoffDevicesAnswer.self, from: Data(result.stdout.utf8)), result.stdout)
        }

        @Test(
            "H1: A Mac discovers the phone and watch it hears: card type, network, display data and random identifiers, no card number; out of proximity none"
        )
        func discovery() async throws {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent(
                "orchard-handoff-\(UUID().uuidString)"
            )
            .path
            let deployment = DeploymentDirectory(path: path)
            defer {
                LogScan.expectCleanLogs(of: path)  // V2
                try? FileManager.default.removeItem(atPath: path)
            }
            let up = try await HandoffProcesses.pairedAccount(at: path)
            defer { up.terminate() }
            #expect(up.ended == nil)
            let pan = "4111111111111111"
            // Without the Mac's process there is no radio to hear with: one error line, exit 1.
            let idle = try await orchard(["device", "handoff", "--data-dir", path, "--name", "mac"])
            #expect(idle.status == 1 && idle.stdout.isEmpty, "\(idle.stdout)")
            #expect(
                idle.stderr.split(separator: "\n") == [
                    "error: notRunning: Handoff needs the device's process: run `orchard device run`"
                ],
                "\(idle.stderr)")
            let options = ["--sync-interval", "1", "--proximity-window", "1"]
            var running: [String: DeviceProcessChild] = [:]
            for name in ["phone", "watch", "mac"] {
                running[name] = try await DeviceProcessChild(dataDirectory: path, name: name, options: options)
            }
            let mac = try #require(running["mac"])
            _ = try await ProximityTests.wait(mac, "the Mac hears the phone and the watch") {
                $0.nearby.map(\.device) == ["phone", "watch"]
            }
            _ = try await ProximityTests.wait(try #require(running["phone"]), "the phone hears the Mac") {
                $0.nearby.contains { $0.device == "mac" }
            }
            _ = try await ProximityTests.wait(try #require(running["watch"]), "the watch hears the Mac") {
                $0.nearby.contains { $0.device == "mac" }
            }

            let (first, text) = try await Self.discover(path)
            #expect(first.message == nil, "\(first)")
            #expect(first.devices.map(\.device) == ["phone", "watch"])
            #expect(first.devices.map(\.label) == ["Pay with iPhone", "Confirm with Apple Watch"])
            for offering in first.devices {
                #expect(offering.cards.count == 1)
                let card = try #require(offering.cards.first)
                #expect(card.network == "visa" && card.type == "credit" && card.suffix == "1111", "\(card)")
                #expect(card.identifier.count == 32 && card.identifier.allSatisfy(\.isHexDigit))
            }
            // No card number, no DPAN: not in what the Mac received, not in any identifier.
            let vault = try SQLiteTokenVaultStore(path: deployment.databasePath(for: .network))
            var numbers = [pan]
            for device in ["phone", "watch"] { numbers += try await vault.tokens(deviceID: device).map(\.dpan.digits) }
            await vault.store.close()
            #expect(numbers.count == 3)
            for number in numbers {
                #expect(!text.contains(number))
                #expect(!text.contains(String(number.dropLast(4))))
            }
            // The identifiers are drawn at random for each answer.
            let (second, _) = try await Self.discover(path)
            let identifiers = Set((first.devices + second.devices).flatMap(\.cards).map(\.identifier))
            #expect(identifiers.count == 4)

            // A phone whose user turned payments on a Mac off is not offered.
            let off = try await orchard(
                ["device", "settings", "--data-dir", path, "--name", "phone", "--allow-payments-on-mac", "off"])
            #expect(off.status == 0, "\(off.stderr)")
            #expect(try await Self.discover(path).0.devices.map(\.device) == ["watch"])
            #expect(
                try await orchard(
                    ["device", "settings", "--data-dir", path, "--name", "phone", "--allow-payments-on-mac", "on"]
                ).status == 0)

            // Out of proximity: the Mac in another room hears no one and offers no Handoff.
            #expect(
                try await orchard(["device", "move", "--data-dir", path, "--name", "mac", "--room", "office"]).status
                    == 0)
            _ = try await ProximityTests.wait(mac, "the Mac hears no one in the office") { $0.nearby.isEmpty }
            let away = try await Self.discover(path).0
            #expect(away.devices.isEmpty)
            #expect(away.message?.hasPrefix("iPhone could not be found") == true, "\(away)")

            for (_, device) in running { #expect(try await device.stop() == 0) }
        }
    }
}
