import Testing

@testable import OrchardCLI

@Suite("Argument parsing")
struct ArgumentTests {
    let options: [OptionSpec] = [
        Option.optional("name", "NAME", help: "").spec, Option.repeatable("tag", "TAG", help: "").spec,
        Option.flag("verbose", help: "").spec,
    ]

    @Test func valuesInBothSpellings() throws {
        let parsed = try ParsedArguments.parse(
            ["--name", "a", "--tag=x", "--tag", "y", "--verbose"], options: options, maxPositionals: 0)
        #expect(parsed.value("name") == "a")
        #expect(parsed.values("tag") == ["x", "y"])
        #expect(parsed.flag("verbose"))
        #expect(!parsed.flag("other"))
    }

    @Test func valueMayContainEquals() throws {
        let parsed = try ParsedArguments.parse(["--name=a=b"], options: options, maxPositionals: 0)
        #expect(parsed.value("name") == "a=b")
    }

    @Test(arguments: [
        ["--unknown"], ["--name"], ["--name", "--verbose"], ["--verbose=1"], ["--name", "a", "--name", "b"],
        ["stray"], ["-x"], ["--verbose", "--verbose"],
    ])
    func usageErrors(arguments: [String]) {
        #expect(throws: CLIError.self) {
            try ParsedArguments.parse(arguments, options: options, maxPositionals: 0)
        }
        do {
            _ = try ParsedArguments.parse(arguments, options: options, maxPositionals: 0)
        } catch {
            #expect(error.exitCode == 2)
        }
    }

    @Test func doubleDashEndsOptions() throws {
        let parsed = try ParsedArguments.parse(["--", "--name"], options: options, maxPositionals: 1)
        #expect(parsed.positionals == ["--name"])
    }
}
