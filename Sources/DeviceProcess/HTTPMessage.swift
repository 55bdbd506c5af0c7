import Foundation

/// The strict HTTP/1.1 subset the control socket speaks: one request per connection, a body only with
/// `Content-Length` (no chunked encoding), bounded header and body sizes, `Connection: close` answers.
enum HTTPMessage {
    static let maximumHeaderBytes = 16 << 10
    static let maximumBodyBytes = 1 << 20

    /// A parsed head: the start line's three parts and the headers (names lowercased).
    struct Head {
        let startLine: [String]
        let headers: [String: String]
    }

    /// Reads one message (head and body) from `fd`. Throws ``DeviceProcessError/Code/protocolError`` with
    /// a message when the bytes are not an acceptable message, with the status a server should answer.
    static func read(_ fd: Int32) throws(DeviceProcessError) -> (head: Head, body: [UInt8]) {
        try read { (count: Int?) throws(DeviceProcessError) -> [UInt8] in
            if let count { try UnixSocket.read(fd, count: count) } else { try UnixSocket.read(fd) }
        }
    }

    /// Reads one message from `next`, which returns the next bytes (at most `count` when given; empty at the end
    /// of the stream): what ``read(_:)`` does with a socket, and the fuzz target with bytes in memory.
    static func read(
        from next: (_ count: Int?) throws(DeviceProcessError) -> [UInt8]
    ) throws(DeviceProcessError) -> (head: Head, body: [UInt8]) {
        var buffer: [UInt8] = []
        var headEnd: Int?
        while headEnd == nil {
            let chunk = try next(nil)
            if chunk.isEmpty { throw DeviceProcessError(.protocolError, "400 the message ended inside its head") }
            buffer += chunk
            headEnd = find([13, 10, 13, 10], in: buffer)
            if headEnd == nil, buffer.count > maximumHeaderBytes {
                throw DeviceProcessError(.protocolError, "431 the head is larger than \(maximumHeaderBytes) bytes")
            }
        }
        guard let headEnd, headEnd <= maximumHeaderBytes else {
            throw DeviceProcessError(.protocolError, "431 the head is larger than \(maximumHeaderBytes) bytes")
        }
        let head = try parseHead(Array(buffer[0..<headEnd]))
        if head.headers["transfer-encoding"] != nil {
            throw DeviceProcessError(.protocolError, "501 only Content-Length bodies are supported")
        }
        var length = 0
        if let value = head.headers["content-length"] {
            guard let parsed = Int(value), parsed >= 0, value.allSatisfy(\.isASCII) else {
                throw DeviceProcessError(.protocolError, "400 Content-Length is not a number")
            }
            length = parsed
        }
        guard length <= maximumBodyBytes else {
            throw DeviceProcessError(.protocolError, "413 the body is larger than \(maximumBodyBytes) bytes")
        }
        var body = Array(buffer[(headEnd + 4)...])
        while body.count < length {
            let chunk = try next(min(64 << 10, length - body.count))
            if chunk.isEmpty { throw DeviceProcessError(.protocolError, "400 the body ended early") }
            body += chunk
        }
        guard body.count == length else {
            throw DeviceProcessError(.protocolError, "400 more bytes than Content-Length (one request per connection)")
        }
        return (head, body)
    }

    static func parseHead(_ bytes: [UInt8]) throws(DeviceProcessError) -> Head {
        guard bytes.allSatisfy({ $0 == 9 || $0 == 10 || $0 == 13 || (0x20...0x7E).contains($0) }) else {
            throw DeviceProcessError(.protocolError, "400 the head holds bytes that are not printable ASCII")
        }
        let lines = String(decoding: bytes, as: UTF8.self).components(separatedBy: "\r\n")
        let start = lines[0].split(separator: " ", omittingEmptySubsequences: false).map(String.init)
        guard start.count >= 3 else { throw DeviceProcessError(.protocolError, "400 malformed start line") }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex,
                !line[..<colon].contains(" ")
            else { throw DeviceProcessError(.protocolError, "400 malformed header line") }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            guard headers[name] == nil || name != "content-length" else {
                throw DeviceProcessError(.protocolError, "400 repeated Content-Length")
            }
            headers[name] = value
        }
        return Head(startLine: start, headers: headers)
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for index in 0...(haystack.count - needle.count) where haystack[index] == needle[0] {
            if Array(haystack[index..<(index + needle.count)]) == needle { return index }
        }
        return nil
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: return "OK"
        case 201: return "Created"
        case 400: return "Bad Request"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 409: return "Conflict"
        case 413: return "Content Too Large"
        case 422: return "Unprocessable Content"
        case 429: return "Too Many Requests"
        case 431: return "Request Header Fields Too Large"
        case 501: return "Not Implemented"
        case 503: return "Service Unavailable"
        default: return "Status \(status)"
        }
    }

    static func response(_ response: ControlResponse) -> [UInt8] {
        var head = "HTTP/1.1 \(response.status) \(reason(response.status))\r\n"
        head += "Content-Type: application/json\r\nContent-Length: \(response.body.count)\r\nConnection: close\r\n\r\n"
        return Array(head.utf8) + Array(response.body)
    }

    static func request(_ request: ControlRequest) -> [UInt8] {
        var head = "\(request.method) \(request.path) HTTP/1.1\r\nHost: device\r\n"
        head += "Content-Type: application/json\r\nContent-Length: \(request.body.count)\r\nConnection: close\r\n\r\n"
        return Array(head.utf8) + Array(request.body)
    }
}

/// The control socket's message parser over bytes in memory, for the fuzz target (Fuzz/Sources/FuzzControlHTTP):
/// the same code that reads the socket, fed `bytes` in chunks of `chunkSize`.
public enum ControlSocketParser {
    /// A parsed message: the start line's parts, the headers (names lowercased) and the body.
    public struct Message: Sendable {
        /// The start line split at spaces (`["POST", "/v1/x", "HTTP/1.1"]`).
        public let startLine: [String]
        /// The headers, names lowercased.
        public let headers: [String: String]
        /// The body, exactly `Content-Length` bytes.
        public let body: [UInt8]
    }

    /// Parses one message from `bytes` delivered `chunkSize` bytes at a time, or throws the
    /// ``DeviceProcessError/Code/protocolError`` the socket would answer.
    public static func parse(_ bytes: [UInt8], chunkSize: Int) throws(DeviceProcessError) -> Message {
        var offset = 0
        let step = max(1, chunkSize)
        let (head, body) = try HTTPMessage.read { (count: Int?) throws(DeviceProcessError) -> [UInt8] in
            let end = min(bytes.count, offset + min(step, count ?? step))
            defer { offset = end }
            return Array(bytes[offset..<end])
        }
        return Message(startLine: head.startLine, headers: head.headers, body: body)
    }
}
