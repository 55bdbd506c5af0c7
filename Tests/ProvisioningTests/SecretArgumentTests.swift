import CommandTestSupport
import Foundation
import Testing

/// The code the refused options are given; it must appear in no output.
private let refusedCode = "739146"

/// Passcodes and the issuer's one-time code never go on the command line, where every user's `ps` and the shell
/// history see them: each command reads them from a 0600 file, its environment variable or stdin, and refuses the
/// old value-taking options with a hint, never echoing the value.
@Suite("Passcodes and one-time codes off the command line")
struct SecretArgumentTests {
    static let secret = refusedCode

    /// A fresh directory path (not made) and a function removing it from a text, since the path's random UUID
    /// may hold the secret's digits.
    static func scratch() -> (String, (String) -> String) {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("orchard-argv-\(UUID().uuidString)")
            .path
        return (path, { $0.replacingOccurrences(of: path, with: "DIR") })
    }

    /// Writes `contents` to a file of mode `mode` outside any data directory; the caller removes it.
    static func secretFile(_ contents: String, mode: Int) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("orchard-code-\(UUID().uuidString)")
            .path
        guard FileManager.default.createFile(atPath: path, contents: Data(contents.utf8)) else {
            throw CommandTestFailure("cannot write \(path)")
        }
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
        return path
    }

    @Test(
        "U5: --passcode, --set, --current, --otp and --auto-auth passcode:CODE refused with a hint, never echoed",
        arguments: [
            (
                [
                    "device", "create", "--name", "p", "--kind", "phone", "--biometry", "face", "--passcode",
                    refusedCode,
                ],
                "--passcode-file"
            ),
            (
                [
                    "device", "create", "--name", "p", "--kind", "phone", "--biometry", "face",
                    "--passcode=\(refusedCode)",
                ],
                "--passcode-file"
            ),
            (
                ["device", "unlock", "--name", "p", "--method", "passcode", "--passcode", refusedCode],
                "ORCHARD_PASSCODE"
            ),
            (
                ["device", "authenticate", "--name", "p", "--method", "passcode", "--passcode", refusedCode],
                "ORCHARD_PASSCODE"
            ),
            (
                ["device", "sheet", "authenticate", "--name", "p", "--method", "passcode", "--passcode", refusedCode],
                "ORCHARD_PASSCODE"
            ),
            (["device", "passcode", "--name", "p", "--set", refusedCode], "ORCHARD_NEW_PASSCODE"),
            (["device", "passcode", "--name", "p", "--change", "--current", refusedCode], "ORCHARD_PASSCODE"),
            (["app", "buy", "--item", "Coffee", "--amount", "1.00", "--passcode", refusedCode], "ORCHARD_PASSCODE"),
            (
                ["device", "add-card", "--name", "p", "--expiry", "12/34", "--cardholder", "A", "--otp", refusedCode],
                "ORCHARD_ONE_TIME_CODE"
            ),
            (["device", "run", "--name", "p", "--auto-auth", "passcode:\(refusedCode)"], "--auto-auth passcode"),
            (["device", "run", "--name", "p", "--auto-auth", "face-id,passcode:\(refusedCode)"], "ORCHARD_PASSCODE"),
        ])
    func refusedWithAHint(arguments: [String], hint: String) async throws {
        let (path, withoutPath) = Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let output = try await orchard(arguments + ["--data-dir", path])
        #expect(output.status == 2 && output.stdout.isEmpty, "\(output.stderr)")
        let errors = output.stderr.split(separator: "\n").filter { $0.hasPrefix("error: ") }
        #expect(errors.count == 1 && errors[0].contains("is refused") && errors[0].contains(hint), "\(output.stderr)")
        #expect(!withoutPath(output.stdout + output.stderr).contains(Self.secret), "\(output.stderr)")
        #expect(!FileManager.default.fileExists(atPath: path + "/devices/p"), "the device was made")
    }

    @Test("The passcode from a 0600 file, the environment or stdin; a file open to others or empty input refused")
    func passcodeSources() async throws {
        let (path, withoutPath) = Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = try Self.secretFile(Self.secret + "\n", mode: 0o600)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let create = ["device", "create", "--data-dir", path, "--kind", "phone", "--biometry", "face"]

        // A file open to other users is refused, naming the fix, and nothing is made.
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file)
        let open = try await orchard(create + ["--name", "open", "--passcode-file", file])
        #expect(open.status == 2 && open.stdout.isEmpty, "\(open.stderr)")
        #expect(open.stderr.contains("mode 644") && open.stderr.contains("chmod 600"), "\(open.stderr)")
        #expect(!withoutPath(open.stderr).contains(Self.secret))
        #expect(!FileManager.default.fileExists(atPath: path + "/devices/open"))

        // 0600: accepted; the device's passcode is the file's line.
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file)
        let created = try await orchard(create + ["--name", "p", "--passcode-file", file])
        #expect(created.status == 0, "\(created.stderr)")
        #expect(try created.json()["passcodeSet"] as? Bool == true)
        // Without a file or the variable, create sets no passcode (and reads nothing from stdin).
        let bare = try await orchard(create + ["--name", "bare"], stdin: "123456\n")
        #expect(bare.status == 0, "\(bare.stderr)")
        #expect(try bare.json()["passcodeSet"] as? Bool == false)

        // The passcode checked by the device, from each source: the environment, then stdin.
        let unlock = ["device", "unlock", "--data-dir", path, "--name", "p", "--method", "passcode"]
        let fromFile = try await orchard(unlock + ["--passcode-file", file])
        #expect(fromFile.status == 0 && fromFile.stdout.contains("\"unlocked\""), "\(fromFile.stdout)")
        let fromEnvironment = try await orchard(unlock, environment: ["ORCHARD_PASSCODE": Self.secret])
        #expect(fromEnvironment.stdout.contains("\"unlocked\""), "\(fromEnvironment.stdout) \(fromEnvironment.stderr)")
        let fromStdin = try await orchard(unlock, stdin: Self.secret + "\n")
        #expect(fromStdin.stdout.contains("\"unlocked\""), "\(fromStdin.stdout) \(fromStdin.stderr)")
        let wrong = try await orchard(unlock, stdin: "000000\n")
        #expect(wrong.stdout.contains("\"rejected\""), "\(wrong.stdout) \(wrong.stderr)")
        // The file comes before the variable.
        let both = try await orchard(unlock + ["--passcode-file", file], environment: ["ORCHARD_PASSCODE": "000000"])
        #expect(both.stdout.contains("\"unlocked\""), "\(both.stdout) \(both.stderr)")

        // Nothing on stdin and no terminal: one clear error naming the ways, no prompt.
        let empty = try await orchard(unlock)
        #expect(empty.status == 2 && empty.stdout.isEmpty, "\(empty.stderr)")
        #expect(empty.stderr.hasPrefix("error: no passcode given"), "\(empty.stderr)")
        #expect(empty.stderr.contains("--passcode-file FILE") && empty.stderr.contains("ORCHARD_PASSCODE"))
        let run = try await orchard(["device", "run", "--data-dir", path, "--name", "p", "--auto-auth", "passcode"])
        #expect(run.status == 2 && run.stderr.hasPrefix("error: no passcode given"), "\(run.stderr)")
        let blankFile = try Self.secretFile("\n", mode: 0o600)
        defer { try? FileManager.default.removeItem(atPath: blankFile) }
        let blank = try await orchard(unlock + ["--passcode-file", blankFile])
        #expect(blank.status == 2 && blank.stderr.contains("holds no passcode"), "\(blank.stderr)")
        // One line: CRLF is a line end; two lines are refused; a symbolic link is not followed.
        let crlf = try Self.secretFile(Self.secret + "\r\n", mode: 0o600)
        let twoLines = try Self.secretFile(Self.secret + "\n000000\n", mode: 0o400)
        let link = file + "-link"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: file)
        defer { for made in [crlf, twoLines, link] { try? FileManager.default.removeItem(atPath: made) } }
        let fromCRLF = try await orchard(unlock + ["--passcode-file", crlf])
        #expect(fromCRLF.stdout.contains("\"unlocked\""), "\(fromCRLF.stdout) \(fromCRLF.stderr)")
        let fromTwoLines = try await orchard(unlock + ["--passcode-file", twoLines])
        #expect(
            fromTwoLines.status == 2 && fromTwoLines.stderr.contains("more than one line"), "\(fromTwoLines.stderr)")
        let fromLink = try await orchard(unlock + ["--passcode-file", link])
        #expect(fromLink.status == 2 && fromLink.stderr.contains("cannot read the passcode"), "\(fromLink.stderr)")
        for output in [fromTwoLines, fromLink] { #expect(!withoutPath(output.stderr).contains(Self.secret)) }

        // Two secrets: --change reads the current passcode, then the new one (two lines on stdin, or a file and
        // the variable); --remove the current one.
        let passcode = ["device", "passcode", "--data-dir", path, "--name", "p"]
        let changed = try await orchard(passcode + ["--change"], stdin: "\(Self.secret)\n135790\n")
        #expect(changed.status == 0, "\(changed.stderr)")
        let newFile = try Self.secretFile("246802\n", mode: 0o600)
        defer { try? FileManager.default.removeItem(atPath: newFile) }
        let again = try await orchard(
            passcode + ["--change", "--new-passcode-file", newFile], environment: ["ORCHARD_PASSCODE": "135790"])
        #expect(again.status == 0, "\(again.stderr)")
        let wrongCurrent = try await orchard(passcode + ["--remove"], stdin: "135790\n")
        #expect(wrongCurrent.status != 0, "\(wrongCurrent.stdout)")
        let unlocked = try await orchard(unlock, environment: ["ORCHARD_PASSCODE": "246802"])
        #expect(unlocked.stdout.contains("\"unlocked\""), "\(unlocked.stdout) \(unlocked.stderr)")
        for output in [changed, again, wrongCurrent, unlocked, fromStdin, fromEnvironment] {
            for code in [Self.secret, "135790", "246802"] {
                #expect(!withoutPath(output.stdout + output.stderr).contains(code))
            }
        }

        // --help names every way.
        for command in [["device", "unlock"], ["device", "run"], ["device", "resume"], ["app", "buy"]] {
            let help = try await orchard(command + ["--help"])
            #expect(help.stdout.contains("--passcode-file FILE"), "\(command): \(help.stdout)")
            #expect(help.stdout.contains("ORCHARD_PASSCODE"), "\(command): \(help.stdout)")
        }
        let addCard = try await orchard(["device", "add-card", "--help"])
        #expect(
            addCard.stdout.contains("--one-time-code-file FILE") && addCard.stdout.contains("ORCHARD_ONE_TIME_CODE"))
        let change = try await orchard(["device", "passcode", "--help"])
        #expect(change.stdout.contains("--new-passcode-file FILE") && change.stdout.contains("ORCHARD_NEW_PASSCODE"))
    }
}
