import EMV
import Foundation
import Testing

@Suite("BER-TLV codec")
struct TLVTests {
    /// V9's GPO response: a format 2 template with one- and two-byte tags.
    static let gpoResponse = hex(
        "77468202200094041801010057134895370012345671D28122010000000000000F5F3401009F100706011203A00000"
            + "9F260815679C552AA1BFD39F2701809F3602002A9F6C020080")

    @Test func decodesTheV9GPOResponse() throws {
        let objects = try TLV.decode(Self.gpoResponse)
        #expect(objects.count == 1)
        let template = objects[0]
        #expect(template.tag == .responseMessageTemplateFormat2 && template.tag.isConstructed)
        #expect(template.children.map(\.tag) == [0x82, 0x94, 0x57, 0x5F34, 0x9F10, 0x9F26, 0x9F27, 0x9F36, 0x9F6C])
        #expect(objects.value(.applicationCryptogram) == hex("15679C552AA1BFD3"))
        #expect(objects.value(.track2EquivalentData) == hex("4895370012345671D28122010000000000000F"))
        #expect(objects.value(.applicationTransactionCounter) == [0x00, 0x2A])
        #expect(template.encoded == Self.gpoResponse)
    }

    @Test func multiByteTagsAndTheirFlags() throws {
        let tag = try TLVTag(bytes: [0xDF, 0x81, 0x01])
        #expect(tag.rawValue == 0xDF8101 && tag.bytes == [0xDF, 0x81, 0x01] && tag.description == "DF8101")
        #expect(!tag.isConstructed)
        #expect(
            TLVTag.fciIssuerDiscretionaryData.isConstructed && TLVTag.fciIssuerDiscretionaryData.bytes == [0xBF, 0x0C])
        #expect(TLVTag.applicationCryptogram.name == "Application Cryptogram")
        let decoded = try TLV.decode(hex("DF810102ABCD"))
        #expect(decoded == [TLV(tag, [0xAB, 0xCD])])
        // Bad tags: a one-byte tag announcing more, a continuation bit on the last byte, more than 4 bytes.
        #expect(throws: EMVError(.malformedTLV, "")) { try TLVTag(bytes: [0x9F]) }
        #expect(throws: EMVError(.malformedTLV, "")) { try TLVTag(bytes: [0x9F, 0x81]) }
        #expect(throws: EMVError(.malformedTLV, "")) { try TLVTag(bytes: [0x5A, 0x01]) }
        #expect(throws: EMVError(.malformedTLV, "")) { try TLV.decode(hex("DF8181818101")) }
    }

    @Test func longLengths() throws {
        for count in [0, 1, 127, 128, 255, 256, 65535, 65536] {
            let object = TLV(.issuerApplicationData, [UInt8](repeating: 0x5A, count: count))
            let encoded = object.encoded
            let expectedHeader: Int = count < 128 ? 1 : count < 256 ? 2 : count < 65536 ? 3 : 4
            #expect(encoded.count == 2 + expectedHeader + count, "length \(count)")
            #expect(try TLV.decode(encoded) == [object], "length \(count)")
        }
        // Non-minimal long forms are accepted (BER).
        #expect(try TLV.decode(hex("5A8104") + [1, 2, 3, 4]) == [TLV(.pan, [1, 2, 3, 4])])
        #expect(try TLV.decode(hex("5A820002AABB")) == [TLV(.pan, [0xAA, 0xBB])])
    }

    @Test func repeatedTagsKeepTheirOrder() throws {
        let bytes = hex("70 0D 9F0702FF00 9F07020100 5F2800".replacingOccurrences(of: " ", with: ""))
        let record = try TLV.decodeSingle(bytes)
        #expect(record.children.map(\.value) == [[0xFF, 0x00], [0x01, 0x00], []])
        #expect(record.children.all(.applicationUsageControl).map(\.value) == [[0xFF, 0x00], [0x01, 0x00]])
        #expect(record.encoded == bytes)
    }

    @Test func constructedTemplatesNestAndSearchDepthFirst() throws {
        let ppse = hex("6F29840E325041592E5359532E4444463031A517BF0C1461124F07A0000000031010500456495341870101")
        let fci = try TLV.decode(ppse)
        #expect(fci.first(.directoryEntry)?.children.value(.applicationIdentifier) == hex("A0000000031010"))
        #expect(fci.all(.applicationLabel).map { String(decoding: $0.value, as: UTF8.self) } == ["VISA"])
        #expect(fci.primitives.map(\.tag) == [0x84, 0x4F, 0x50, 0x87])
        #expect(fci.encoded == ppse)
        let tree = fci.treeDescription()
        #expect(tree.contains("6F (File Control Information (FCI) Template) [41]"))
        #expect(tree.contains("\n        4F (Application Identifier (AID)) [7]: A0000000031010\n"))
        #expect(tree.contains("\n        50 (Application Label) [4]: 56495341 \"VISA\"\n"))
        #expect(
            tree.contains("\n  84 (Dedicated File (DF) Name) [14]: 325041592E5359532E4444463031 \"2PAY.SYS.DDF01\"\n"))
    }

    @Test func paddingBetweenObjectsIsSkipped() throws {
        #expect(try TLV.decode(hex("00005A01010000")) == [TLV(.pan, [1])])
        #expect(try TLV.decode([]) == [])
    }

    @Test func malformedInputGivesTypedErrors() {
        let cases: [(String, String)] = [
            ("9F", "truncated multi-byte tag"),
            ("5A", "missing length"),
            ("5A05010203", "value shorter than its length"),
            ("5A81", "truncated long length"),
            ("5A8200", "truncated two-byte length"),
            ("5A80", "indefinite length"),
            ("5A840000000001", "four length bytes"),
            ("5A83FFFFFF00", "length far beyond the input"),
            ("7003 5A0501", "child overflows its template"),
        ]
        for (input, what) in cases {
            #expect(throws: EMVError(.malformedTLV, ""), "\(what)") {
                try TLV.decode(hex(input.replacingOccurrences(of: " ", with: "")))
            }
        }
        #expect(throws: EMVError(.malformedTLV, "")) { try TLV.decodeSingle(hex("5A01015A0102")) }
    }

    @Test("F1: ten thousand levels of TLV nesting are refused safely")
    func tenThousandLevelsOfNestingAreRefusedSafely() {
        // 70 82 LL LL ( 70 82 ... ) — each level a valid header, 10,000 deep.
        let depth = 10_000
        var bytes: [UInt8] = []
        bytes.reserveCapacity(depth * 4)
        for level in 0..<depth {
            let inner = (depth - level - 1) * 4
            bytes += [0x70, 0x82, UInt8(inner >> 8 & 0xFF), UInt8(inner & 0xFF)]
        }
        #expect(throws: EMVError(.limitExceeded, "")) { try TLV.decode(bytes) }
        // The limit is a setting; 16 levels decode.
        var shallow: [UInt8] = []
        for level in 0..<15 { shallow += [0x70, UInt8((14 - level) * 2)] }
        #expect((try? TLV.decode(shallow)) != nil)
    }

    @Test func elementCountIsLimited() {
        let many = [UInt8](repeating: 0, count: 0) + Array(repeating: [UInt8](hex("5A00")), count: 5000).flatMap { $0 }
        #expect(throws: EMVError(.limitExceeded, "")) { try TLV.decode(many) }
        #expect((try? TLVDecoder(maximumElementCount: 5000).decode(many))?.count == 5000)
    }
}

@Suite("Data object lists")
struct DOLTests {
    static let pdol = hex("9F66049F02069F03069F1A0295055F2A029A039C019F3704")

    @Test func parsesTheVisaPDOL() throws {
        let dol = try DataObjectList(bytes: Self.pdol)
        #expect(dol.entries.map(\.tag) == [0x9F66, 0x9F02, 0x9F03, 0x9F1A, 0x95, 0x5F2A, 0x9A, 0x9C, 0x9F37])
        #expect(dol.dataLength == 33)
        #expect(dol.encoded == Self.pdol)
        #expect(dol == ContactlessCard.visaPDOL)
    }

    @Test func buildsV9sGPOData() throws {
        let dol = try DataObjectList(bytes: Self.pdol)
        let data = dol.build(from: [
            .terminalTransactionQualifiers: hex("36C04000"), .amountAuthorised: hex("000000015000"),
            .amountOther: hex("000000000000"), .terminalCountryCode: hex("0840"),
            .terminalVerificationResults: hex("0000000000"),
            .transactionCurrencyCode: hex("0840"), .transactionDate: hex("260115"), .transactionType: [0],
            .unpredictableNumber: hex("7A3B9C01"),
        ])
        #expect(
            try CommandAPDU.getProcessingOptions(pdolData: data).encoded()
                == hex("80A8000023832136C04000000000015000000000000000084000000000000840260115007A3B9C0100"))
        let split = try dol.split(data)
        #expect(split.map(\.tag) == dol.entries.map(\.tag))
        #expect(split.value(.unpredictableNumber) == hex("7A3B9C01"))
    }

    @Test func padsAndTruncatesByFormat() {
        let dol = DataObjectList([
            .init(.amountAuthorised, 4),  // n: truncate left
            .init(.transactionCurrencyCode, 3),  // n: pad left with zeros
            .init(.pan, 10),  // cn: pad right with FF
            .init(.pan, 2),  // cn: truncate right
            .init(.applicationLabel, 6),  // an: pad right with zeros
            .init(.unpredictableNumber, 2),  // b: truncate right
            .init(0xDF01, 2),  // unknown: zeros
            .init(.recordTemplate, 2),  // constructed: zeros
        ])
        let out = dol.build(from: [
            .amountAuthorised: hex("000000015000"), .transactionCurrencyCode: hex("0840"),
            .pan: hex("4895370012345671"), .applicationLabel: Array("VISA".utf8), .unpredictableNumber: hex("7A3B9C01"),
            .recordTemplate: [1, 2],
        ])
        #expect(
            out == hex("00015000") + hex("000840") + hex("4895370012345671FFFF") + hex("4895")
                + Array("VISA".utf8) + [0, 0] + hex("7A3B") + [0, 0] + [0, 0])
    }

    @Test func malformedListsAndDataAreTypedErrors() {
        #expect(throws: EMVError(.malformedDOL, "")) { try DataObjectList(bytes: hex("9F")) }
        #expect(throws: EMVError(.malformedDOL, "")) { try DataObjectList(bytes: hex("9F66")) }
        #expect(throws: EMVError(.malformedDOL, "")) { try DataObjectList(bytes: hex("9F6681")) }
        #expect(throws: EMVError(.malformedDOL, "")) { try DataObjectList(bytes: hex("9F8181818104")) }
        #expect(throws: EMVError(.malformedDOL, "")) {
            try ContactlessCard.visaPDOL.split([UInt8](repeating: 0, count: 32))
        }
        #expect((try? DataObjectList(bytes: [])).map(\.dataLength) == 0)
    }
}

@Suite("APDUs and status words")
struct APDUTests {
    @Test func parsesEveryCase() throws {
        let case1 = try CommandAPDU(bytes: hex("00A40400"))
        #expect(case1.data.isEmpty && case1.le == nil)
        let case2 = try CommandAPDU(bytes: hex("00B2011C00"))
        #expect(case2.p1 == 1 && case2.p2 == 0x1C && case2.le == 256 && case2.data.isEmpty)
        let case3 = try CommandAPDU(bytes: hex("00A4040002AABB"))
        #expect(case3.data == [0xAA, 0xBB] && case3.le == nil)
        let case4 = try CommandAPDU(bytes: hex("00A404000E325041592E5359532E444446303100"))
        #expect(case4 == .select(CommandAPDU.ppseName))
        let case2e = try CommandAPDU(bytes: hex("80CA9F7F000000"))
        #expect(case2e.le == 65536 && case2e.data.isEmpty)
        let data = [UInt8](repeating: 0x11, count: 300)
        let case3e = try CommandAPDU(bytes: hex("80E20000") + [0x00, 0x01, 0x2C] + data)
        #expect(case3e.data == data && case3e.le == nil)
        let case4e = try CommandAPDU(bytes: hex("80E20000") + [0x00, 0x01, 0x2C] + data + [0x01, 0x00])
        #expect(case4e.data == data && case4e.le == 256)
        for apdu in [case1, case2, case3, case4, case2e, case3e, case4e] {
            #expect(try CommandAPDU(bytes: try apdu.encoded()) == apdu)
        }
        #expect(try CommandAPDU.readRecord(1, sfi: 3).encoded() == hex("00B2011C00"))
        #expect(try CommandAPDU.select(PaymentScheme.visa.aid).encoded() == hex("00A4040007A000000003101000"))
    }

    @Test func malformedCommandsAreTypedErrors() {
        // Too short, Lc beyond the data, data beyond Lc and Le, a truncated extended field, extended Lc 0.
        for input in [
            "", "00", "00A404", "00A4040002AA", "00A4040002AABBCCDD", "00A404000001", "00A40400000002AA",
            "00A4040000000011",
        ] {
            #expect(throws: EMVError(.malformedAPDU, ""), "\(input)") { try CommandAPDU(bytes: hex(input)) }
        }
        #expect(throws: EMVError(.invalidArgument, "")) {
            try CommandAPDU(cla: 0, ins: 0, p1: 0, p2: 0, data: [UInt8](repeating: 0, count: 70000)).encoded()
        }
        #expect(throws: EMVError(.invalidArgument, "")) {
            try CommandAPDU(cla: 0, ins: 0, p1: 0, p2: 0, le: 0).encoded()
        }
    }

    @Test func responsesAndStatusWords() throws {
        let response = try ResponseAPDU(bytes: hex("700A5F280208409F0702FF009000"))
        #expect(response.statusWord == .success && response.statusWord.isSuccess)
        #expect(response.data == hex("700A5F280208409F0702FF00"))
        #expect(response.encoded == hex("700A5F280208409F0702FF009000"))
        #expect(try ResponseAPDU(bytes: hex("6985")).statusWord == .conditionsNotSatisfied)
        #expect(StatusWord(sw1: 0x6A, sw2: 0x82) == .fileNotFound && StatusWord.fileNotFound.description == "6A82")
        #expect(!StatusWord.instructionNotSupported.isSuccess && StatusWord(0x6110).isSuccess)
        #expect(throws: EMVError(.malformedAPDU, "")) { try ResponseAPDU(bytes: [0x90]) }
    }

    @Test func numericEncodings() throws {
        #expect(try EMVNumeric.amount(15000) == hex("000000015000"))
        #expect(try EMVNumeric.numeric(840, byteCount: 2) == hex("0840"))
        #expect(EMVNumeric.value(ofNumeric: hex("000000015000")) == 15000)
        #expect(EMVNumeric.value(ofNumeric: hex("0A")) == nil)
        #expect(try EMVNumeric.compressedNumeric("12345") == hex("12345F"))
        #expect(EMVNumeric.digits(ofCompressedNumeric: hex("12345F")) == "12345")
        #expect(EMVNumeric.digits(ofCompressedNumeric: hex("12F4")) == nil)
        #expect(throws: EMVError(.invalidArgument, "")) { try EMVNumeric.amount(1_000_000_000_000) }
        #expect(throws: EMVError(.invalidArgument, "")) { try EMVNumeric.packDigits("12a") }
        #expect(try TransactionDate(yymmdd: "240229").bytes == hex("240229"))
        #expect(throws: EMVError(.invalidArgument, "")) { try TransactionDate(yymmdd: "250229") }
        #expect(throws: EMVError(.invalidArgument, "")) { try TransactionDate(yymmdd: "261301") }
        #expect(throws: EMVError(.invalidArgument, "")) { try TransactionDate(yymmdd: "2601") }
    }
}
