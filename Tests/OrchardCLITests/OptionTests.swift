import Foundation
import Testing

@testable import OrchardCLI

/// Typed options: every kind of refusal happens in the parser, before a command's body; defaults, ranges and
/// `--help` come from the declarations.
@Suite("Typed options")
struct OptionTests {
    enum Fruit: String, CaseIterable, Sendable {
        case apple, pear
    }

    static let name = Option.required("name", "NAME", help: "A name.")
    static let count = Option.integer("count", default: 3, range: 1...10, help: "How many.")
    static let interval = Option<Duration>("interval", default: .seconds(5), range: 1...3600, help: "How often.")
    static let fruit: Option<Fruit?> = .choice("fruit", help: "A fruit.")
    static let enabled = Option.onOff("enabled", help: "On or off.")
    static let verbose = Option.flag("verbose", help: "Say more.")
    static let tags = Option.repeatable("tag", "TAG", help: "A tag.")
    static let port: Option<Int?> = .integer("port", range: 1...65535, help: "A port.")
    static let even: Option<Int?> = .optional("even", "N", help: "An even number.") { text throws(CLIError) in
        guard let n = Int(text), n % 2 == 0 else { throw CLIError.failure("--even is an even number") }
        return n
    }
    static let declared: [any CommandOption] = [name, count, interval, fruit, enabled, verbose, tags, even, port]
    static let options = declared.map(\.spec)

    static func parse(_ arguments: [String]) throws(CLIError) -> ParsedArguments {
        try ParsedArguments.parse(arguments, options: options, maxPositionals: 0)
    }

    /// The message and exit status of the refusal of `arguments`, or nil when they parse.
    static func refusal(_ arguments: [String]) -> (String, Int32)? {
        do {
            _ = try parse(arguments)
            return nil
        } catch {
            return (error.message, error.exitCode)
        }
    }

    @Test func defaultsWhenAbsent() throws {
        let parsed = try Self.parse(["--name", "a"])
        #expect(parsed[Self.name] == "a")
        #expect(parsed[Self.count] == 3)
        #expect(parsed[Self.interval] == .seconds(5))
        #expect(parsed[Self.fruit] == nil)
        #expect(parsed[Self.enabled] == nil)
        #expect(parsed[Self.verbose] == false)
        #expect(parsed[Self.tags].isEmpty)
        #expect(parsed[Self.even] == nil)
        #expect(parsed[Self.port] == nil)
    }

    @Test func valuesConverted() throws {
        let parsed = try Self.parse([
            "--name=b", "--count", "10", "--interval", "3600", "--fruit", "pear", "--enabled", "off", "--verbose",
            "--tag", "x", "--tag=y", "--even", "4", "--port", "65535",
        ])
        #expect(parsed[Self.name] == "b")
        #expect(parsed[Self.count] == 10)
        #expect(parsed[Self.interval] == .seconds(3600))
        #expect(parsed[Self.fruit] == .pear)
        #expect(parsed[Self.enabled] == false)
        #expect(parsed[Self.verbose])
        #expect(parsed[Self.tags] == ["x", "y"])
        #expect(parsed[Self.even] == 4)
        #expect(parsed[Self.port] == 65535)
    }

    @Test(arguments: [
        (["--name", "a", "--colour", "red"], "unknown option --colour"),
        (["--count", "2"], "missing required option --name"),
        (["--name", "a", "--count", "two"], "--count takes a whole number from 1 to 10"),
        (["--name", "a", "--count", "11"], "--count takes a whole number from 1 to 10"),
        (["--name", "a", "--count", "0"], "--count takes a whole number from 1 to 10"),
        (["--name", "a", "--interval", "0"], "--interval takes a whole number of seconds from 1 to 3600"),
        (["--name", "a", "--interval", "3601"], "--interval takes a whole number of seconds from 1 to 3600"),
        (["--name", "a", "--interval", "1.5"], "--interval takes a whole number of seconds from 1 to 3600"),
        (["--name", "a", "--fruit", "plum"], "--fruit is apple or pear"),
        (["--name", "a", "--enabled", "maybe"], "--enabled is on or off"),
        // An optional value refused is not taken for an absent one.
        (["--name", "a", "--port", "0"], "--port takes a whole number from 1 to 65535"),
        (["--name", "a", "--port", "http"], "--port takes a whole number from 1 to 65535"),
        (["--name", "a", "--name", "b"], "--name may be given only once"),
        (["--name", "a", "--count"], "--count needs a value (N)"),
        (["--name", "a", "--verbose=yes"], "--verbose takes no value"),
    ])
    func usageErrors(arguments: [String], message: String) {
        let refusal = Self.refusal(arguments)
        #expect(refusal?.0 == message)
        #expect(refusal?.1 == 2)
    }

    @Test func aParserMayRefuseWithAFailure() {
        let refusal = Self.refusal(["--name", "a", "--even", "3"])
        #expect(refusal?.0 == "--even is an even number")
        #expect(refusal?.1 == 1)
    }

    @Test func aRefusedValueIsNotEchoed() {
        let refusal = Self.refusal(["--name", "a", "--count", "4111111111111111"])
        #expect(refusal != nil)
        #expect(refusal?.0.contains("4111111111111111") == false)
    }

    @Test func helpComesFromTheDeclarations() {
        let command = Command(
            name: "try", summary: "Try options.",
            options: [Self.name, Self.count, Self.interval, Self.fruit, Self.verbose, Self.tags]
        ) { _, _ in }
        let help = command.help(path: ["orchard", "try"])
        let lines = help.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        func line(_ prefix: String) -> String? { lines.first { $0.hasPrefix(prefix) } }
        #expect(line("--name NAME")?.hasSuffix("A name. Required.") == true)
        #expect(line("--count N")?.hasSuffix("How many. Default: 3.") == true)
        #expect(line("--interval SECONDS")?.hasSuffix("How often. Default: 5.") == true)
        #expect(line("--fruit apple|pear")?.hasSuffix("A fruit.") == true)
        #expect(line("--verbose")?.hasSuffix("Say more.") == true)
        #expect(line("--tag TAG (repeatable)")?.hasSuffix("A tag.") == true)
        #expect(line("--data-dir DIR") != nil)
        #expect(line("--help") != nil)
    }

    @Test func deviceRunHelpShowsItsDefaultsAndRanges() async {
        let capture = Capture()
        #expect(await capture.run(["device", "run", "--help"]) == 0)
        #expect(capture.stdout.contains("--sync-interval SECONDS"))
        #expect(capture.stdout.contains("Apply the Pay server's token-status notifications this often. Default: 5."))
        #expect(capture.stdout.contains("Cancel a payment sheet not completed in this time. Default: 120."))
        #expect(capture.stdout.contains("--name NAME"))
    }
}
