import EMV
import Foundation
import OrchardCrypto
import Testing

@testable import NFCLink

#if canImport(Glibc)
    import Glibc
#endif

@Suite("NFC link frames")
struct FrameTests {
    /// The link reads JSON payloads as every Orchard party does.
    @Test("S9: a frame whose JSON gives a key twice is a protocol violation; once each, it decodes")
    func aPayloadGivingAKeyTwiceIsRefused() throws {
        let twice = NFCFrame(.poll, Array(#"{"version":1,"aids":[],"networks":["visa"],"networks":[]}"#.utf8))
        #expect(throws: NFCLinkError(.protocolViolation, "")) { try twice.decode(NFCPolling.self) }
        let once = NFCFrame(.poll, Array(#"{"version":1,"aids":[],"networks":["visa"]}"#.utf8))
        #expect(try once.decode(NFCPolling.self).networks == ["visa"])
    }

    @Test("A frame is type, big-endian length and payload; above the limit it is refused")
    func encoding() throws {
        #expect(try NFCFrame(.command, [0x00, 0xA4]).encoded() == [0x02, 0x00, 0x02, 0x00, 0xA4])
        #expect(try NFCFrame(.fieldOff).encoded() == [0x03, 0x00, 0x00])
        let big = [UInt8](repeating: 0x55, count: 300)
        #expect(try NFCFrame(.response, big).encoded() == [0x83, 0x01, 0x2C] + big)
        #expect(throws: NFCLinkError(.frameTooLarge, "")) {
            try NFCFrame(.command, [UInt8](repeating: 0, count: NFCLinkProtocol.maximumPayload + 1)).encoded()
        }
        #expect(throws: NFCLinkError(.frameTooLarge, "")) { try NFCFrame(.command, big).encoded(maximumPayload: 256) }
    }

    @Test("A polling reveals AIDs, networks and a merchant; each field's form is checked")
    func polling() throws {
        let polling = try Polling.visaAndMastercard
        let json = try JSONEncoder().encode(polling)
        let text = String(decoding: json, as: UTF8.self)
        #expect(text.contains("A0000000031010") && text.contains("masterCard") && text.contains("Orchard Coffee"))
        #expect(try JSONDecoder().decode(NFCPolling.self, from: json) == polling)

        #expect(throws: NFCLinkError(.invalidArgument, "")) {
            try NFCPolling(applicationIdentifiers: [[0xA0, 0x00]], networks: ["visa"])
        }
        #expect(throws: NFCLinkError(.invalidArgument, "")) {
            try NFCPolling(applicationIdentifiers: [PaymentScheme.visa.aid], networks: ["vi sa"])
        }
        #expect(throws: NFCLinkError(.invalidArgument, "")) {
            try NFCPolling(
                applicationIdentifiers: [PaymentScheme.visa.aid], networks: ["visa"],
                merchantName: String(repeating: "m", count: 65))
        }
        #expect(throws: NFCLinkError(.invalidArgument, "")) {
            try NFCPolling(applicationIdentifiers: Array(repeating: PaymentScheme.visa.aid, count: 17), networks: [])
        }
        // The same checks when decoding what a peer sent.
        for bad in [
            #"{"version":1,"aids":["A0"],"networks":[]}"#, #"{"version":1,"aids":["ZZ00000003"],"networks":[]}"#,
            #"{"version":1,"aids":[],"networks":["a\nb"]}"#,
        ] {
            #expect(throws: DecodingError.self) { try JSONDecoder().decode(NFCPolling.self, from: Data(bad.utf8)) }
        }
    }

    @Test("A refusal is clipped to its limits and loses control characters")
    func refusal() {
        let refusal = NFCRefusal(code: "device Locked!" + String(repeating: "x", count: 50), message: "a\u{0}b\nc")
        #expect(refusal.code.hasPrefix("deviceLocked") && refusal.code.count == 32)
        #expect(refusal.message == "abc")
        #expect(NFCRefusal(code: "x", message: String(repeating: "m", count: 500)).message.count == 200)
    }

    @Test("Only phones and watches may join a field")
    func kinds() {
        #expect(NFCDeviceKind.allCases.filter(\.mayJoinField) == [.phone, .watch])
    }
}

@Suite("NFC link sessions")
struct SessionTests {
    @Test("A tap: polling, join, the kernel's APDUs across the socket, an ARQC that verifies, field off")
    func tap() async throws {
        let directory = try TemporaryDirectory()
        let target = try CardTarget()
        let antenna = try NFCAntenna(path: directory.antenna, kind: .phone, target: target, limits: .patient)
        defer { antenna.stop() }
        #expect(NFCAntenna.isListening(at: directory.antenna))
        var mode = stat()
        #expect(stat(directory.antenna, &mode) == 0 && mode.st_mode & 0o777 == 0o600)

        let session = try await NFCReaderSession.open(
            antenna: directory.antenna, polling: try Polling.visaAndMastercard, limits: .patient)
        #expect(session.join.kind == .phone && session.join.ready && session.isReady)
        #expect(antenna.isInField)
        let kernel = TerminalKernel(configuration: TerminalConfiguration(countryCode: 840, currencyCode: 840))
        let outcome = try await kernel.run(
            TransactionParameters(amount: 1234, date: try TransactionDate(yymmdd: "250615")), card: session)
        await session.close()
        #expect(outcome.status == .onlineRequest, "\(outcome)")
        let card = try #require(outcome.card)
        let verification = try CryptogramVerifier().verify(
            ChipAuthorizationData(card), issuerMasterKey: CardTarget.issuerKey, lastSeenATC: nil)
        #expect(verification.isValid)
        #expect(session.exchangeDurations.count == outcome.transcript.count && outcome.transcript.count >= 3)
        #expect(await target.pollings.first?.networks == ["visa", "masterCard"])
        #expect(await target.pollings.first?.merchantName == "Orchard Coffee")
        // Field-off is a handshake: once close() returns, the device has left the field.
        #expect(await target.fieldOffs == 1)
        #expect(!antenna.isInField)
        // The session is over: nothing more crosses it.
        await expectLinkError(.connectionLost) { try await session.transceive([0x00, 0xA4, 0x04, 0x00]) }
    }

    @Test("A device not yet authorized joins unready; the reader waits; the user's authorization makes it ready")
    func readiness() async throws {
        let directory = try TemporaryDirectory()
        let target = try CardTarget(authorized: false)
        let antenna = try NFCAntenna(
            path: directory.antenna, kind: .watch, target: target,
            limits: NFCLinkLimits(
                joinTimeout: .seconds(30), exchangeTimeout: .seconds(30), readinessInterval: .milliseconds(5)))
        defer { antenna.stop() }
        let session = try await NFCReaderSession.open(
            antenna: directory.antenna, polling: try Polling.visaAndMastercard, limits: .patient)
        #expect(!session.join.ready && session.join.kind == .watch)
        #expect(try await session.waitUntilReady(timeout: .milliseconds(100)) == false)
        Task {
            try await Task.sleep(for: .milliseconds(50))
            await target.authorize()
        }
        #expect(try await session.waitUntilReady(timeout: .seconds(30)))
        #expect(session.isReady)
        let kernel = TerminalKernel(configuration: TerminalConfiguration(countryCode: 840, currencyCode: 840))
        let outcome = try await kernel.run(
            TransactionParameters(amount: 500, date: try TransactionDate(yymmdd: "250615")), card: session)
        await session.close()
        #expect(outcome.status == .onlineRequest)
    }

    @Test("Without an authorization the card answers the field but releases no cryptogram")
    func unauthorized() async throws {
        let directory = try TemporaryDirectory()
        let target = try CardTarget(authorized: false)
        let antenna = try NFCAntenna(path: directory.antenna, kind: .phone, target: target, limits: .patient)
        defer { antenna.stop() }
        let session = try await NFCReaderSession.open(
            antenna: directory.antenna, polling: try Polling.visaAndMastercard, limits: .patient)
        let kernel = TerminalKernel(configuration: TerminalConfiguration(countryCode: 840, currencyCode: 840))
        let outcome = try await kernel.run(
            TransactionParameters(amount: 500, date: try TransactionDate(yymmdd: "250615")), card: session)
        await session.close()
        #expect(outcome.status == .endApplication && outcome.refusal == .conditionsNotSatisfied)
        #expect(outcome.card == nil)
    }

    @Test("A refusal reaches the reader with the device's code; nothing was exchanged and no field state remains")
    func refused() async throws {
        let directory = try TemporaryDirectory()
        let target = try CardTarget(mode: .refuse(NFCRefusal(code: "deviceLocked", message: "the watch is locked")))
        let antenna = try NFCAntenna(path: directory.antenna, kind: .watch, target: target, limits: .patient)
        defer { antenna.stop() }
        await expectLinkError(.refused, peerCode: "deviceLocked") {
            try await NFCReaderSession.open(
                antenna: directory.antenna, polling: try Polling.visaAndMastercard, limits: .patient)
        }
        #expect(await target.commands == 0)
        #expect(await target.fieldOffs == 0)
        // The antenna takes the next reader.
        try await waitFor { !antenna.isInField }
        await expectLinkError(.refused) {
            try await NFCReaderSession.open(
                antenna: directory.antenna, polling: try Polling.visaAndMastercard, limits: .patient)
        }
    }

    @Test("A command the device refuses ends the session with its code")
    func refusedCommand() async throws {
        let directory = try TemporaryDirectory()
        let target = try CardTarget(mode: .refuseCommands)
        let antenna = try NFCAntenna(path: directory.antenna, kind: .phone, target: target, limits: .patient)
        defer { antenna.stop() }
        let session = try await NFCReaderSession.open(
            antenna: directory.antenna, polling: try Polling.visaAndMastercard, limits: .patient)
        await expectLinkError(.refused, peerCode: "fieldNotActive") {
            try await session.transceive(CommandAPDU.select(CommandAPDU.ppseName).encoded())
        }
        await session.close()
        try await waitFor { await target.fieldOffs == 1 }
    }

    @Test("One field at a time: a second reader is refused as busy")
    func busy() async throws {
        let directory = try TemporaryDirectory()
        let target = try CardTarget()
        let antenna = try NFCAntenna(path: directory.antenna, kind: .phone, target: target, limits: .patient)
        defer { antenna.stop() }
        let first = try await NFCReaderSession.open(
            antenna: directory.antenna, polling: try Polling.visaAndMastercard, limits: .patient)
        await expectLinkError(.refused, peerCode: "busy") {
            try await NFCReaderSession.open(
                antenna: directory.antenna, polling: try Polling.visaAndMastercard, limits: .patient)
        }
        await first.close()
        try await waitFor { !antenna.isInField }
        let second = try await NFCReaderSession.open(
            antenna: directory.antenna, polling: try Polling.visaAndMastercard, limits: .patient)
        await second.close()
    }

    @Test("A Mac or an iPad has no antenna; one that claims a field anyway is refused before any APDU")
    func onlyPhonesAndWatches() async throws {
        let directory = try TemporaryDirectory()
        for kind in [NFCDeviceKind.mac, .ipad] {
            await expectLinkError(.deviceNotAllowed) {
                try NFCAntenna(path: directory.antenna, kind: kind, target: try CardTarget())
            }
            #expect(!FileManager.default.fileExists(atPath: directory.antenna))
            // A forged device: it answers the polling as an iPad or a Mac.
            let received = FrameLog()
            let peer = try RawPeer(path: directory.antenna) { fd in
                received.append(RawPeer.receiveFrame(fd))
                let join = NFCFrame(.joined, Array(#"{"kind":"\#(kind)","ready":true,"version":1}"#.utf8))
                RawPeer.send(fd, (try? join.encoded()) ?? [])
                received.append(RawPeer.receiveFrame(fd))
            }
            await expectLinkError(.deviceNotAllowed) {
                try await NFCReaderSession.open(
                    antenna: directory.antenna, polling: try Polling.visaAndMastercard, limits: .patient)
            }
            await peer.finish()
            // The reader sent its polling, then switched the field off: no command.
            #expect(received.frames.map(\.first) == [NFCFrameType.poll.rawValue, NFCFrameType.fieldOff.rawValue])
        }
    }

    @Test("Nothing in the field, a path too long, a live antenna twice, a stale socket file")
    func paths() async throws {
        let directory = try TemporaryDirectory()
        await expectLinkError(.notInField) {
            try await NFCReaderSession.open(
                antenna: directory.antenna, polling: try Polling.visaAndMastercard, limits: .patient)
        }
        let long = directory.path + "/" + String(repeating: "x", count: 120)
        await expectLinkError(.invalidPath) { try NFCAntenna(path: long, kind: .phone, target: try CardTarget()) }
        await expectLinkError(.invalidPath) {
            try await NFCReaderSession.open(antenna: long, polling: try Polling.visaAndMastercard, limits: .patient)
        }
        let antenna = try NFCAntenna(path: directory.antenna, kind: .phone, target: try CardTarget(), limits: .patient)
        await expectLinkError(.alreadyListening) {
            try NFCAntenna(path: directory.antenna, kind: .phone, target: try CardTarget(), limits: .patient)
        }
        antenna.stop()
        #expect(!FileManager.default.fileExists(atPath: directory.antenna))
        _ = FileManager.default.createFile(atPath: directory.antenna, contents: Data())  // left by a killed process
        let again = try NFCAntenna(path: directory.antenna, kind: .phone, target: try CardTarget(), limits: .patient)
        #expect(NFCAntenna.isListening(at: directory.antenna))
        again.stop()
    }

    @Test("Deadlines: a device that never joins, and one that never answers an APDU, time out")
    func deadlines() async throws {
        let directory = try TemporaryDirectory()
        let silent = try RawPeer(path: directory.antenna) { fd in _ = RawPeer.receive(fd) }
        await expectLinkError(.timedOut) {
            try await NFCReaderSession.open(
                antenna: directory.antenna, polling: try Polling.visaAndMastercard,
                limits: NFCLinkLimits(joinTimeout: .milliseconds(200)))
        }
        await silent.finish()

        let target = try CardTarget(mode: .hangOnCommand(.seconds(2)))
        let antenna = try NFCAntenna(path: directory.antenna, kind: .phone, target: target, limits: .patient)
        defer { antenna.stop() }
        let session = try await NFCReaderSession.open(
            antenna: directory.antenna, polling: try Polling.visaAndMastercard,
            limits: NFCLinkLimits(joinTimeout: .seconds(30), exchangeTimeout: .milliseconds(200)))
        await expectLinkError(.timedOut) {
            try await session.transceive(CommandAPDU.select(CommandAPDU.ppseName).encoded())
        }
        await session.close()
    }

    @Test("Limits: too many APDUs in one tap, an oversized frame, an unknown frame type")
    func limits() async throws {
        let directory = try TemporaryDirectory()
        let target = try CardTarget()
        let antenna = try NFCAntenna(
            path: directory.antenna, kind: .phone, target: target,
            limits: NFCLinkLimits(joinTimeout: .seconds(30), exchangeTimeout: .seconds(30), maximumExchanges: 3))
        defer { antenna.stop() }
        let session = try await NFCReaderSession.open(
            antenna: directory.antenna, polling: try Polling.visaAndMastercard,
            limits: NFCLinkLimits(joinTimeout: .seconds(30), exchangeTimeout: .seconds(30), maximumExchanges: 3))
        let select = try CommandAPDU.select(CommandAPDU.ppseName).encoded()
        for _ in 0..<3 { #expect(try await session.transceive(select).suffix(2) == [0x90, 0x00]) }
        await expectLinkError(.limitExceeded) { try await session.transceive(select) }
        await session.close()
        antenna.stop()

        // A device that announces a frame larger than the limit, then one that sends an unknown type.
        for reply in [[0x81, 0xFF, 0xFF], [0x7E, 0x00, 0x00]] as [[UInt8]] {
            let peer = try RawPeer(path: directory.antenna) { fd in
                _ = RawPeer.receiveFrame(fd)
                RawPeer.send(fd, reply)
                _ = RawPeer.receive(fd)
            }
            await expectLinkError(reply[0] == 0x81 ? .frameTooLarge : .protocolViolation) {
                try await NFCReaderSession.open(
                    antenna: directory.antenna, polling: try Polling.visaAndMastercard, limits: .patient)
            }
            await peer.finish()
        }
    }

    @Test("The antenna survives a reader that sends garbage, an oversized frame, or leaves without field-off")
    func misbehavingReaders() async throws {
        let directory = try TemporaryDirectory()
        let target = try CardTarget()
        let antenna = try NFCAntenna(path: directory.antenna, kind: .phone, target: target, limits: .patient)
        defer { antenna.stop() }
        for garbage in [[0x02, 0x00, 0x01, 0x00], [0x01, 0xFF, 0xFF], [0x01, 0x00, 0x02, 0x7B, 0x7D]] as [[UInt8]] {
            let answer = try await rawSession(directory.antenna, garbage)
            #expect(answer.first == NFCFrameType.refused.rawValue, "\(answer)")
        }
        #expect(await target.fieldOffs == 0)  // none of them joined

        // A reader that leaves in the middle of the tap, without switching the field off: the device
        // still leaves the field.
        let polling = try NFCFrame.json(.poll, try Polling.visaAndMastercard)
        let command = NFCFrame(.command, try CommandAPDU.select(CommandAPDU.ppseName).encoded())
        let answer = try await rawSession(directory.antenna, try polling.encoded() + command.encoded())
        #expect(answer.first == NFCFrameType.joined.rawValue)
        try await waitFor { await target.fieldOffs == 1 }
        #expect(await target.commands == 1)
        #expect(NFCAntenna.isListening(at: directory.antenna))
    }
}

/// Frames a raw peer received, shared with its thread.
final class FrameLog: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [[UInt8]] = []
    func append(_ frame: [UInt8]) { lock.withLock { stored.append(frame) } }
    var frames: [[UInt8]] { lock.withLock { stored } }
}

/// Polls `condition` until it holds (at most 60 s: the full suite can starve the cooperative threads).
func waitFor(_ condition: @Sendable () async -> Bool) async throws {
    for _ in 0..<6000 {
        if await condition() { return }
        try await Task.sleep(for: .milliseconds(10))
    }
    Issue.record("the condition did not hold within 60 s")
}

func connectRaw(_ path: String) throws -> Int32 {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
    }
    let rc = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
        }
    }
    guard rc == 0 else { throw NFCLinkError(.notInField, "cannot connect") }
    return fd
}

/// Sends `bytes` as a reader would, then returns what the antenna answers until it closes (off the pool).
func rawSession(_ path: String, _ bytes: [UInt8]) async throws -> [UInt8] {
    try await withCheckedThrowingContinuation { continuation in
        Thread {
            continuation.resume(
                with: Result {
                    let fd = try connectRaw(path)
                    defer { close(fd) }
                    RawPeer.send(fd, bytes)
                    shutdown(fd, Int32(SHUT_WR))  // the reader leaves: no field-off frame
                    return RawPeer.receive(fd)
                })
        }.start()
    }
}
