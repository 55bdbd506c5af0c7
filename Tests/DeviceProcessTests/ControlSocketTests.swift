import CommandTestSupport
import Device
import DeviceControlAPI
import DeviceProcess
import EMV
import Foundation
import OrchardCrypto
import OrchardRuntime
import SecureElement
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A fresh directory, removed when released.
final class TemporaryDirectory: @unchecked Sendable {
    let path: String
    init() throws {
        // Short: a Unix socket path holds at most 107 bytes.
        path = "/tmp/odp-" + String(UUID().uuidString.prefix(8))
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit {
        LogScan.expectCleanLogs(of: path)  // V2
        try? FileManager.default.removeItem(atPath: path)
    }
    var deployment: DeploymentDirectory { DeploymentDirectory(path: path) }
}

/// Sends raw bytes to a Unix socket and returns everything it answers (on a thread of its own: the server
/// needs the concurrency pool to answer).
func rawExchange(_ path: String, _ bytes: [UInt8]) async throws -> String {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try blockingExchange(path, bytes) }) }.start()
    }
}

/// Sends a request through the client, off the concurrency pool.
func send(_ request: ControlRequest, to path: String) async throws -> ControlResponse {
    try await ControlSocketClient.send(request, to: path).get()
}

func blockingExchange(_ path: String, _ bytes: [UInt8]) throws -> String {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
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
    guard rc == 0 else { throw DeviceProcessError(.notRunning, "connect failed") }
    _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    shutdown(fd, Int32(SHUT_WR))
    var answer: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n <= 0 { break }
        answer += buffer[0..<n]
    }
    return String(decoding: answer, as: UTF8.self)
}

@Suite("Control socket")
struct ControlSocketTests {
    /// What the echo server saw of a request.
    struct Echo: Codable {
        let method: String
        let path: String
        let bytes: Int
    }

    static func echoServer(_ path: String) throws -> ControlSocketServer {
        try ControlSocketServer(path: path) { request in
            let body = try? JSONEncoder().encode(
                Echo(method: request.method, path: request.path, bytes: request.body.count))
            return ControlResponse(status: request.path == "/missing" ? 404 : 200, body: body ?? Data())
        }
    }

    @Test("Requests and answers cross the socket; the socket is 0600 and removed on stop")
    func roundTrip() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/control.sock"
        let server = try Self.echoServer(path)
        #expect(SecureFile.mode(of: path) == 0o600)
        #expect(ControlSocketClient.isRunning(at: path))
        let response = try await send(try ControlRequest(FieldOn(networks: ["visa"])), to: path)
        #expect(response.status == 200)
        let echo = try JSONDecoder().decode(Echo.self, from: response.body)
        #expect(echo.method == "POST" && echo.path == "/field/on" && echo.bytes == 21)
        #expect(try await send(ControlRequest(method: "GET", path: "/missing"), to: path).status == 404)
        // Several clients at once.
        try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<16 {
                group.addTask {
                    try await send(ControlRequest(method: "GET", path: "/n/\(index)"), to: path).status
                }
            }
            for try await status in group { #expect(status == 200) }
        }
        // A second server on a live socket is refused.
        #expect(throws: DeviceProcessError.self) { try Self.echoServer(path) }
        server.stop()
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(!ControlSocketClient.isRunning(at: path))
        await #expect(throws: DeviceProcessError(.notRunning, "")) {
            try await send(ControlRequest(method: "GET", path: "/status"), to: path)
        }
    }

    @Test("Malformed, oversized and chunked requests are answered with errors, not crashes")
    func malformedRequests() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/control.sock"
        let server = try Self.echoServer(path)
        defer { server.stop() }
        let cases: [(String, [UInt8])] = [
            ("400", Array("garbage\r\n\r\n".utf8)),
            ("400", Array("GET status HTTP/1.1\r\n\r\n".utf8)),
            ("400", Array("GET /status HTTP/1.1\r\nBad Header\r\n\r\n".utf8)),
            ("400", Array("POST /x HTTP/1.1\r\nContent-Length: ten\r\n\r\n".utf8)),
            ("400", Array("POST /x HTTP/1.1\r\nContent-Length: 10\r\n\r\nshort".utf8)),
            ("400", Array("POST /x HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nab".utf8)),
            ("413", Array("POST /x HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n".utf8)),
            ("431", Array("GET /x HTTP/1.1\r\nX: \(String(repeating: "a", count: 20_000))\r\n\r\n".utf8)),
            ("501", Array("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".utf8)),
            ("400", [0x47, 0x45, 0x54, 0x20, 0x2F, 0xFF, 0x20, 0x48, 0x0D, 0x0A, 0x0D, 0x0A]),
        ]
        for (status, bytes) in cases {
            let answer = try await rawExchange(path, bytes)
            #expect(answer.hasPrefix("HTTP/1.1 \(status) "), "\(answer.prefix(60))")
            #expect(answer.contains(#""error""#))
        }
        // The server still works.
        #expect(try await send(ControlRequest(method: "GET", path: "/ok"), to: path).status == 200)
    }

    @Test("A stale socket file is replaced; a path too long is refused")
    func socketFiles() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/control.sock"
        try Self.echoServer(path).stop()
        // A socket file left behind by a killed process.
        _ = FileManager.default.createFile(atPath: path, contents: Data())
        let server = try Self.echoServer(path)
        #expect(ControlSocketClient.isRunning(at: path))
        server.stop()
        let long = directory.path + "/" + String(repeating: "x", count: 120)
        #expect(throws: DeviceProcessError(.invalidPath, "")) { try Self.echoServer(long) }
    }
}

@Suite("The control socket serves its own user only")
struct ControlSocketAccessTests {
    @Test("The socket file is 0600 and owned by this user")
    func socketFileIsPrivate() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/control.sock"
        let server = try ControlSocketServer(path: path) { _ in ControlResponse(status: 200, body: Data("{}".utf8)) }
        defer { server.stop() }
        var info = stat()
        #expect(stat(path, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        #expect(info.st_uid == geteuid())
    }

    /// Another user (nobody, through setpriv) connects to a socket whose mode was widened: the peer check
    /// refuses it with 403, while this user is still served.
    @Test(
        "Another user's process is refused by SO_PEERCRED even when the file mode lets it connect",
        .enabled(if: geteuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")))
    func anotherUserIsRefused() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/control.sock"
        let server = try ControlSocketServer(path: path) { _ in ControlResponse(status: 200, body: Data("{}".utf8)) }
        defer { server.stop() }
        #expect(chmod(directory.path, 0o755) == 0 && chmod(path, 0o666) == 0)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        process.arguments = [
            "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/curl", "-s", "-o", "/dev/null", "-w",
            "%{http_code}", "--unix-socket", path, "http://device/v1/state",
        ]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        process.waitUntilExit()
        let status = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(status == "403")
        let own = try await rawExchange(path, Array("GET /v1/state HTTP/1.1\r\nHost: device\r\n\r\n".utf8))
        #expect(own.hasPrefix("HTTP/1.1 200"))
    }
}
