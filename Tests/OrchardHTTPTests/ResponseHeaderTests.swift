import Testing

@testable import OrchardHTTP

@Suite("HTTP client: response header lines")
struct ResponseHeaderTests {
    func receive(_ lines: [String]) -> Transfer {
        let transfer = Transfer(request: HTTPClientRequest(method: .get, url: "https://127.0.0.1/"), maxBytes: 1024)
        for line in lines {
            var bytes = Array(line.utf8).map { CChar(bitPattern: $0) }
            #expect(transfer.receiveHeader(&bytes, bytes.count) == bytes.count)
        }
        return transfer
    }

    @Test func statusLineHeadersAndTheirWhitespace() {
        let transfer = receive([
            "HTTP/1.1 200 OK Fine\r\n", "Content-Type:  application/json \r\n", "X-Empty:\r\n",
            "X-Tabbed:\tvalue\twith tab\t\r\n", "not a header line\r\n", "\r\n",
        ])
        #expect(transfer.reason == "OK Fine")
        #expect(transfer.headers["content-type"] == "application/json")
        #expect(transfer.headers["X-Empty"] == "")
        #expect(transfer.headers["X-Tabbed"] == "value\twith tab")
        #expect(transfer.headers["not a header line"] == nil)
    }

    @Test func aLaterStatusLineStartsOver() {
        let transfer = receive(["HTTP/1.1 100 Continue\r\n", "X-Early: 1\r\n", "\r\n", "HTTP/1.1 204\r\n"])
        #expect(transfer.reason == "")
        #expect(transfer.headers["X-Early"] == nil)
    }
}
