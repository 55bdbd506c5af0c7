import CommandTestSupport
import DeviceControlAPI
import DeviceProcess
import Foundation
import OrchardCrypto
import OrchardRuntime
import RelayAPI
import SecureElement
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The suites that run device processes on the radio medium, one after another (each starts a Pay server or
/// `orchard up` and several device processes: run together they would compete for the machine).
@Suite("Handoff across device processes", .serialized)
enum HandoffProcesses {
    /// `orchard init` and `orchard up` in `path`, then one account's phone and watch (each with a Visa card) and a Mac
    /// without Touch ID, the Mac and the watch approved by the phone. Returns `up`, which the caller terminates.
    static func pairedAccount(at path: String) async throws -> ChildProcess {
        #expect(try await orchard(["init", "--data-dir", path]).status == 0)
        let up = try ChildProcess(
            try orchardExecutable(), ["up", "--data-dir", path], stdout: .capture, stderr: .file(path + "/up.log"))
        for _ in 0..<600 where !up.stdout.contains("\"merchant\"") && up.ended == nil {
            try await Task.sleep(for: .milliseconds(100))
        }
        for (name, kind, biometry) in [("phone", "phone", "face"), ("watch", "watch", "none"), ("mac", "mac", "none")] {
            let created = try await orchard(
                [
                    "device", "create", "--data-dir", path, "--name", name, "--kind", kind, "--biometry", biometry,
                    "--passcode-file", "-",
                ], stdin: "123456\n")
            #expect(created.status == 0, "\(created.stderr)")
            guard name != "mac" else { continue }
            let card = try await orchard(
                [
                    "device", "add-card", "--data-dir", path, "--name", name, "--expiry", "12/34", "--cardholder",
                    "Alice Appleseed",
                ], stdin: "4111111111111111\n266\n")
            #expect(card.status == 0, "\(card.stderr)")
        }
        for new in ["mac", "watch"] {
            let approved = try await orchard(
                ["device", "approve", "--data-dir", path, "--name", "phone", "--new", new], stdin: "123456\n123456\n")
            #expect(approved.status == 0, "\(approved.stderr)")
        }
        return up
    }
}

extension HandoffProcesses {
    /// Proximity on the simulated radio medium, as the devices run it: a Pay server, a phone and a
    /// Mac of one account approved for each other, each `orchard device run` advertising in its room, the advertising
    /// keys exchanged over the relay.
    @Suite("Proximity over the simulated radio medium", .serialized)
    struct ProximityTests {
        /// A datagram socket the test binds in a room: a listener of another party, with no key.
        final class Listener {
            let fd: Int32
            let path: String

            let unlinkOnClose: Bool

            init(
                room: String, in deployment: DeploymentDirectory, name: String = "listener.sock",
                unlinkOnClose: Bool = true
            ) throws {
                self.unlinkOnClose = unlinkOnClose
                path = deployment.path + "/run/radio/\(room)/\(name)"
                try FileManager.default.createDirectory(
                    atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
                var address = sockaddr_un()
                address.sun_family = sa_family_t(AF_UNIX)
                withUnsafeMutableBytes(of: &address.sun_path) { raw in
                    for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
                }
                let bound = withUnsafePointer(to: &address) { pointer in
                    pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                    }
                }
                #expect(fd >= 0 && bound == 0)
            }

            deinit {
                close(fd)
                if unlinkOnClose { unlink(path) }
            }

            /// Every datagram waiting.
            func drain() -> [[UInt8]] {
                var received: [[UInt8]] = []
                var buffer = [UInt8](repeating: 0, count: 512)
                while true {
                    let count = buffer.withUnsafeMutableBytes {
                        recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT))
                    }
                    guard count >= 0 else { return received }
                    received.append(Array(buffer[0..<count]))
                }
            }

            /// Sends `bytes` to every other socket of `room`.
            func send(_ bytes: [UInt8], toRoom room: String, in deployment: DeploymentDirectory) {
                let directory = deployment.path + "/run/radio/\(room)"
                for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
                where name.hasSuffix(".sock") && directory + "/" + name != path {
                    var address = sockaddr_un()
                    address.sun_family = sa_family_t(AF_UNIX)
                    withUnsafeMutableBytes(of: &address.sun_path) { raw in
                        for (index, byte) in (directory + "/" + name).utf8.enumerated() { raw[index] = byte }
                    }
                    _ = withUnsafePointer(to: &address) { pointer in
                        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                            sendto(
                                fd, bytes, bytes.count, Int32(MSG_DONTWAIT), $0,
                                socklen_t(MemoryLayout<sockaddr_un>.size))
                        }
                    }
                }
            }
        }

        /// The answer of `orchard device nearby`.
        static func nearby(_ device: DeviceProcessChild) async throws -> ProximityAnswer {
            try await ControlSocketClient.send(GetProximity(), to: device.socket).get()
        }

        /// Waits (bounded, 60 s) until `condition` holds for `device`'s proximity.
        static func wait(
            _ device: DeviceProcessChild, _ what: String, until condition: (ProximityAnswer) -> Bool
        ) async throws -> ProximityAnswer {
            var last = try await nearby(device)
            for _ in 0..<600 where !condition(last) {
                try await Task.sleep(for: .milliseconds(100))
                last = try await nearby(device)
            }
            #expect(condition(last), "\(what): \(last)\n\(device.output)")
            return last
        }

        @Test(
            "H3: Devices of one account hear each other in a room and not after a move; replayed and foreign adverts ignored"
        )
        func proximity() async throws {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent(
                "orchard-radio-\(UUID().uuidString)"
            )
            .path
            let deployment = DeploymentDirectory(path: path)
            defer {
                LogScan.expectCleanLogs(of: path)  // V2
                try? FileManager.default.removeItem(atPath: path)
            }
            #expect(try await orchard(["init", "--data-dir", path]).status == 0)
            for (name, kind, biometry, passcode) in [
                ("phone", "phone", "face", "123456"), ("mac", "mac", "none", "654321"),
            ] {
                let created = try await orchard(
                    [
                        "device", "create", "--data-dir", path, "--name", name, "--kind", kind, "--biometry", biometry,
                        "--passcode-file", "-",
                    ], stdin: passcode + "\n")
                #expect(created.status == 0, "\(created.stderr)")
            }
            let approved = try await orchard(
                ["device", "approve", "--data-dir", path, "--name", "phone", "--new", "mac"], stdin: "123456\n654321\n")
            #expect(approved.status == 0, "\(approved.stderr)")

            // A device starts in the room `home`; `move` works with or without its process.
            let moved = try await orchard(["device", "move", "--data-dir", path, "--name", "mac", "--room", "Office!"])
            #expect(moved.status != 0 && moved.stderr.contains("room"), "\(moved.stderr)")

            let payLog = path + "/pay.log"
            let pay = try ChildProcess(
                try orchardExecutable(), ["serve", "pay", "--data-dir", path], stdout: .file(payLog),
                stderr: .file(payLog))
            defer { pay.terminate() }
            for _ in 0..<600 where deployment.runningInstances(of: .pay).isEmpty {
                try await Task.sleep(for: .milliseconds(100))
            }
            let options = ["--sync-interval", "1", "--proximity-window", "1"]
            let phone = try await DeviceProcessChild(dataDirectory: path, name: "phone", options: options)
            let mac = try await DeviceProcessChild(dataDirectory: path, name: "mac", options: options)
            let listener = try Listener(room: "home", in: deployment)
            // A socket left by a process that was killed: nothing reads there, and the devices sweep it.
            do { _ = try Listener(room: "home", in: deployment, name: "stale.sock", unlinkOnClose: false) }

            // The keys travel over the relay; then each hears the other.
            let heard = try await Self.wait(phone, "the phone hears the Mac") { $0.nearby.map(\.device) == ["mac"] }
            #expect(heard.room == "home" && heard.listening && heard.nearby.first?.kind == "mac")
            _ = try await Self.wait(mac, "the Mac hears the phone") { $0.nearby.map(\.device) == ["phone"] }

            // A listener without keys hears only random bytes: nothing names a device, identifiers are not the names.
            // (Devices find a new socket in the room at their next send: wait, bounded, for two adverts.)
            var captured = listener.drain()
            var waited = 0
            while captured.count < 2, waited < 100 {
                waited += 1
                try await Task.sleep(for: .milliseconds(100))
                captured += listener.drain()
            }
            #expect(captured.count >= 2)
            for advert in captured {
                #expect(advert.count == ProximityAdvertisement.byteCount)
                #expect(!RelayTestsSupport.contains(advert, Array("mac".utf8)))
                #expect(!RelayTestsSupport.contains(advert, Array("phone".utf8)))
            }

            // Foreign adverts (another key) and junk are ignored.
            let foreign = try ProximityCipher.seal(
                ProximityAdvertisement.Body(
                    counter: UInt64(Date().timeIntervalSince1970 * 1000), kind: "mac"),
                key: SymmetricKey(SecureBytes(Array(repeating: 7, count: 32))), identifier: [1, 2, 3, 4, 5, 6],
                random: SystemRandom())
            let before = try await Self.nearby(phone).ignored
            listener.send(foreign.encoded, toRoom: "home", in: deployment)
            listener.send(Array(repeating: 0, count: 46), toRoom: "home", in: deployment)
            _ = try await Self.wait(phone, "the foreign adverts are ignored") {
                $0.ignored.foreign >= before.foreign + 2
            }

            // The Mac moves to another room: the phone stops hearing it, and it hears no one.
            let away = try await orchard(["device", "move", "--data-dir", path, "--name", "mac", "--room", "office"])
            #expect(away.status == 0, "\(away.stderr)")
            _ = try await Self.wait(phone, "the phone no longer hears the Mac") { $0.nearby.isEmpty }
            let office = try await Self.wait(mac, "the Mac hears no one in the office") {
                $0.room == "office" && $0.nearby.isEmpty
            }
            #expect(office.listening)

            // Replaying what was recorded in the room (the Mac's adverts among them) does not bring the Mac back.
            let replayedBefore = try await Self.nearby(phone).ignored
            for advert in captured + listener.drain() { listener.send(advert, toRoom: "home", in: deployment) }
            let after = try await Self.wait(phone, "the replays are ignored") {
                $0.ignored.replayed + $0.ignored.stale > replayedBefore.replayed + replayedBefore.stale
            }
            #expect(after.nearby.isEmpty, "\(after)")

            // Back home, it is heard again.
            #expect(
                try await orchard(["device", "move", "--data-dir", path, "--name", "mac", "--room", "home"]).status == 0
            )
            _ = try await Self.wait(phone, "the phone hears the Mac again") { $0.nearby.map(\.device) == ["mac"] }
            let settings = try await orchard(["device", "settings", "--data-dir", path, "--name", "mac"])
            #expect(settings.stdout.contains(#""room" : "home""#), "\(settings.stdout)")

            #expect(try await phone.stop() == 0)
            #expect(try await mac.stop() == 0)
            // The radio's sockets are gone with the processes, the stale one swept (the listener's stays until the end).
            #expect(
                (try FileManager.default.contentsOfDirectory(atPath: path + "/run/radio/home")) == ["listener.sock"])
        }
    }
}

/// Byte search, as the relay tests do it.
enum RelayTestsSupport {
    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, haystack.count >= needle.count else { return false }
        return (0...(haystack.count - needle.count)).contains { Array(haystack[$0..<($0 + needle.count)]) == needle }
    }
}
