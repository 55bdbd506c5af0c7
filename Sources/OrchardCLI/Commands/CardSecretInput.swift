import Foundation
import OrchardRuntime

/// The card number and CVV of `orchard device add-card`, read from a file or stdin, never from argv (visible to
/// every user's `ps`, kept in shell history).
///
/// The input is either the JSON object `{"number": "4111111111111111", "cvv": "266"}` (each key once) or two lines:
/// the card number, then the CVV. A terminal on stdin is prompted with echo off. Nothing read is ever repeated in
/// an error.
struct CardSecretInput {
    let number: String
    let verificationValue: String

    /// The most a card file may hold: a card number and a CVV fit many times over.
    static let maximumSize = 4096

    static let formatHint =
        "give the JSON object {\"number\": \"…\", \"cvv\": \"…\"} or two lines (the card number, then the CVV)"

    /// Reads `file` (a path, or `-` for stdin), or stdin when `file` is nil.
    static func read(file: String?, context: CommandContext) throws(CLIError) -> CardSecretInput {
        if let file, file != "-" {
            let path = file.hasPrefix("/") ? file : FileManager.default.currentDirectoryPath + "/" + file
            guard let handle = FileHandle(forReadingAtPath: path) else {
                throw CLIError.usage("cannot read the card file \(file); check its path and permissions")
            }
            defer { try? handle.close() }
            let data = (try? handle.read(upToCount: maximumSize + 1)) ?? Data()
            return try parse(data, source: "the card file \(file)")
        }
        if context.isInteractive {
            guard let number = promptHidden("card number: ", context), let cvv = promptHidden("CVV: ", context) else {
                throw CLIError.usage("no card number was entered")
            }
            return try parse(Data((number + "\n" + cvv + "\n").utf8), source: "the entry")
        }
        let data = (try? FileHandle.standardInput.read(upToCount: maximumSize + 1)) ?? Data()
        return try parse(data, source: "stdin")
    }

    /// Parses the JSON object or the two lines.
    static func parse(_ data: Data, source: String) throws(CLIError) -> CardSecretInput {
        guard data.count <= maximumSize else {
            throw CLIError.usage("\(source) is larger than \(maximumSize) bytes; \(formatHint)")
        }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else {
            throw CLIError.usage(
                "no card number in \(source): \(formatHint), in --card-file FILE or on stdin "
                    + "(--pan and --cvv are refused)")
        }
        if text.hasPrefix("{") {
            struct Body: Decodable {
                let number: String
                let cvv: String
            }
            guard DuplicateJSONKeys.first(in: data) == nil,
                let body = try? JSONDecoder().decode(Body.self, from: data)
            else {
                throw CLIError.usage("\(source) is not a card: \(formatHint)")
            }
            return CardSecretInput(number: body.number, verificationValue: body.cvv)
        }
        let lines = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
        guard lines.count == 2 else { throw CLIError.usage("\(source) is not a card: \(formatHint)") }
        return CardSecretInput(number: lines[0], verificationValue: lines[1])
    }

    /// Reads one line from the terminal on stdin with echo off, the prompt on stderr.
    private static func promptHidden(_ prompt: String, _ context: CommandContext) -> String? {
        SecretInput.withEchoOff(prompt, context) { readLine(strippingNewline: true) }
    }
}
