import Foundation

@testable import OrchardCLI

/// What the docs and the `--help` texts say about the command line, checked against the command tree
/// (`CommandRegistry.root`) and the deployment layout.
enum CommandLineCheck {
    /// A command reached by its words under `orchard`.
    struct Resolved {
        let path: [String]
        let command: Command

        /// Every option name the command takes (`--data-dir` and `--help` included); for a group, those of every
        /// command under it.
        var optionNames: Set<String> {
            var names: Set<String> = ["data-dir", "help"]
            var pending = [command]
            while let next = pending.popLast() {
                names.formUnion(next.options.map(\.name))
                pending.append(contentsOf: next.subcommands)
            }
            return names
        }
    }

    /// The longest command path `words` starts with, nil when the first word names no command.
    static func resolve(_ words: [String], root: Command = CommandRegistry.root) -> Resolved? {
        var command = root
        var path: [String] = []
        for word in words {
            guard let sub = command.subcommands.first(where: { $0.name == word }) else { break }
            command = sub
            path.append(word)
        }
        return path.isEmpty ? nil : Resolved(path: path, command: command)
    }

    /// Every command under `root` with its path (`root` itself first, as `[]`).
    static func walk(_ root: Command = CommandRegistry.root) -> [Resolved] {
        var found: [Resolved] = []
        func visit(_ command: Command, _ path: [String]) {
            found.append(Resolved(path: path, command: command))
            for sub in command.subcommands { visit(sub, path + [sub.name]) }
        }
        visit(root, [])
        return found
    }

    static let optionPattern = ICURegex(#"(?<![A-Za-z0-9-])--([a-z][a-z0-9-]*)"#)
    static let pathPattern = ICURegex(
        #"(?<![A-Za-z0-9_./-])(?:DIR/)?((?:pki|run|logs|devices|merchant-site)/[A-Za-z0-9_.<>*|-]+(?:/[A-Za-z0-9_.<>*|-]+)*|DIR/[A-Za-z0-9_.<>*-]+)"#
    )

    static func optionsNamed(in text: String) -> [String] {
        optionPattern.matches(in: text).map { $0[1] }
    }

    /// The problems of the `orchard …` commands of a `usage` or `sh` block: a command that does not exist
    /// (`usage` only: in a script the word may be a path), or an option it does not take. Each logical line (with
    /// its `\` and indented continuations) is one command; a `#` comment is not read.
    static func problems(inBlock body: String, strict: Bool, root: Command = CommandRegistry.root) -> [String] {
        var logical: [String] = []
        for raw in body.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            let line = raw.replacing(#/(^|\s)#.*$/#, with: "")
            let continues = logical.last.map { $0.hasSuffix("\\") } ?? false
            let indented = raw.first == " " && !line.trimmingCharacters(in: .whitespaces).hasPrefix("orchard ")
            if (continues || indented), !logical.isEmpty {
                logical[logical.count - 1] = String(logical[logical.count - 1].dropLast(continues ? 1 : 0)) + " " + line
            } else {
                logical.append(line)
            }
        }
        var problems: [String] = []
        for line in logical {
            // Each command of the line: after `orchard` (or `…/orchard`), up to the next `|`, `;`, `&&` or `$(`.
            let segments = line.split(whereSeparator: { "|;&()`".contains($0) })
            for segment in segments {
                let words = segment.split(separator: " ").map(String.init)
                guard let start = words.firstIndex(where: { $0 == "orchard" || $0.hasSuffix("/orchard") }) else {
                    continue
                }
                let rest = Array(words[(start + 1)...])
                guard let resolved = resolve(rest, root: root) else {
                    if strict, let first = rest.first, !first.hasPrefix("-") {
                        problems.append("`orchard \(first)` is no command")
                    }
                    continue
                }
                let names = resolved.optionNames
                for option in optionsNamed(in: String(segment)) where !names.contains(option) {
                    problems.append("`orchard \(resolved.path.joined(separator: " "))` has no option --\(option)")
                }
            }
        }
        return problems
    }

    /// Paths under a deployment that a text names: `DIR/…`, `pki/…`, `run/…`, `logs/…`, `devices/…`, with `a.pem|.key`
    /// read as both files.
    static func deploymentPaths(in text: String) -> [String] {
        var paths: [String] = []
        for match in pathPattern.matches(in: text) {
            var path = match[1]
            if path.hasPrefix("DIR/") { path.removeFirst(4) }
            while let last = path.last, ".,:|".contains(last) { path.removeLast() }
            let alternatives = path.split(separator: "|").map(String.init)
            guard let first = alternatives.first else { continue }
            paths.append(first)
            for other in alternatives.dropFirst() {
                // `merchant-identity.pem|.key`: the other extension of the same file.
                if !other.contains("/"), let dot = first.lastIndex(of: ".") {
                    paths.append(String(first[..<dot]) + (other.hasPrefix(".") ? other : "." + other))
                } else {
                    paths.append(other)
                }
            }
        }
        return paths
    }

    /// One row of docs/deployment.md's table of the deployment directory.
    struct LayoutEntry {
        /// As the table writes it, without `DIR/`.
        let path: String
        let pattern: ICURegex
        /// A folder (`DIR/devices/<name>/`) other than a key folder: anything under it is documented with it.
        let folder: Bool
    }

    /// The documented layout: docs/deployment.md's table of `DIR/…` paths, placeholders (`<party>`, `NAME`) as
    /// wildcards.
    static func documentedLayout(_ deploymentDoc: String) -> [LayoutEntry] {
        deploymentDoc.split(separator: "\n").filter { $0.hasPrefix("| `DIR/") }.compactMap { row in
            guard let match = row.firstMatch(of: #/^\| `DIR/([^`]*)`/#) else { return nil }
            var path = String(match.output.1)
            // `pki/<party>/NAME.pem` would let any name through: a key file is one `init` writes or a row of its own.
            if path.hasPrefix("pki/<party>/NAME.") && (path.hasSuffix(".pem") || path.hasSuffix(".key")) {
                return LayoutEntry(
                    path: path, pattern: ICURegex("^\(NSRegularExpression.escapedPattern(for: path))$"), folder: false)
            }
            let folder = path.hasSuffix("/") && !path.hasPrefix("pki/") && path != "/"
            if path.hasSuffix("/") { path.removeLast() }
            let escaped = NSRegularExpression.escapedPattern(for: path)
                .replacing(#/<[A-Za-z-]+>|NAME/#, with: "[A-Za-z0-9_-]+")
            return LayoutEntry(
                path: path, pattern: ICURegex(folder ? "^\(escaped)(/.*)?$" : "^\(escaped)$"), folder: folder)
        }
    }

    /// Whether `path` (relative to DIR) is one `init` wrote (a key pair by its name too), or a documented one.
    static func isKnown(_ path: String, written: Set<String>, layout: [LayoutEntry]) -> Bool {
        // A placeholder cut short by prose (`pki/merchant/merchant-portal-<16 hex digits…>`) is not a path.
        if path.contains("<"), !path.contains(">") { return true }
        if layout.contains(where: { $0.path == path }) { return true }
        // `run/*`: any file of a folder the layout has.
        if path.hasSuffix("/*") {
            let folder = String(path.dropLast(1))
            return written.contains { $0.hasPrefix(folder) } || layout.contains { $0.path.hasPrefix(folder) }
        }
        let plain = path.replacing(#/<[A-Za-z-]+>|\*/#, with: "x")
        // Under pki/ only the key folders `init` makes (and `peers`, which `pki import` makes) hold files.
        let parts = path.split(separator: "/")
        let placeholder = parts.count > 1 && (parts[1].contains("<") || parts[1].contains("*") || parts[1] == "NAME")
        if parts.first == "pki", parts.count > 1, !placeholder, parts[1] != "peers",
            !written.contains("pki/\(parts[1])")
        {
            return false
        }
        let candidates = [plain, plain + ".pem", plain + ".key"]
        return candidates.contains { candidate in
            written.contains(candidate) || layout.contains { $0.pattern.contains(candidate) }
        }
    }

    /// The problems of one command's `--help`: paths that are neither written by `init` nor documented, options it
    /// does not take.
    static func helpProblems(
        _ resolved: Resolved, written: Set<String>, layout: [LayoutEntry]
    ) -> [String] {
        let text = resolved.command.help(path: ["orchard"] + resolved.path)
        let name = (["orchard"] + resolved.path).joined(separator: " ")
        var problems: [String] = []
        for path in deploymentPaths(in: text) where !isKnown(path, written: written, layout: layout) {
            problems.append(
                "`\(name) --help` names \(path), which `orchard init` does not write and docs/deployment.md does not list"
            )
        }
        // An option the text names is its own, that of another command it names (`device run --auto-auth`), or
        // that of another program it names (`wrk --latency`).
        for option in Set(optionsNamed(in: text)) where !resolved.optionNames.contains(option) {
            if mentionsCommandTaking(option, in: text) { continue }
            if let tool = externalOptions[option], text.contains(tool) { continue }
            problems.append("`\(name) --help` names --\(option), which it does not take")
        }
        return problems
    }

    /// Options of other programs that help texts name, with the program's name the text must name too.
    static let externalOptions = ["latency": "wrk", "unix-socket": "curl", "no-sandbox": "Chromium"]

    /// Whether `text` names a command that takes `option`: a leaf (`device run`, `merchant certs`) anywhere, or a
    /// group after `orchard` (`orchard serve <service> --instance N`).
    static func mentionsCommandTaking(_ option: String, in text: String) -> Bool {
        let words = text.split(whereSeparator: { " \n`(),.;:".contains($0) }).map(String.init)
        for index in words.indices {
            guard let other = resolve(Array(words[index...])) else { continue }
            let leaf = other.command.subcommands.isEmpty
            if leaf, other.command.options.contains(where: { $0.name == option }) { return true }
            if !leaf, index > 0, words[index - 1] == "orchard", other.optionNames.contains(option) { return true }
        }
        return false
    }
}
