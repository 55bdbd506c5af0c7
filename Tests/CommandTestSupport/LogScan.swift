import Foundation
public import Testing

/// Test support for security case V2: scans the parties' logs for what must never be there — a card number (a
/// Luhn-valid run of 13 to 19 digits), a DPAN, a CVV, a cryptogram, key bytes or a full street address — both by
/// shape and by the exact values a test knows it handled.
///
/// End-to-end tests run the services at debug level (``debugLogEnvironment``, which ``ChildProcess`` passes to
/// every child) and scan `DIR/logs/*.log` when their deployment directory goes away.
public enum LogScan {
    /// What was found, where; `excerpt` shows the finding's surroundings with the digits masked.
    public struct Finding: Sendable, CustomStringConvertible {
        public let kind: String
        public let file: String
        public let excerpt: String

        public var description: String { "\(kind) in \(file): \(excerpt)" }
    }

    /// Values a test handled and the logs must not contain in any form it checks (as written, and for digits
    /// also grouped by spaces or dashes; bytes as hex either case and as base64).
    public struct Secrets: Sendable {
        public var texts: [String]
        public var bytes: [[UInt8]]

        public init(texts: [String] = [], bytes: [[UInt8]] = []) {
            self.texts = texts
            self.bytes = bytes
        }
    }

    /// The environment that makes every service log at debug level (`ORCHARD_<SERVICE>_LOG_LEVEL`), and the
    /// terminal too.
    public static let debugLogEnvironment: [String: String] = [
        "ORCHARD_NETWORK_LOG_LEVEL": "debug", "ORCHARD_PAY_LOG_LEVEL": "debug", "ORCHARD_MERCHANT_LOG_LEVEL": "debug",
        "ORCHARD_TERMINAL_LOG_LEVEL": "debug",
    ]

    /// The findings in `text` (the contents of `file`).
    public static func findings(in text: String, file: String = "", secrets: Secrets = Secrets()) -> [Finding] {
        var found: [Finding] = []
        func add(_ kind: String, _ range: Range<String.Index>) {
            found.append(Finding(kind: kind, file: file, excerpt: excerpt(text, range)))
        }
        for range in cardNumbers(in: text) { add("card number", range) }
        for (kind, expression) in patterns {
            let whole = NSRange(text.startIndex..., in: text)
            for match in expression.matches(in: text, range: whole) {
                if let range = Range(match.range, in: text) { add(kind, range) }
            }
        }
        for value in secrets.texts where !value.isEmpty {
            var forms = [value]
            if value.allSatisfy(\.isNumber) && value.count >= 8 {
                forms += [" ", "-"].map { separator in
                    stride(from: 0, to: value.count, by: 4).map { start in
                        String(value.dropFirst(start).prefix(4))
                    }.joined(separator: separator)
                }
            }
            for form in forms {
                if let range = text.range(of: form) { add("a value the test handled", range) }
            }
        }
        for value in secrets.bytes where value.count >= 4 {
            let hex = value.map { String(format: "%02x", $0) }.joined()
            for form in [hex, hex.uppercased(), Data(value).base64EncodedString()] {
                if let range = text.range(of: form) { add("bytes the test handled", range) }
            }
        }
        return found
    }

    /// The findings in every `*.log` file under `DIR/logs` of the deployment at `path` (none when there is no
    /// such directory).
    public static func findings(inLogsOf path: String, secrets: Secrets = Secrets()) -> [Finding] {
        let logs = path + "/logs"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: logs) else { return [] }
        var found: [Finding] = []
        for name in names.sorted() where name.hasSuffix(".log") {
            guard let data = FileManager.default.contents(atPath: logs + "/" + name) else { continue }
            found += findings(in: String(decoding: data, as: UTF8.self), file: "logs/" + name, secrets: secrets)
        }
        return found
    }

    /// Records an issue for every finding in the logs of the deployment at `path` (V2) and, with
    /// `requireDebug`, when no log holds a debug-level line (the services did not log at debug level); returns
    /// how many log bytes were scanned.
    @discardableResult
    public static func expectCleanLogs(
        of path: String, secrets: Secrets = Secrets(), requireDebug: Bool = false,
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> Int {
        for finding in findings(inLogsOf: path, secrets: secrets) {
            Issue.record("V2: \(finding)", sourceLocation: sourceLocation)
        }
        if requireDebug {
            let logs = logFiles(of: path).keys.compactMap { FileManager.default.contents(atPath: path + "/logs/" + $0) }
            let debug = logs.contains { String(decoding: $0, as: UTF8.self).contains(#""level":"debug""#) }
            if !debug { Issue.record("V2: no debug-level line in \(path)/logs", sourceLocation: sourceLocation) }
        }
        return logFiles(of: path).values.reduce(0, +)
    }

    /// The log files under `DIR/logs` of the deployment at `path` and their sizes in bytes.
    public static func logFiles(of path: String) -> [String: Int] {
        let logs = path + "/logs"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: logs) else { return [:] }
        var sizes: [String: Int] = [:]
        for name in names where name.hasSuffix(".log") {
            let attributes = try? FileManager.default.attributesOfItem(atPath: logs + "/" + name)
            sizes[name] = (attributes?[.size] as? NSNumber)?.intValue ?? 0
        }
        return sizes
    }

    // MARK: Shapes

    /// Maximal runs of 13 to 19 digits, not glued to letters or digits (so not inside a hex string, a UUID's
    /// last group or a longer number), starting with 2 to 6 like every payment network's numbers (so not a
    /// millisecond timestamp), and passing the Luhn check.
    static func cardNumbers(in text: String) -> [Range<String.Index>] {
        var ranges: [Range<String.Index>] = []
        var index = text.startIndex
        while index < text.endIndex {
            guard text[index].isASCII, text[index].isNumber else {
                index = text.index(after: index)
                continue
            }
            let start = index
            while index < text.endIndex, text[index].isASCII, text[index].isNumber { index = text.index(after: index) }
            let digits = text[start..<index]
            let before = start > text.startIndex ? text[text.index(before: start)] : " "
            let after = index < text.endIndex ? text[index] : " "
            guard (13...19).contains(digits.count), !(before.isLetter || after.isLetter),
                "23456".contains(digits.first!), luhn(digits)
            else { continue }
            ranges.append(start..<index)
        }
        return ranges
    }

    static func luhn(_ digits: Substring) -> Bool {
        var sum = 0
        for (offset, character) in digits.reversed().enumerated() {
            guard let digit = character.wholeNumberValue else { return false }
            if offset % 2 == 1 {
                sum += digit * 2 > 9 ? digit * 2 - 9 : digit * 2
            } else {
                sum += digit
            }
        }
        return sum % 10 == 0
    }

    /// The other shapes: a value under a CVV's, a cryptogram's or a secret key's name, a PEM private key, a street
    /// address line.
    static let patterns: [(String, NSRegularExpression)] = [
        (
            "CVV",
            #"(?i)\b(cvv2?|cvc2?|card_?verification(_?value)?|security_?code)"?\s*[:=]\s*"?\d{3,4}\b"#
        ),
        (
            "cryptogram",
            #"(?i)(cryptogram|arqc|tavv|onlinePaymentCryptogram)[a-z_]*"?\s*[:=]\s*"?(?!\*)[A-Za-z0-9+/=]{16,}"#
        ),
        (
            "key bytes",
            #"(?i)\b(private_?key|secret_?key|master_?key|session_?key|storage_?key|key_?bytes|hmac_?key|aes_?key)"#
                + #""?\s*[:=]\s*"?(?!\*)([0-9a-f]{32,}|[A-Za-z0-9+/]{40,}={0,2})"#
        ),
        ("key bytes", #"-----BEGIN (EC |RSA |ENCRYPTED )?PRIVATE KEY-----"#),
        (
            "full address",
            #"\b\d{1,5} (?:[A-Z][a-z]+ ){1,3}(?:Street|St|Avenue|Ave|Road|Rd|Lane|Ln|Drive|Dr|Boulevard|Blvd|Way|"#
                + #"Court|Ct|Loop|Place|Pl|Square|Sq|Parkway|Pkwy)\b"#
        ),
    ].map { ($0.0, try! NSRegularExpression(pattern: $0.1)) }

    /// The line around `range`, its digits masked after the first six of a long run, at most 160 characters.
    static func excerpt(_ text: String, _ range: Range<String.Index>) -> String {
        let lineStart = text[..<range.lowerBound].lastIndex(of: "\n").map { text.index(after: $0) } ?? text.startIndex
        let lineEnd = text[range.upperBound...].firstIndex(of: "\n") ?? text.endIndex
        var line = String(text[lineStart..<lineEnd])
        if line.count > 160 {
            let offset = text.distance(from: lineStart, to: range.lowerBound)
            line = String(line.dropFirst(max(0, offset - 60)).prefix(160))
        }
        var digits = 0
        return String(
            line.map { character -> Character in
                guard character.isNumber else {
                    digits = 0
                    return character
                }
                digits += 1
                return digits > 6 ? "*" : character
            })
    }
}
