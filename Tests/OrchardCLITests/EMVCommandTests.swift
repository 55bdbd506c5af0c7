import Foundation
import Testing

@testable import OrchardCLI

/// `orchard emv ...` end to end through the command runner, with the values of Tests/Fixtures/emv
/// (V1–V6, V9): the result alone on the last stdout line, upper-case hex; bad input is one `error:` line
/// and exit 1.
@Suite("orchard emv")
struct EMVCommandTests {
    static let imk = "0123456789ABCDEFFEDCBA9876543210"

    func run(_ arguments: [String]) async -> (code: Int32, lines: [String], stderr: String) {
        let capture = Capture()
        let code = await capture.run(["emv"] + arguments)
        return (code, capture.stdout.split(separator: "\n").map(String.init), capture.stderr)
    }

    func result(_ arguments: [String]) async -> String? {
        let (code, lines, stderr) = await run(arguments)
        #expect(code == 0, "\(arguments): \(stderr)")
        #expect(stderr.isEmpty)
        return lines.last
    }

    @Test func keyDerivation() async {
        #expect(
            await result(["derive-mk", "--imk", Self.imk, "--pan", "4895370012345671", "--psn", "00"])
                == "7AA1D352E6D5C2E629ADC4C78329866E")
        #expect(
            await result(["derive-mk", "--imk", Self.imk, "--pan", "12345678901234567", "--psn", "01", "--option", "a"])
                == "73AD54688CEF2934B0979857E3C719F1")
        #expect(
            await result([
                "derive-mk", "--imk", Self.imk, "--pan", "4895370012345678904", "--psn", "01", "--option", "b",
            ])
                == "577580A1EAD3612A67F73EF7F8F4DFF7")
        let (_, lines, _) = await run(["derive-mk", "--imk", Self.imk, "--pan", "4895370012345671", "--psn", "00"])
        #expect(lines.contains("Y: 9537001234567100") && lines.contains("option: A"))
        #expect(lines.contains { $0.hasPrefix("MK KCV: ") && $0.count == 14 })
        #expect(
            await result(["session-key", "--mk", "7AA1D352E6D5C2E629ADC4C78329866E", "--atc", "002A"])
                == "7F9768F87FE0570BB32FADFB3173CD38")
        #expect(
            await result([
                "session-key", "--mk", "7AA1D352E6D5C2E629ADC4C78329866E", "--atc", "002A", "--un", "7A3B9C01",
                "--method", "mastercard",
            ]) == "7F137CD35E4A62DA97CD5B25DC010783")
    }

    @Test func macsAndCryptograms() async {
        #expect(await result(["mac", "--key", Self.imk, "--data", "1234567890ABCDEF1234"]) == "5B8802AB2F33012E")
        #expect(
            await result([
                "arqc", "--sk", "7F9768F87FE0570BB32FADFB3173CD38", "--data",
                "000000015000000000000000084000000000000840260115007A3B9C012000002A06011203A00000",
            ]) == "15679C552AA1BFD3")
        #expect(
            await result([
                "arqc", "--sk", "7AA1D352E6D5C2E629ADC4C78329866E", "--pad", "1", "--data",
                "000000015000000000000000084000000000000840260115007A3B9C012000002A03A00000",
            ]) == "8380845C2560BE50")
        #expect(
            await result([
                "arpc", "--sk", "7F9768F87FE0570BB32FADFB3173CD38", "--arqc", "15679C552AA1BFD3", "--arc", "3030",
            ])
                == "6EECA6C5CAF69F2E")
        #expect(
            await result([
                "arpc", "--sk", "7F9768F87FE0570BB32FADFB3173CD38", "--arqc", "15679C552AA1BFD3", "--csu", "00800000",
            ])
                == "121FB778")
        let (_, lines, _) = await run([
            "arpc", "--sk", "7F9768F87FE0570BB32FADFB3173CD38", "--arqc", "15679C552AA1BFD3",
            "--csu", "00800000", "--prop", "0102",
        ])
        #expect(lines.suffix(2) == ["tag 91: 3AB363EC008000000102", "3AB363EC"])
    }

    @Test func tlvTree() async {
        let ppse = "6F29840E325041592E5359532E4444463031A517BF0C1461124F07A0000000031010500456495341870101"
        let (code, lines, _) = await run(["tlv", ppse.lowercased()])
        #expect(code == 0)
        #expect(lines.last == ppse)
        #expect(lines.first == "6F (File Control Information (FCI) Template) [41]")
        #expect(lines.contains("        4F (Application Identifier (AID)) [7]: A0000000031010"))
    }

    @Test(arguments: ["visa", "mastercard"])
    func simulatedTransactionVerifies(kernel: String) async {
        let pan = kernel == "visa" ? "4895370012345671" : "5413330089020011"
        let (code, lines, stderr) = await run([
            "simulate", "--imk", Self.imk, "--pan", pan, "--psn", "00", "--atc", "002A", "--amount", "15000",
            "--currency", "840", "--country", "0840", "--date", "260115", "--un", "7A3B9C01", "--kernel", kernel,
        ])
        #expect(code == 0, "\(stderr)")
        let commands = lines.filter { $0.hasPrefix("C-APDU ") }
        let responses = lines.filter { $0.hasPrefix("R-APDU ") }
        #expect(commands.count == (kernel == "visa" ? 4 : 5) && responses.count == commands.count)
        #expect(commands.first == "C-APDU 00A404000E325041592E5359532E444446303100")
        #expect(responses.allSatisfy { $0.hasSuffix("9000") })
        if kernel == "visa" {
            #expect(
                commands.contains(
                    "C-APDU 80A8000023832136C04000000000015000000000000000084000000000000840260115007A3B9C0100"))
        }
        #expect(lines.contains { $0.hasPrefix("verifier: valid") })
        let arqc = lines.last ?? ""
        #expect(arqc.count == 16 && arqc == arqc.uppercased())
        #expect(lines.contains { $0.contains("9F2608" + arqc) })
    }

    @Test func refusalsAndBadInputExitOne() async {
        let unauthorized = await run([
            "simulate", "--imk", Self.imk, "--pan", "4895370012345671", "--psn", "00", "--atc", "002A", "--amount", "1",
            "--currency", "840", "--country", "840", "--date", "260115", "--un", "7A3B9C01", "--no-authorization",
        ])
        #expect(unauthorized.code == 1 && unauthorized.lines.contains("R-APDU 6985"))
        let bad: [[String]] = [
            ["derive-mk", "--imk", "0123", "--pan", "4895370012345671", "--psn", "00"],
            ["derive-mk", "--imk", Self.imk, "--pan", "48953700123", "--psn", "00"],
            ["derive-mk", "--imk", Self.imk, "--pan", "4895370012345671", "--psn", "0A"],
            ["derive-mk", "--imk", Self.imk, "--pan", "4895370012345671", "--psn", "00", "--option", "c"],
            ["session-key", "--mk", Self.imk, "--atc", "2A"],
            ["session-key", "--mk", Self.imk, "--atc", "002A", "--method", "mastercard"],
            ["mac", "--key", Self.imk, "--data", "ABC"],
            ["mac", "--key", Self.imk, "--data", "AB", "--pad", "3"],
            ["arpc", "--sk", Self.imk, "--arqc", "15679C552AA1BFD3"],
            ["arpc", "--sk", Self.imk, "--arqc", "15679C552AA1BFD3", "--arc", "3030", "--csu", "00800000"],
            ["tlv", "5A05010203"],
            ["tlv", String(repeating: "6F80", count: 20)],
            [
                "simulate", "--imk", Self.imk, "--pan", "4895370012345671", "--psn", "00", "--atc", "002A", "--amount",
                "15000",
                "--currency", "84", "--country", "840", "--date", "260115", "--un", "7A3B9C01",
            ],
            [
                "simulate", "--imk", Self.imk, "--pan", "4895370012345671", "--psn", "00", "--atc", "0000", "--amount",
                "15000",
                "--currency", "840", "--country", "840", "--date", "260115", "--un", "7A3B9C01",
            ],
            [
                "simulate", "--imk", Self.imk, "--pan", "4895370012345671", "--psn", "00", "--atc", "002A", "--amount",
                "15000",
                "--currency", "840", "--country", "840", "--date", "261301", "--un", "7A3B9C01",
            ],
        ]
        for arguments in bad {
            let (code, lines, stderr) = await run(arguments)
            #expect(code == 1, "\(arguments)")
            #expect(stderr.hasPrefix("error: ") && stderr.split(separator: "\n").count == 1, "\(arguments): \(stderr)")
            #expect(!lines.contains { $0.count == 32 && $0 == $0.uppercased() && $0 != Self.imk }, "\(arguments)")
        }
    }
}
