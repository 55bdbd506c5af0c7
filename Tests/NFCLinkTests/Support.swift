import EMV
import Foundation
import NFCLink
import OrchardCrypto
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A fresh short directory (a Unix socket path holds at most 107 bytes), removed when released.
final class TemporaryDirectory: @unchecked Sendable {
    let path: String
    init() throws {
        path = "/tmp/onl-" + String(UUID().uuidString.prefix(8))
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
    var antenna: String { path + "/nfc.sock" }
}

/// A card in the test process behind an antenna: an `EMV` applet, authorized on demand, recording what the
/// link did to it.
actor CardTarget: NFCTarget {
    enum Mode: Sendable { case join, refuse(NFCRefusal), hangOnCommand(Duration), refuseCommands }

    private var card: ContactlessCard
    private let mode: Mode
    private var authorized: Bool
    private(set) var pollings: [NFCPolling] = []
    private(set) var fieldOffs = 0
    private(set) var commands = 0

    static let issuerKey = SymmetricKey(data: [UInt8](repeating: 0x3C, count: 16))
    static let dpan = "4000123412341234"

    init(mode: Mode = .join, authorized: Bool = true) throws {
        let profile = try CardApplicationProfile(
            scheme: .visa, pan: Self.dpan, expiry: "3106",
            masterKey: try EMVKeyDerivation.masterKey(
                issuerMasterKey: Self.issuerKey, pan: Self.dpan, panSequenceNumber: 0))
        card = try ContactlessCard(applications: [CardApplication(profile: profile, atcStore: InMemoryATCStore())])
        self.mode = mode
        self.authorized = authorized
        if authorized { card.authorize(CardholderAuthorization(verifiedBy: .face)) }
    }

    /// The user authenticates while the device is in the field.
    func authorize() {
        authorized = true
        card.authorize(CardholderAuthorization(verifiedBy: .face))
    }

    func fieldOn(_ polling: NFCPolling) async -> NFCFieldAnswer {
        pollings.append(polling)
        if case .refuse(let refusal) = mode { return .refuse(refusal) }
        return .join(ready: authorized)
    }

    func isAuthorized() async -> Bool { authorized }

    func transceive(_ command: [UInt8]) async throws(NFCRefusal) -> [UInt8] {
        commands += 1
        switch mode {
        case .hangOnCommand(let duration): try? await Task.sleep(for: duration)
        case .refuseCommands: throw NFCRefusal(code: "fieldNotActive", message: "no field")
        default: break
        }
        return card.process(bytes: command)
    }

    func fieldOff() async {
        fieldOffs += 1
        card.reset()
    }
}

extension NFCLinkLimits {
    /// Deadlines far beyond what a busy machine needs: the whole suite shares two cooperative threads, and
    /// only the deadline tests should see a deadline pass.
    static var patient: NFCLinkLimits { NFCLinkLimits(joinTimeout: .seconds(30), exchangeTimeout: .seconds(30)) }
}

enum Polling {
    static var visaAndMastercard: NFCPolling {
        get throws {
            try NFCPolling(
                applicationIdentifiers: [PaymentScheme.visa.aid, PaymentScheme.mastercard.aid],
                networks: ["visa", "masterCard"], merchantName: "Orchard Coffee")
        }
    }
}

/// A raw peer on a Unix socket for the cases an honest antenna never produces (a Mac that claims a field,
/// a silent device, garbage frames). `script` runs on a thread of its own with the accepted connection.
final class RawPeer: @unchecked Sendable {
    let path: String
    private let listener: Int32
    private let done = DispatchSemaphore(value: 0)

    init(path: String, script: @escaping @Sendable (Int32) -> Void) throws {
        self.path = path
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard rc == 0, listen(fd, 4) == 0 else { throw NFCLinkError(.socketFailure, "test peer cannot listen") }
        listener = fd
        let thread = Thread { [done] in
            let connection = accept(fd, nil, nil)
            if connection >= 0 {
                script(connection)
                close(connection)
            }
            done.signal()
        }
        thread.start()
    }

    /// Waits (off the concurrency pool) for the script to end, then removes the socket.
    func finish() async {
        let done = done
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread {
                done.wait()
                continuation.resume()
            }.start()
        }
        close(listener)
        unlink(path)
    }

    /// The script's helpers.
    static func send(_ fd: Int32, _ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Reads until the peer closes or `limit` bytes arrived.
    static func receive(_ fd: Int32, limit: Int = 4096) -> [UInt8] {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while out.count < limit {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            out += buffer[0..<n]
        }
        return out
    }

    /// Reads one frame's bytes (header and payload).
    static func receiveFrame(_ fd: Int32) -> [UInt8] {
        var header = [UInt8](repeating: 0, count: 3)
        guard recv(fd, &header, 3, Int32(MSG_WAITALL)) == 3 else { return [] }
        let length = Int(header[1]) << 8 | Int(header[2])
        var payload = [UInt8](repeating: 0, count: length)
        if length > 0 { _ = recv(fd, &payload, length, Int32(MSG_WAITALL)) }
        return header + payload
    }
}

/// Expects `body` to throw an ``NFCLinkError`` with `code`.
func expectLinkError<T>(
    _ code: NFCLinkError.Code, peerCode: String? = nil, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> T
) async {
    do {
        _ = try await body()
        Issue.record("expected \(code), nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as NFCLinkError {
        #expect(error.code == code, "got \(error)", sourceLocation: sourceLocation)
        if let peerCode { #expect(error.peerCode == peerCode, "got \(error)", sourceLocation: sourceLocation) }
    } catch {
        Issue.record("expected \(code), got \(error)", sourceLocation: sourceLocation)
    }
}
