import CommandTestSupport
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// What running one file's blocks gave.
struct DocRunReport: Sendable {
    struct Failure: Sendable, CustomStringConvertible {
        let location: String
        let message: String
        let stderr: String
        var description: String {
            let tail = stderr.split(separator: "\n", omittingEmptySubsequences: false).suffix(40)
                .joined(separator: "\n")
            return tail.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty
                ? "\(location): \(message)" : "\(location): \(message)\n--- its stderr ---\n\(tail)"
        }
    }

    var ran: [String] = []
    var skipped: [(location: String, reason: String)] = []
    var failures: [Failure] = []
    /// Each block's duration in seconds, by location (for the budget).
    var seconds: [(location: String, seconds: Double)] = []
}

/// Runs a file's `sh` blocks in order in a fresh deployment, and compares each `output` block with what the `sh`
/// block before it printed on stdout (docs/deployment.md, "How the docs are tested").
struct DocRunner: Sendable {
    /// Commands a block may use that are not always installed: without one, the block is skipped, or fails when
    /// `CI=true` (scripts/bootstrap installs them).
    var tools = ["jq", "curl"]
    /// Added to each block's environment (tests set PATH and CI here).
    var environment: [String: String] = [:]
    /// The directory put first on PATH: where `orchard` is.
    var binDirectory: String

    init(binDirectory: String, environment: [String: String] = [:]) {
        self.binDirectory = binDirectory
        self.environment = environment
    }

    /// `DIR` as a word (not `DIR2`, not `ORCHARD_DATA_DIR`) replaced by `directory`.
    static func substitute(_ body: String, directory: String) -> String {
        placeholder.replacing(in: body, with: directory)
    }

    static let placeholder = ICURegex(#"(?<![A-Za-z0-9_$])DIR(?![A-Za-z0-9_])"#)

    func run(_ blocks: [DocBlock]) async -> DocRunReport {
        var report = DocRunReport()
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("orchard-doc-\(UUID())")
        let work = root.appendingPathComponent("work")
        let home = root.appendingPathComponent("home")
        let capture = root.appendingPathComponent("capture")
        for folder in [work, home, capture] {
            try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        }
        let directory = work.appendingPathComponent("deployment").path
        var groups: [Int32] = []
        var backgrounds: [ChildProcess] = []
        var previous: (block: DocBlock, stdout: String?)?
        let path = [
            binDirectory, environment["PATH"] ?? ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin",
        ]
        .joined(separator: ":")
        let ci = (environment["CI"] ?? ProcessInfo.processInfo.environment["CI"]) == "true"
        var variables: [String: String?] = [
            "HOME": home.path, "ORCHARD_DATA_DIR": nil, "ORCHARD_PASSCODE": nil, "ORCHARD_NEW_PASSCODE": nil,
            "ORCHARD_ONE_TIME_CODE": nil,
        ]
        for (key, value) in environment { variables[key] = value }
        variables["PATH"] = path

        for (number, block) in blocks.enumerated() {
            if block.tag == "output" {
                guard let before = previous, before.block.tag == "sh" else {
                    report.failures.append(
                        .init(
                            location: block.location, message: "an `output` block must follow an `sh` block", stderr: ""
                        ))
                    continue
                }
                if let stdout = before.stdout, let mismatch = OutputMatch.mismatch(expected: block.body, actual: stdout)
                {
                    report.failures.append(.init(location: block.location, message: mismatch, stderr: ""))
                }
                previous = nil
                continue
            }
            previous = (block, nil)
            guard block.tag == "sh" else { continue }
            if let reason = block.marker.skip {
                report.skipped.append((block.location, reason))
                continue
            }
            if let missing = tools.first(where: { block.body.contains(word: $0) && !Self.installed($0, path: path) }) {
                if ci {
                    report.failures.append(
                        .init(
                            location: block.location,
                            message: "`\(missing)` is not installed (CI=true: scripts/bootstrap installs it)",
                            stderr: ""))
                } else {
                    report.skipped.append((block.location, "\(missing) is not installed"))
                }
                continue
            }
            let script = "cd '\(work.path)'; " + Self.substitute(block.body, directory: directory) + "\n"
            let out = capture.appendingPathComponent("\(number).out").path
            let err = capture.appendingPathComponent("\(number).err").path
            let started = ContinuousClock.now
            let child: ChildProcess
            do {
                child = try ChildProcess(
                    "/usr/bin/python3", ["-c", Self.shell, script], environment: variables, stdout: .file(out),
                    stderr: .file(err))
            } catch {
                report.failures.append(
                    .init(location: block.location, message: "cannot start bash: \(error)", stderr: ""))
                continue
            }
            groups.append(child.pid)
            let timeout = block.marker.timeout ?? DocBlock.defaultTimeout
            if block.marker.background {
                backgrounds.append(child)
                let ready = await Self.firstLine(of: out, from: child, within: timeout)
                if !ready {
                    let how =
                        child.ended.map { "ended (\($0)) before it printed a line" }
                        ?? "printed no line in \(timeout) s"
                    report.failures.append(
                        .init(location: block.location, message: "the background block \(how)", stderr: Self.read(err)))
                }
            } else {
                let ended = await Self.wait(child, seconds: timeout)
                let stderr = Self.read(err)
                switch ended {
                case nil:
                    Self.signal(group: child.pid, SIGKILL)
                    _ = await child.exit()
                    report.failures.append(
                        .init(location: block.location, message: "still running after \(timeout) s", stderr: stderr))
                case .exited(0)?:
                    previous = (block, Self.read(out))
                case let termination?:
                    report.failures.append(.init(location: block.location, message: "\(termination)", stderr: stderr))
                }
            }
            report.seconds.append((block.location, (ContinuousClock.now - started).seconds))
            report.ran.append(block.location)
        }

        // Whatever the blocks left running (background blocks, `&` inside a block) ends with the file.
        for group in groups { Self.signal(group: group, SIGTERM) }
        for child in backgrounds where await Self.wait(child, seconds: 20) == nil {
            Self.signal(group: child.pid, SIGKILL)
            _ = await child.exit()
        }
        for group in groups {
            var waited = 0
            while Self.hasLiveMembers(group), waited < 200 {
                try? await Task.sleep(for: .milliseconds(50))
                waited += 1
            }
            Self.signal(group: group, SIGKILL)
        }
        try? FileManager.default.removeItem(at: root)
        return report
    }

    /// Starts the block's bash as a reader's shell would: signals unblocked (a child inherits the test thread's
    /// mask, which blocks SIGTERM and SIGINT), in a session and process group of its own, which the runner ends.
    static let shell = """
        import os, signal, sys
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
            signal.signal(number, signal.SIG_DFL)
        os.setsid()
        os.execv("/bin/bash", ["bash", "-e", "-o", "pipefail", "-c", sys.argv[1]])
        """

    static func installed(_ tool: String, path: String) -> Bool {
        path.split(separator: ":").contains { FileManager.default.isExecutableFile(atPath: "\($0)/\(tool)") }
    }

    static func read(_ path: String) -> String {
        (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    }

    static func signal(group: Int32, _ signal: Int32) { _ = Glibc.kill(-group, signal) }

    /// Whether a process of process group `group` still runs (zombies, which nobody may reap here, do not count).
    static func hasLiveMembers(_ group: Int32) -> Bool {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for entry in entries where entry.allSatisfy(\.isNumber) {
            guard let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { continue }
            // After the command's closing parenthesis: state, ppid, pgrp, …
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 2, fields[2] == "\(group)", fields[0] != "Z", fields[0] != "X" { return true }
        }
        return false
    }

    /// How `child` ended, or nil when it still runs after `seconds` (polled: an `exit()` awaited in a task group
    /// would hold the group open until the child ends).
    static func wait(_ child: ChildProcess, seconds: Int) async -> ChildProcess.Termination? {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            if let ended = child.ended { return ended }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return child.ended
    }

    /// Whether `child` wrote a whole line to `path` within `seconds` (false as soon as it ends without one).
    static func firstLine(of path: String, from child: ChildProcess, within seconds: Int) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            if read(path).contains("\n") { return true }
            if child.ended != nil { return false }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return false
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

extension String {
    /// Whether `word` occurs delimited by non-word characters (a command name in a script).
    func contains(word: String) -> Bool {
        var searchRange = startIndex..<endIndex
        while let found = range(of: word, range: searchRange) {
            let before = found.lowerBound == startIndex ? nil : self[index(before: found.lowerBound)]
            let after = found.upperBound == endIndex ? nil : self[found.upperBound]
            let isWordCharacter: (Character?) -> Bool = {
                $0.map { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" } ?? false
            }
            if !isWordCharacter(before), !isWordCharacter(after) { return true }
            searchRange = found.upperBound..<endIndex
        }
        return false
    }
}

/// An `output` block against what was printed: both normalized (ports, UUIDs, hex identifiers, times), then line by
/// line, where `…` in an expected line matches any text.
enum OutputMatch {
    static func normalize(_ text: String) -> String {
        var text = text
        // Times first: an epoch in milliseconds is also a run of hex digits.
        text.replace(#/\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?/#, with: "<time>")
        text.replace(#/\b1\d{12}\b/#, with: "<time>")
        text.replace(
            #/\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b/#, with: "<uuid>")
        text.replace(#/\b(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{8,}\b/#, with: "<hex>")
        text.replace(#/(127\.0\.0\.1|localhost|\]):\d{2,5}\b/#, with: { "\($0.output.1):<port>" })
        text.replace(#/("port"\s*:\s*)\d+/#, with: { "\($0.output.1)<port>" })
        text.replace(#/"pid"\s*:\s*\d+/#, with: "\"pid\":<pid>")
        return text
    }

    /// Why `actual` does not match `expected`, or nil when it does.
    static func mismatch(expected: String, actual: String) -> String? {
        let want = lines(normalize(expected))
        let got = lines(normalize(actual))
        for (index, line) in want.enumerated() {
            guard index < got.count else {
                return "the output ends before its line \(index + 1): expected `\(line)`"
            }
            if !matches(line, got[index]) {
                return "output line \(index + 1): expected `\(line)`, printed `\(got[index])`"
            }
        }
        if got.count > want.count {
            return "the output has \(got.count - want.count) more line(s), from `\(got[want.count])`"
        }
        return nil
    }

    private static func lines(_ text: String) -> [String] {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map {
            String($0).replacing(#/\s+$/#, with: "")
        }
        while lines.last == "" { lines.removeLast() }
        return lines
    }

    private static func matches(_ pattern: String, _ line: String) -> Bool {
        guard pattern.contains("…") else { return pattern == line }
        let parts = pattern.split(separator: "…", omittingEmptySubsequences: false).map(String.init)
        guard line.hasPrefix(parts.first!), line.hasSuffix(parts.last!),
            line.count >= parts.first!.count + parts.last!.count
        else { return false }
        var rest = Substring(line.dropFirst(parts.first!.count))
        for part in parts.dropFirst().dropLast() {
            guard let found = rest.range(of: part) else { return false }
            rest = rest[found.upperBound...]
        }
        return rest.hasSuffix(parts.last!)
    }
}
