import Foundation

// The fenced blocks of a Markdown file, with the run markers written before them (docs/deployment.md, "How the
// docs are tested").

/// How a block is run, from the `<!-- run: … -->` comments on the lines just above its fence.
struct RunMarker: Equatable, Sendable {
    /// `run: skip (reason)`: not run; the reason is listed in the test output.
    var skip: String?
    /// `run: background`: started, ready once it printed a line on stdout, ended at the end of the file.
    var background = false
    /// `run: timeout N`: seconds before the block is ended and fails (else ``DocBlock/defaultTimeout``).
    var timeout: Int?
}

/// One fenced block of a Markdown file.
struct DocBlock: Equatable, Sendable {
    static let defaultTimeout = 60

    let file: String
    /// The line of its opening fence (1-based).
    let line: Int
    /// The info string's first word (`sh`, `output`, `json`, …); empty when the fence has none.
    let tag: String
    /// Its lines, without the fence's indentation.
    let body: String
    let marker: RunMarker

    var location: String { "\(file):\(line)" }
}

/// Why a file's blocks could not be read, naming file:line.
struct DocFormatError: Error, CustomStringConvertible, Equatable {
    let location: String
    let message: String
    var description: String { "\(location): \(message)" }
}

enum MarkdownBlocks {
    /// The tags a block may carry. `sh` runs; `output` is compared with the `sh` block before it; `usage` is a
    /// command synopsis whose commands and options are checked against the command line; the rest are shown only.
    static let knownTags: Set<String> = [
        "sh", "output", "usage", "json", "swift", "text", "sql", "html", "javascript", "c", "diff",
    ]

    static let untaggedMessage = "a fenced block without a tag (sh, output, usage, json, swift, text, …)"

    /// The blocks of `text` (the contents of `file`), or the first error: a fence without a tag or with an unknown
    /// one, an unclosed fence, a malformed or misplaced run marker.
    static func parse(_ text: String, file: String) throws(DocFormatError) -> [DocBlock] {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var blocks: [DocBlock] = []
        var pending = RunMarker()
        var pendingLine: Int?
        var index = 0
        while index < lines.count {
            let line = lines[index]
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if let marker = try runMarker(trimmed, location: "\(file):\(index + 1)") {
                pending = merge(pending, marker)
                pendingLine = pendingLine ?? index + 1
                index += 1
                continue
            }
            guard let fence = openingFence(line) else {
                if !trimmed.isEmpty, let markerLine = pendingLine {
                    throw DocFormatError(
                        location: "\(file):\(markerLine)", message: "a run marker must come just before a fence")
                }
                index += 1
                continue
            }
            let start = index + 1
            guard !fence.tag.isEmpty else {
                throw DocFormatError(location: "\(file):\(start)", message: untaggedMessage)
            }
            guard knownTags.contains(fence.tag) else {
                throw DocFormatError(location: "\(file):\(start)", message: "an unknown tag `\(fence.tag)`")
            }
            var body: [String] = []
            index += 1
            var closed = false
            while index < lines.count {
                let candidate = lines[index]
                if candidate.trimmingCharacters(in: .whitespaces).hasPrefix(fence.marks),
                    candidate.trimmingCharacters(in: .whitespaces).allSatisfy({ $0 == fence.marks.first })
                {
                    closed = true
                    break
                }
                body.append(String(candidate.dropFirst(min(fence.indent, leadingSpaces(candidate)))))
                index += 1
            }
            guard closed else {
                throw DocFormatError(location: "\(file):\(start)", message: "the block is never closed")
            }
            if pending != RunMarker(), fence.tag != "sh" {
                throw DocFormatError(
                    location: "\(file):\(start)", message: "run markers apply to `sh` blocks only")
            }
            blocks.append(
                DocBlock(file: file, line: start, tag: fence.tag, body: body.joined(separator: "\n"), marker: pending))
            pending = RunMarker()
            pendingLine = nil
            index += 1
        }
        if let markerLine = pendingLine {
            throw DocFormatError(
                location: "\(file):\(markerLine)", message: "a run marker must come just before a fence")
        }
        return blocks
    }

    private struct Fence {
        let marks: String
        let indent: Int
        let tag: String
    }

    private static func leadingSpaces(_ line: String) -> Int { line.prefix { $0 == " " }.count }

    private static func openingFence(_ line: String) -> Fence? {
        let indent = leadingSpaces(line)
        guard indent < 4 else { return nil }
        let rest = line.dropFirst(indent)
        for mark in ["```", "~~~"] where rest.hasPrefix(mark) {
            let character = mark.first!
            let marks = String(rest.prefix { $0 == character })
            let info = rest.dropFirst(marks.count).trimmingCharacters(in: .whitespaces)
            let tag = info.split(separator: " ").first.map(String.init) ?? ""
            return Fence(marks: marks, indent: indent, tag: tag)
        }
        return nil
    }

    /// A `<!-- run: … -->` line as a marker, nil for any other line.
    private static func runMarker(_ line: String, location: String) throws(DocFormatError) -> RunMarker? {
        guard line.hasPrefix("<!--"), line.hasSuffix("-->") else { return nil }
        let inner = line.dropFirst(4).dropLast(3).trimmingCharacters(in: .whitespaces)
        guard inner.hasPrefix("run:") else { return nil }
        let directive = inner.dropFirst(4).trimmingCharacters(in: .whitespaces)
        var marker = RunMarker()
        if directive == "background" {
            marker.background = true
        } else if directive.hasPrefix("timeout ") {
            guard let seconds = Int(directive.dropFirst(8).trimmingCharacters(in: .whitespaces)), seconds > 0 else {
                throw DocFormatError(location: location, message: "`run: timeout N` takes a number of seconds")
            }
            marker.timeout = seconds
        } else if directive.hasPrefix("skip") {
            let reason = directive.dropFirst(4).trimmingCharacters(in: .whitespaces)
            guard reason.hasPrefix("("), reason.hasSuffix(")"), reason.count > 2 else {
                throw DocFormatError(location: location, message: "`run: skip` needs its reason: `run: skip (why)`")
            }
            marker.skip = String(reason.dropFirst().dropLast())
        } else {
            throw DocFormatError(
                location: location,
                message: "an unknown run marker `\(directive)` (skip (reason), background, timeout N)"
            )
        }
        return marker
    }

    private static func merge(_ first: RunMarker, _ second: RunMarker) -> RunMarker {
        RunMarker(
            skip: second.skip ?? first.skip, background: first.background || second.background,
            timeout: second.timeout ?? first.timeout)
    }
}

/// ICU regular expressions (Foundation's), for the lookbehinds Swift's `Regex` does not support.
struct ICURegex: @unchecked Sendable {
    // @unchecked: NSRegularExpression is immutable and documented thread-safe.
    let expression: NSRegularExpression

    init(_ pattern: String) {
        expression = try! NSRegularExpression(pattern: pattern)
    }

    /// Each match's capture groups (0: the whole match; a group that did not take part is "").
    func matches(in text: String) -> [[String]] {
        let range = NSRange(text.startIndex..., in: text)
        return expression.matches(in: text, range: range).map { match in
            (0..<match.numberOfRanges).map { index in
                Range(match.range(at: index), in: text).map { String(text[$0]) } ?? ""
            }
        }
    }

    func contains(_ text: String) -> Bool {
        expression.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) != nil
    }

    /// `text` with every match replaced by `template` (taken literally).
    func replacing(in text: String, with replacement: String) -> String {
        expression.stringByReplacingMatches(
            in: text, range: NSRange(text.startIndex..., in: text),
            withTemplate: NSRegularExpression.escapedTemplate(for: replacement))
    }
}
