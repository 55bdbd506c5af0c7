import Foundation
import OrchardCrypto
import OrchardRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// A short secret a command needs (a device passcode, the issuer's one-time code), never taken from argv: the
/// command line is visible to every user's `ps` and kept in shell history.
///
/// It is read, in this order, from the file its `--…-file FILE` option names (a regular file owned by the caller
/// with mode 0600 or stricter, one line; `-` means stdin), else from its environment variable (a process's
/// environment is readable by its own user only), else from one line of standard input: a prompt with echo off
/// when stdin is a terminal. The value is held in ``SecureBytes`` and never put in a trace or an error.
///
/// Commands that need two secrets read them in the order they document; on stdin each is one line, in that order.
struct SecretInput: Sendable {
    /// What the secret is, in messages: "passcode".
    let what: String
    /// The file option's name: `passcode-file`.
    let fileOptionName: String
    /// The environment variable: `ORCHARD_PASSCODE`.
    let environmentVariable: String

    /// The device passcode the command acts with (`--passcode-file`, `ORCHARD_PASSCODE`).
    static let passcode = SecretInput(
        what: "passcode", fileOptionName: "passcode-file", environmentVariable: "ORCHARD_PASSCODE")
    /// A second passcode: the new one of `device passcode --change`, the --new device's of `device approve`
    /// (`--new-passcode-file`, `ORCHARD_NEW_PASSCODE`).
    static let newPasscode = SecretInput(
        what: "new passcode", fileOptionName: "new-passcode-file", environmentVariable: "ORCHARD_NEW_PASSCODE")
    /// The issuer's one-time code of a step-up (`--one-time-code-file`, `ORCHARD_ONE_TIME_CODE`).
    static let oneTimeCode = SecretInput(
        what: "one-time code", fileOptionName: "one-time-code-file", environmentVariable: "ORCHARD_ONE_TIME_CODE")

    /// The most a secret line may hold.
    static let maximumLength = 1024

    /// Where the secret may be given, for hints: `--passcode-file FILE (mode 0600), ORCHARD_PASSCODE or stdin`.
    var ways: String { "--\(fileOptionName) FILE (mode 0600), \(environmentVariable) or one line on stdin" }

    /// `--passcode-file FILE`, for a command that needs the secret.
    var fileOption: Option<String?> {
        .optional(
            fileOptionName, "FILE",
            help: "Read the \(what) from FILE (mode 0600 or stricter, one line; `-`: stdin); without it from "
                + "$\(environmentVariable), else from stdin.")
    }

    /// `--passcode-file FILE`, for a command where the secret is optional: without the option or the variable the
    /// command goes on without it.
    func optionalFileOption(_ purpose: String) -> Option<String?> {
        .optional(
            fileOptionName, "FILE",
            help: "\(purpose): read the \(what) from FILE (mode 0600 or stricter, one line; `-`: stdin), or from "
                + "$\(environmentVariable).")
    }

    /// `--NAME VALUE`, refused with a hint naming the ways above; the value is never echoed.
    func refusedOption(_ name: String, valueName: String = "-", hint: String? = nil) -> Option<String?> {
        let message = refusal("--\(name)", hint: hint)
        return .optional(name, valueName, help: "Refused: give the \(what) in \(ways).") { _ throws(CLIError) in
            throw CLIError.usage(message)
        }
    }

    /// The usage error for a secret given as an option value.
    func refusal(_ option: String, hint: String? = nil) -> String {
        "\(option) is refused: a \(what) on the command line is visible to `ps` and kept in shell history; "
            + (hint ?? "give it in \(ways)")
    }

    /// Reads the secret: the file `file` names (`-`: stdin), else the environment variable, else one line of stdin
    /// (after `prompt` at a terminal).
    func read(file: String?, _ context: CommandContext, prompt: String? = nil) throws(CLIError) -> SecureBytes {
        if let given = try readIfGiven(file: file, context, prompt: prompt) { return given }
        return try standardInputLine(context, prompt: prompt ?? "\(what): ")
    }

    /// The secret when the command was given it: from the file `file` names (`-`: one line of stdin), else from the
    /// environment variable; nil when neither is given (stdin is then not read).
    func readIfGiven(file: String?, _ context: CommandContext, prompt: String? = nil) throws(CLIError) -> SecureBytes? {
        if let file, file != "-" {
            let path = file.hasPrefix("/") ? file : FileManager.default.currentDirectoryPath + "/" + file
            let contents: SecureBytes
            do throws(RuntimeError) {
                contents = try SecureFile.readSecret(path, limit: Self.maximumLength + 2)
            } catch {
                throw CLIError.usage("cannot read the \(what) from --\(fileOptionName): \(error.message)")
            }
            return try line(contents.unsafeCopyOfBytes(), source: "--\(fileOptionName) \(file)")
        }
        if file == nil, let value = context.environment[environmentVariable], !value.isEmpty {
            return try line(Array(value.utf8), source: "$\(environmentVariable)")
        }
        guard file == "-" else { return nil }
        return try standardInputLine(context, prompt: prompt ?? "\(what): ")
    }

    /// The secret as the control API's JSON carries it (a `String` field there).
    static func text(_ secret: SecureBytes) -> String {
        String(decoding: secret.unsafeCopyOfBytes(), as: UTF8.self)
    }

    /// One line: a single trailing newline (LF or CRLF) dropped; empty, too long or several lines refused.
    private func line(_ bytes: [UInt8], source: String) throws(CLIError) -> SecureBytes {
        var bytes = bytes
        defer { for index in bytes.indices { bytes[index] = 0 } }
        var end = bytes.count
        if end > 0, bytes[end - 1] == 0x0A { end -= 1 }
        if end > 0, bytes[end - 1] == 0x0D { end -= 1 }
        let body = bytes[..<end]
        guard !body.isEmpty else { throw CLIError.usage("\(source) holds no \(what)") }
        guard body.count <= Self.maximumLength else {
            throw CLIError.usage("\(source) holds more than \(Self.maximumLength) bytes: not a \(what)")
        }
        guard !body.contains(0x0A), !body.contains(0x0D) else {
            throw CLIError.usage("\(source) holds more than one line: give the \(what) alone")
        }
        return SecureBytes(body)
    }

    /// One line of stdin, read a byte at a time (so a second secret's line stays for the next read); at a
    /// terminal, after a prompt on stderr with echo off.
    private func standardInputLine(_ context: CommandContext, prompt: String) throws(CLIError) -> SecureBytes {
        var bytes: [UInt8] = []
        defer { for index in bytes.indices { bytes[index] = 0 } }
        let read = { () -> Bool in
            var byte: UInt8 = 0
            while bytes.count <= Self.maximumLength {
                let count = Glibc.read(0, &byte, 1)
                if count < 0, errno == EINTR { continue }
                guard count == 1 else { return !bytes.isEmpty }
                if byte == 0x0A { return true }
                bytes.append(byte)
            }
            return true
        }
        let complete = context.isInteractive ? Self.withEchoOff(prompt, context, read) : read()
        guard complete, !bytes.isEmpty else {
            throw CLIError.usage("no \(what) given: give it in \(ways)")
        }
        bytes.append(0x0A)
        return try line(bytes, source: "stdin")
    }

    /// Runs `body` with the terminal on stdin not echoing, `prompt` on stderr first.
    static func withEchoOff<T>(_ prompt: String, _ context: CommandContext, _ body: () -> T) -> T {
        var saved = termios()
        let canHide = tcgetattr(0, &saved) == 0
        if canHide {
            var hidden = saved
            hidden.c_lflag &= ~tcflag_t(ECHO)
            _ = tcsetattr(0, TCSAFLUSH, &hidden)
        }
        defer {
            if canHide {
                _ = tcsetattr(0, TCSAFLUSH, &saved)
                context.trace("")
            }
        }
        FileHandle.standardError.write(Data(prompt.utf8))
        return body()
    }
}
