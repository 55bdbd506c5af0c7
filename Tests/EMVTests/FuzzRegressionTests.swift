import EMV
import Foundation
import OrchardCrypto
import OrchardFixtures
import Testing

/// Replays Tests/Fixtures/fuzz-regressions/FuzzEMVTLV and FuzzEMVAPDU through what the fuzz targets of
/// Fuzz/ drive: hand-made hostile inputs (and any input that once crashed a target).
@Suite("EMV fuzz regressions")
struct EMVFuzzRegressionTests {
    static func inputs(_ target: String) throws -> [(String, [UInt8])] {
        let names = try FileManager.default.contentsOfDirectory(atPath: Fixtures.path("fuzz-regressions/\(target)"))
        return try names.sorted().map { ($0, Array(try Fixtures.data("fuzz-regressions/\(target)/\($0)"))) }
    }

    @Test("F1: the TLV fuzz corpus gives typed errors")
    func tlvInputsAreRefusedWithTypedErrors() throws {
        let inputs = try Self.inputs("FuzzEMVTLV")
        #expect(inputs.count >= 5)
        for (name, bytes) in inputs {
            #expect(throws: EMVError.self, "\(name)") { try TLV.decode(bytes) }
            if let dol = try? DataObjectList(bytes: bytes) {
                #expect((try? DataObjectList(bytes: dol.encoded)) == dol, "\(name)")
            }
        }
        let deep = try #require(inputs.first { $0.0 == "deep-nesting" })
        #expect(throws: EMVError(.limitExceeded, "")) { try TLV.decode(deep.1) }
    }

    @Test("F1: the APDU fuzz corpus never breaks the parser or the card")
    func apduInputsNeverBreakTheParserOrTheCard() throws {
        let inputs = try Self.inputs("FuzzEMVAPDU")
        #expect(inputs.count >= 4)
        let lastStatus: [String: String] = [
            "gpo-short-template": "6700", "generate-ac-before-gpo": "6985",
        ]
        for (name, bytes) in inputs {
            if let command = try? CommandAPDU(bytes: bytes) {
                #expect(try CommandAPDU(bytes: command.encoded()) == command, "\(name)")
            } else if lastStatus[name] == nil {
                #expect(throws: EMVError(.malformedAPDU, ""), "\(name)") { try CommandAPDU(bytes: bytes) }
            }
            // As the fuzz target: an authorized two-application card, APDUs cut by a length byte each.
            var card = try V9.card([try V9.visaProfile(), try V9.mastercardProfile(priority: 2)])
            card.authorize(CardholderAuthorization(verifiedBy: .face))
            var index = 0
            var last: [UInt8] = []
            while index < bytes.count {
                let end = min(bytes.count, index + 1 + Int(bytes[index]))
                last = card.process(bytes: bytes[(index + 1)..<end])
                #expect(last.count >= 2, "\(name)")
                index = end
            }
            if let expected = lastStatus[name] { #expect(hexString(Array(last.suffix(2))) == expected, "\(name)") }
        }
    }
}
