import EMV
import Foundation
import OrchardCrypto
import Testing

@Suite("Card applet")
struct CardTests {
    static let selectPPSE = "00A404000E325041592E5359532E444446303100"
    static let selectVisa = "00A4040007A000000003101000"
    static let selectMastercard = "00A4040007A000000004101000"
    static let gpoV9 = "80A8000023832136C04000000000015000000000000000084000000000000840260115007A3B9C0100"
    /// CDOL1 data: the V9 transaction data, terminal type 22, CVM results 3F0000.
    static let cdolData = "000000015000000000000000084000000000000840260115007A3B9C01223F0000"

    func visaCard(lastATC: UInt16 = 0x29) throws -> ContactlessCard {
        try V9.card([try V9.visaProfile()], lastATC: lastATC)
    }

    @Test func releasesNothingWithoutAuthorization() throws {
        let store = LoggingATCStore(lastUsed: 0x29)
        var card = try ContactlessCard(applications: [CardApplication(profile: try V9.visaProfile(), atcStore: store)])
        #expect(card.send(Self.selectPPSE).hasSuffix("9000"))
        #expect(card.send(Self.selectVisa).hasSuffix("9000"))
        #expect(card.send(Self.gpoV9) == "6985")
        #expect(card.send("00B2011C00") == "6985")
        #expect(store.persisted.isEmpty)
        // Authorized, the same command works once; the authorization is single use.
        card.authorize(CardholderAuthorization(verifiedBy: .passcode))
        #expect(card.send(Self.gpoV9).hasSuffix("9000"))
        #expect(card.pendingAuthorization == nil)
        #expect(card.send(Self.selectVisa).hasSuffix("9000"))
        #expect(card.send(Self.gpoV9) == "6985")
        #expect(store.persisted == [0x2A])
        // Revoked or reset: gone.
        card.authorize(CardholderAuthorization(verifiedBy: .face))
        card.revokeAuthorization()
        #expect(card.send(Self.selectVisa).hasSuffix("9000") && card.send(Self.gpoV9) == "6985")
        card.authorize(CardholderAuthorization(verifiedBy: .face))
        card.reset()
        #expect(card.send(Self.selectVisa).hasSuffix("9000") && card.send(Self.gpoV9) == "6985")
    }

    @Test func theATCIsStoredBeforeTheCryptogramAndNeverReused() throws {
        let store = LoggingATCStore(lastUsed: 0)
        var card = try ContactlessCard(applications: [CardApplication(profile: try V9.visaProfile(), atcStore: store)])
        var seen: [UInt16] = []
        for _ in 0..<200 {
            card.authorize(CardholderAuthorization(verifiedBy: .face))
            _ = card.send(Self.selectVisa)
            let response = try ResponseAPDU(bytes: hex(card.send(Self.gpoV9)))
            let atc = try #require(try TLV.decode(response.data).value(.applicationTransactionCounter))
            seen.append(UInt16(atc[0]) << 8 | UInt16(atc[1]))
            // The value released is the last one the store had made durable.
            #expect(store.persisted.last == seen.last)
        }
        #expect(seen == Array(1...200))
        // A store that cannot write: no cryptogram, memory failure.
        var broken = try ContactlessCard(applications: [
            CardApplication(profile: try V9.visaProfile(), atcStore: FailingATCStore())
        ])
        broken.authorize(CardholderAuthorization(verifiedBy: .face))
        _ = broken.send(Self.selectVisa)
        #expect(broken.send(Self.gpoV9) == "6581")
        #expect(broken.send("00B2011C00") == "6985")
    }

    @Test func anExhaustedATCRefusesEveryGPO() throws {
        var card = try visaCard(lastATC: 0xFFFE)
        card.authorize(CardholderAuthorization(verifiedBy: .face))
        _ = card.send(Self.selectVisa)
        let last = try ResponseAPDU(bytes: hex(card.send(Self.gpoV9)))
        #expect(try TLV.decode(last.data).value(.applicationTransactionCounter) == [0xFF, 0xFF])
        for _ in 0..<3 {
            card.authorize(CardholderAuthorization(verifiedBy: .face))
            _ = card.send(Self.selectVisa)
            #expect(card.send(Self.gpoV9) == "6985")
        }
        var mastercard = try V9.card([try V9.mastercardProfile()], lastATC: 0xFFFF)
        mastercard.authorize(CardholderAuthorization(verifiedBy: .face))
        _ = mastercard.send(Self.selectMastercard)
        #expect(mastercard.send("80A80000028300" + "00") == "6985")
    }

    @Test func statusWordsForBadCommands() throws {
        var card = try visaCard()
        #expect(card.send("00CA9F3600") == "6D00")  // GET DATA: not supported
        #expect(card.send("90A404000E325041592E5359532E444446303100") == "6E00")  // unknown class
        #expect(card.send("80A404000E325041592E5359532E444446303100") == "6E00")  // SELECT is not proprietary
        #expect(card.send("00A8000002830000") == "6E00")  // GPO is proprietary
        #expect(card.send("00A4040002AA") == "6700")  // Lc beyond the data
        #expect(card.send("00A4") == "6700")  // not an APDU
        #expect(card.send("00A4040007A000000099999900") == "6A82")  // unknown AID
        #expect(card.send("00A4000007A000000003101000") == "6A86")  // select by file ID
        #expect(card.send("00A4040207A000000003101000") == "6A86")  // next occurrence
        #expect(card.send(Self.gpoV9) == "6985")  // no application selected
        #expect(card.send("00A4040005A00000000300").hasSuffix("9000"))  // partial AID selects the Visa application
        #expect(card.send("00B2011C00") == "6985")  // no transaction yet
        card.authorize(CardholderAuthorization(verifiedBy: .face))
        // 32 bytes of PDOL data; the PDOL asks for 33.
        #expect(card.send("80A80000228320" + String(repeating: "00", count: 32) + "00") == "6700")
        #expect(
            card.send("80A8000023842136C04000000000015000000000000000084000000000000840260115007A3B9C0100") == "6A80")
        #expect(
            card.send("80A8010023832136C04000000000015000000000000000084000000000000840260115007A3B9C0100") == "6A86")
        #expect(card.send(Self.gpoV9).hasSuffix("9000"))
        #expect(card.send(Self.gpoV9) == "6985")  // one GPO per selection
        #expect(card.send("00B2011C00").hasSuffix("9000"))
        #expect(card.send("00B2021C00") == "6A83")  // no record 2
        #expect(card.send("00B2012C00") == "6A82")  // no SFI 5
        #expect(card.send("00B2011800") == "6A86")  // P2 must say "record number in P1"
        #expect(card.send("00B2001C00") == "6A86")  // record 0
        #expect(card.send("80AE800021" + Self.cdolData + "00") == "6985")  // Visa-style: no GENERATE AC after GPO
    }

    @Test func visaCTQFollowsTheVerification() throws {
        func ctq(method: CDCVMResult, ttq: String) throws -> String {
            var card = try visaCard()
            card.authorize(CardholderAuthorization(cdcvm: method))
            _ = card.send(Self.selectVisa)
            let gpo =
                "80A800002383 21".replacingOccurrences(of: " ", with: "") + ttq
                + "000000015000000000000000084000000000000840260115007A3B9C0100"
            let response = card.send(gpo)
            guard response.hasSuffix("9000") else { return response }
            return hexString(try TLV.decode(hex(String(response.dropLast(4)))).value(.cardTransactionQualifiers) ?? [])
        }
        let none = CDCVMResult(performed: false, method: .none)
        #expect(try ctq(method: CDCVMResult(performed: true, method: .fingerprint), ttq: "36C04000") == "0080")
        #expect(try ctq(method: none, ttq: "36C04000") == "8000")  // CVM required, online PIN supported
        #expect(try ctq(method: none, ttq: "32C04000") == "4000")  // no online PIN: signature
        #expect(try ctq(method: none, ttq: "30C04000") == "6985")  // neither: the card cannot comply
        #expect(try ctq(method: none, ttq: "36804000") == "0000")  // no CVM required
        #expect(try ctq(method: none, ttq: "16C04000") == "6985")  // no qVSDC support
    }

    @Test func mastercardStyleFlow() throws {
        var card = try V9.card([try V9.mastercardProfile()])
        _ = card.send(Self.selectMastercard)
        card.authorize(CardholderAuthorization(verifiedBy: .wristDetection))
        #expect(card.send("80AE8000" + "21" + Self.cdolData + "00") == "6985")  // GENERATE AC before GPO
        #expect(card.send("80A8000002830000") == "770A82020280940408010100" + "9000")
        let record = card.send("00B2010C00")
        #expect(record.hasSuffix("9000"))
        let objects = try TLV.decode(hex(String(record.dropLast(4))))
        #expect(objects.value(.pan) == hex(V9.mastercardPAN))
        #expect(objects.value(.expirationDate) == hex("281231"))
        #expect(objects.value(.cdol1) == ContactlessCard.mastercardCDOL1.encoded)
        #expect(card.send("80AE9000" + "21" + Self.cdolData + "00") == "6A86")  // CDA is not supported
        #expect(card.send("80AE8000" + "20" + String(Self.cdolData.dropLast(2)) + "00") == "6700")
        // A TC request gets an ARQC (online only).
        let answer = card.send("80AE4000" + "21" + Self.cdolData + "00")
        #expect(answer.hasSuffix("9000"))
        let template = try TLV.decode(hex(String(answer.dropLast(4))))
        #expect(template.value(.cryptogramInformationData) == [0x80])
        #expect(template.value(.applicationTransactionCounter) == [0x00, 0x2A])
        let iad = try MastercardIssuerApplicationData(bytes: try #require(template.value(.issuerApplicationData)))
        #expect(iad.cryptogramVersionNumber == 0x10)
        #expect(iad.cardVerificationResults == hex("A00000220084"))
        #expect(iad.cdcvm == CDCVMResult(performed: true, method: .wristDetection))
        #expect(card.send("80AE8000" + "21" + Self.cdolData + "00") == "6985")  // one GENERATE AC
        // An AAC request is honoured.
        var declining = try V9.card([try V9.mastercardProfile()])
        declining.authorize(CardholderAuthorization(verifiedBy: .face))
        _ = declining.send(Self.selectMastercard)
        _ = declining.send("80A8000002830000")
        let aac = declining.send("80AE0000" + "21" + Self.cdolData + "00")
        #expect(try TLV.decode(hex(String(aac.dropLast(4)))).value(.cryptogramInformationData) == [0x00])
    }

    @Test func profilesAreCheckedAndRedacted() throws {
        let mk = try V9.masterKey(V9.visaPAN)
        #expect(throws: EMVError(.invalidArgument, "")) {
            try CardApplicationProfile(scheme: .visa, pan: "48953700", expiry: "2812", masterKey: mk)
        }
        #expect(throws: EMVError(.invalidArgument, "")) {
            try CardApplicationProfile(scheme: .visa, pan: V9.visaPAN, expiry: "2813", masterKey: mk)
        }
        #expect(throws: EMVError(.invalidArgument, "")) {
            try CardApplicationProfile(
                scheme: .visa, pan: V9.visaPAN, expiry: "2812", masterKey: mk, cryptogramVersion: .mastercard16)
        }
        #expect(throws: EMVError(.invalidArgument, "")) {
            try CardApplicationProfile(
                scheme: .visa, pan: V9.visaPAN, expiry: "2812", masterKey: SymmetricKey(data: [1, 2, 3]))
        }
        #expect(throws: EMVError(.invalidArgument, "")) {
            try ContactlessCard(applications: [])
        }
        let profile = try V9.visaProfile()
        let keyHex = hexString(mk.bytes.unsafeCopyOfBytes())
        var dumped = ""
        dump(profile, to: &dumped)
        for text in ["\(profile)", String(reflecting: profile), dumped] {
            #expect(!text.contains(keyHex) && !text.contains(V9.visaPAN), "\(text)")
        }
        #expect("\(profile)".contains("5671"))
    }
}
