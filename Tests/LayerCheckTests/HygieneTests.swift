import Foundation
import Testing

/// Code hygiene checked over the sources: in the server and network parties' modules every `try?` says why its
/// failure may be dropped, and hex text is written by OrchardCrypto's `Hex` alone.
@Suite("Hygiene: a dropped failure carries its reason, one hex codec")
struct HygieneTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The modules whose `try?` must each carry a reason.
    static let partyModules = ["PayServer", "MerchantServer", "NetworkServer", "TokenService", "Acquirer", "Issuer"]

    /// The Swift files under `Sources/<folder>`, as paths relative to the repository.
    static func swiftFiles(under folder: String) throws -> [String] {
        let base = root.appendingPathComponent("Sources/" + folder).path
        guard let walker = FileManager.default.enumerator(atPath: base) else { return [] }
        return walker.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }.sorted().map {
            "Sources/\(folder)/\($0)"
        }
    }

    static func contents(_ relativePath: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(relativePath), encoding: .utf8)
    }

    @Test("Every try? in PayServer, MerchantServer, NetworkServer, TokenService, Acquirer and Issuer carries a reason")
    func everyTryInThePartiesCarriesAReason() throws {
        var bare: [String] = []
        var files = 0
        for module in Self.partyModules {
            for path in try Self.swiftFiles(under: module) {
                files += 1
                bare += TryScan.bareTryLines(in: try Self.contents(path)).map { "\(path):\($0)" }
            }
        }
        #expect(files > 50, "the scan found the modules' sources")
        let list = bare.joined(separator: "\n")
        #expect(
            bare.isEmpty,
            """
            \(bare.count) try? without a reason (add `// try?: <why the failure may be dropped>` on the line or alone \
            on the line above, or handle the error):
            \(list)
            """)
    }

    @Test("The counter counts a bare try?, and only in code: a reason on the line or above, comments and strings pass")
    func theCounterCountsABareTry() {
        let snippet = """
            let a = try? load()
            let b = try? load()  // try?: a missing file is an empty list.
            // try?: the value is optional by design.
            let c = try? load()
            /// Reads it; try? would hide a failure here.
            let d = try? load()
            // A comment that names no reason.
            let e = (try? load()) ?? 0
            // let f = try? load()
            let g = "try? inside a string"
            let h = #"a "raw" string with try? and // inside"#
            func entry() throws -> Entry? { nil }
            let i = "a URL https://example.test"; let j = try? load()
            /* a block comment with try? */
            let k = \"""
                try? in a multi-line string
                \"""
            let l = try?load()
            let m = try? load()  // try?:
            """
        #expect(TryScan.bareTryLines(in: snippet) == [1, 6, 8, 13, 18, 19])
    }

    @Test("Hex text is OrchardCrypto's Hex: no String(format: \"%02x\") and no private digit table in Sources")
    func oneHexCodec() throws {
        var found: [String] = []
        let folders = try FileManager.default.contentsOfDirectory(
            atPath: Self.root.appendingPathComponent("Sources").path)
        for folder in folders.sorted() {
            for path in try Self.swiftFiles(under: folder) {
                for (number, line) in try Self.contents(path).split(separator: "\n", omittingEmptySubsequences: false)
                    .enumerated()
                where line.contains(#"String(format: "%02x""#) || line.contains(#"String(format: "%02X""#)
                    || line.contains(#""0123456789abcdef""#)
                {
                    found.append("\(path):\(number + 1)")
                }
            }
        }
        let list = found.joined(separator: "\n")
        #expect(found.isEmpty, "hex written beside OrchardCrypto's Hex:\n\(list)")
    }
}

/// Finds the `try?` of Swift source that carry no reason comment. A lexer of the little that matters: line and
/// block comments, string literals (raw, multi-line), and `try?` as a token in what is left.
enum TryScan {
    /// The 1-based numbers of the lines with a `try?` in code and no `// try?: <reason>` comment on that line or on
    /// the line above (a line holding only that comment).
    static func bareTryLines(in source: String) -> [Int] {
        var state = State()
        var bare: [Int] = []
        var previousReason = false
        for (index, line) in source.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let bytes = Array(line.utf8)
            let parts = state.split(bytes)
            if containsTryQuestion(parts.code) && !hasReason(parts.comment) && !previousReason {
                bare.append(index + 1)
            }
            let codeIsBlank = parts.code.allSatisfy { $0 == 0x20 || $0 == 0x09 }
            previousReason = codeIsBlank && hasReason(parts.comment)
        }
        return bare
    }

    /// `try?` not glued to an identifier before it (`Entry?` is no `try?`).
    static func containsTryQuestion(_ code: [UInt8]) -> Bool {
        let token = Array("try?".utf8)
        guard code.count >= token.count else { return false }
        for start in 0...(code.count - token.count) where Array(code[start..<start + token.count]) == token {
            if start == 0 || !isIdentifier(code[start - 1]) { return true }
        }
        return false
    }

    /// `try?:` followed by some text.
    static func hasReason(_ comment: [UInt8]) -> Bool {
        let marker = Array("try?:".utf8)
        guard comment.count > marker.count else { return false }
        for start in 0...(comment.count - marker.count) where Array(comment[start..<start + marker.count]) == marker {
            if comment[(start + marker.count)...].contains(where: { $0 != 0x20 && $0 != 0x09 }) { return true }
        }
        return false
    }

    static func isIdentifier(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || byte == 0x5F
    }

    /// What carries over from one line to the next: an open multi-line string or block comment.
    struct State {
        /// An open multi-line string literal and its raw delimiter's `#` count.
        var multilineString: Int?
        var blockComment = false

        /// The line's code (string contents and comments removed) and its comment text.
        mutating func split(_ line: [UInt8]) -> (code: [UInt8], comment: [UInt8]) {
            var code: [UInt8] = []
            var comment: [UInt8] = []
            var index = 0
            /// An open single-line string literal and its raw delimiter's `#` count.
            var string: Int?
            func at(_ text: String, _ offset: Int) -> Bool {
                let pattern = Array(text.utf8)
                return offset + pattern.count <= line.count && Array(line[offset..<offset + pattern.count]) == pattern
            }
            func closes(_ quotes: String, hashes: Int, _ offset: Int) -> Bool {
                at(quotes + String(repeating: "#", count: hashes), offset)
            }
            while index < line.count {
                if blockComment {
                    if at("*/", index) {
                        blockComment = false
                        index += 2
                    } else {
                        comment.append(line[index])
                        index += 1
                    }
                    continue
                }
                if let hashes = multilineString {
                    if line[index] == UInt8(ascii: "\\") && hashes == 0 {
                        index += 2
                    } else if closes("\"\"\"", hashes: hashes, index) {
                        multilineString = nil
                        index += 3 + hashes
                    } else {
                        index += 1
                    }
                    continue
                }
                if let hashes = string {
                    if line[index] == UInt8(ascii: "\\") && hashes == 0 {
                        index += 2
                    } else if closes("\"", hashes: hashes, index) {
                        string = nil
                        index += 1 + hashes
                    } else {
                        index += 1
                    }
                    continue
                }
                if at("//", index) {
                    comment = Array(line[index...])
                    break
                }
                if at("/*", index) {
                    blockComment = true
                    index += 2
                    continue
                }
                // A string literal's opening: `#`s (raw), then one or three quotes.
                var hashes = 0
                while index + hashes < line.count && line[index + hashes] == UInt8(ascii: "#") { hashes += 1 }
                if at("\"\"\"", index + hashes) {
                    multilineString = hashes
                    index += hashes + 3
                    continue
                }
                if at("\"", index + hashes) {
                    string = hashes
                    index += hashes + 1
                    continue
                }
                code.append(line[index])
                index += 1
            }
            return (code, comment)
        }
    }
}
