import Foundation
import OrchardFixtures
import Testing

/// A small Codable harness for Project Wycheproof's JSON test vectors (`Tests/Fixtures/wycheproof`).
enum Wycheproof {
    struct File<Group: Decodable>: Decodable {
        let algorithm: String
        let numberOfTests: Int
        let testGroups: [Group]
    }

    enum Result: String, Decodable {
        case valid, invalid, acceptable
    }

    /// What Orchard does with an "acceptable" vector; decided per flag in `Tests/Fixtures/README.md`.
    enum Decision: Equatable {
        case accept, reject
    }

    /// Bytes written as a hex string in the JSON.
    struct Hex: Decodable, Equatable {
        let bytes: [UInt8]

        init(from decoder: any Decoder) throws {
            let text = try decoder.singleValueContainer().decode(String.self)
            guard let bytes = [UInt8](hexString: text) else {
                throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not hex"))
            }
            self.bytes = bytes
        }
    }

    static func load<Group: Decodable>(_ name: String, as: Group.Type) throws -> File<Group> {
        try JSONDecoder().decode(File<Group>.self, from: Fixtures.data("wycheproof/" + name))
    }

    /// Runs each vector of a file and checks its outcome; counts what ran and what was skipped (with why).
    struct Tally: CustomStringConvertible {
        let file: String
        /// The "acceptable" decisions of the README's table for this file: flag → decision.
        let acceptable: [String: Decision]
        private(set) var accepted = 0
        private(set) var rejected = 0
        private(set) var skipped: [String: Int] = [:]

        init(file: String, acceptable: [String: Decision] = [:]) {
            self.file = file
            self.acceptable = acceptable
        }

        var ran: Int { accepted + rejected }
        var description: String { "\(file): \(accepted) accepted, \(rejected) rejected, skipped \(skipped)" }

        /// Records that vector `id` (with `result` and `flags`) was accepted by Orchard or not, and checks it.
        mutating func record(
            id: Int, result: Result, flags: [String], accepted outcome: Bool, detail: @autoclosure () -> String = "",
            sourceLocation: SourceLocation = #_sourceLocation
        ) {
            if outcome { accepted += 1 } else { rejected += 1 }
            let expected: Bool
            switch result {
            case .valid: expected = true
            case .invalid: expected = false
            case .acceptable:
                let decisions = Set(flags.compactMap { acceptable[$0] })
                guard decisions.count == 1, let decision = decisions.first else {
                    let problem =
                        "\(file) tcId \(id): acceptable with flags \(flags), which the README's table does not "
                    Issue.record("\(problem)decide (or decides both ways)", sourceLocation: sourceLocation)
                    return
                }
                expected = decision == .accept
            }
            #expect(
                outcome == expected,
                "\(file) tcId \(id) (\(result), \(flags)): Orchard \(outcome ? "accepted" : "rejected") it \(detail())",
                sourceLocation: sourceLocation)
        }

        /// Records a vector that was not run, with the reason (shown in the tally).
        mutating func skip(reason: String) { skipped[reason, default: 0] += 1 }

        /// Every vector of the file ran or was skipped for a listed reason, and at least `minimumRan` ran.
        func checkComplete(
            total: Int, declared: Int, allowedSkips: Set<String> = [], sourceLocation: SourceLocation = #_sourceLocation
        ) {
            #expect(
                total == declared, "\(file) declares \(declared) tests but holds \(total)",
                sourceLocation: sourceLocation)
            #expect(
                ran + skipped.values.reduce(0, +) == total, "\(file): \(description) of \(total)",
                sourceLocation: sourceLocation)
            #expect(
                Set(skipped.keys).isSubset(of: allowedSkips), "\(file): unjustified skips \(skipped)",
                sourceLocation: sourceLocation)
            #expect(ran > 0, "\(file): nothing ran", sourceLocation: sourceLocation)
        }
    }
}
