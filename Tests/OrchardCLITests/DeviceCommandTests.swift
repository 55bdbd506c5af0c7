import Foundation
import Testing

@testable import OrchardCLI

@Suite("orchard device")
struct DeviceCommandTests {
    static func temporaryDirectory() throws -> String {
        let path = NSTemporaryDirectory() + "orchard-device-cli-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    @Test("create plays the factory, list and cards read the store")
    func createListCards() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let create = Capture()
        // The passcode from the environment (an in-process run has no stdin of its own).
        let rc = await create.run(
            [
                "device", "create", "--data-dir", directory, "--name", "alice-watch", "--kind", "watch", "--biometry",
                "none", "--account", "alice",
            ], environment: ["HOME": "/tmp/orchard-home", "ORCHARD_PASSCODE": "2468"])
        #expect(rc == 0, "\(create.stderr)")
        let created = try JSONSerialization.jsonObject(with: Data(create.stdout.utf8)) as? [String: Any]
        #expect(created?["kind"] as? String == "watch" && created?["passcodeSet"] as? Bool == true)
        #expect((created?["certificateSubject"] as? String)?.contains("CN=alice-watch") == true)
        #expect(FileManager.default.fileExists(atPath: directory + "/devices/alice-watch/storage.key"))

        let again = Capture()
        #expect(
            await again.run([
                "device", "create", "--data-dir", directory, "--name", "alice-watch", "--kind", "watch", "--biometry",
                "none",
            ]) == 1)
        #expect(again.stderr.contains("already exists"))

        let list = Capture()
        #expect(await list.run(["device", "list", "--data-dir", directory]) == 0)
        #expect(list.stdout.contains("\"alice-watch\""))
        let cards = Capture()
        #expect(await cards.run(["device", "cards", "--data-dir", directory, "--name", "alice-watch"]) == 0)
        #expect(
            cards.stdout.trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "\n", with: "")
                == "[]")
        let missing = Capture()
        #expect(await missing.run(["device", "cards", "--data-dir", directory, "--name", "nobody"]) == 1)
    }

    @Test("Impossible devices are usage errors")
    func badProfiles() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for arguments in [
            ["--kind", "watch", "--biometry", "face"], ["--kind", "toaster", "--biometry", "none"],
            ["--kind", "phone", "--biometry", "none"], ["--kind", "phone", "--biometry", "face", "--account", "A B"],
        ] {
            let capture = Capture()
            #expect(await capture.run(["device", "create", "--data-dir", directory, "--name", "x"] + arguments) == 2)
            #expect(capture.stderr.hasPrefix("error: "))
        }
    }
}
