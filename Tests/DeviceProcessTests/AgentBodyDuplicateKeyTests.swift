import BrowserAgentAPI
import DeviceProcess
import Foundation
import Testing

/// The browser agent reads a frame's bodies through the one strict decoder: a body that gives a key twice is
/// refused (400 `duplicate_key` at the agent's server) before any route acts on one of the two values.
@Suite("Browser agent: a frame body giving a key twice")
struct AgentBodyDuplicateKeyTests {
    /// The fuzz target's seed bodies (route byte first) of the frame's routes the agent decodes itself; the
    /// answer route's body is decoded by the device's sheet, which refuses a key given twice on its own.
    static let seeds = ["hello", "active-card", "begin-v3", "begin-v14-recurring"]

    static func seed(_ name: String) throws -> [UInt8] {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../Fuzz/seeds/FuzzAgentMessage/" + name).standardizedFileURL
        return Array(try Data(contentsOf: path))
    }

    @Test("Each of the agent's frame bodies, its first key given again with another value: refused naming the key")
    func everyFrameBodyRefusesAKeyTwice() throws {
        let routes = BrowserAgentMessage.routes
        for name in Self.seeds {
            let bytes = try Self.seed(name)
            let route = routes[Int(bytes[0]) % routes.count]
            let body = String(decoding: bytes.dropFirst(), as: UTF8.self)
            #expect(BrowserAgentMessage.refusal(of: Array(body.utf8), route: route) == nil, "\(name) is taken")
            // `{"key": …` becomes `{"key": null, "key": …`: the same object, its first key twice.
            let open = try #require(body.firstIndex(of: "{"))
            let keyStart = try #require(body[open...].firstIndex(of: "\""))
            let keyEnd = try #require(body[body.index(after: keyStart)...].firstIndex(of: "\""))
            let key = String(body[body.index(after: keyStart)..<keyEnd])
            let twice = "{\"\(key)\":null," + body[body.index(after: open)...]
            #expect(
                BrowserAgentMessage.refusal(of: Array(twice.utf8), route: route)
                    == "field '\(key)' appears twice in one object; send each field once", "\(name)")
        }
    }
}
