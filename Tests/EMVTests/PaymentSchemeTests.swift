import EMV
import Testing

@Suite("Payment schemes: each scheme's EMV data")
struct PaymentSchemeTests {
    @Test("Visa: RID, AID, Kernel 3, CVN 18 then 10, the Visa IAD layout")
    func visa() {
        let visa = PaymentScheme.visa
        #expect(visa.name == "visa" && visa.description == "visa" && visa.displayName == "Visa")
        #expect(visa.rid == [0xA0, 0x00, 0x00, 0x00, 0x03])
        #expect(visa.aid == [0xA0, 0x00, 0x00, 0x00, 0x03, 0x10, 0x10])
        #expect(visa.applicationIdentifiers == [[0xA0, 0x00, 0x00, 0x00, 0x03, 0x10, 0x10]])
        #expect(visa.kernel == .qVSDC && visa.kernel.number == 3 && visa.defaultApplicationLabel == "VISA")
        #expect(visa.cryptogramVersions == [.visa18, .visa10] && visa.defaultCryptogramVersion == .visa18)
        #expect(visa.issuerApplicationDataLayout == .vis)
    }

    @Test("Mastercard: RID, AID, Kernel 2, CVN 16 then 20, the M/Chip IAD layout")
    func mastercard() {
        let mastercard = PaymentScheme.mastercard
        #expect(mastercard.name == "mastercard" && mastercard.description == "mastercard")
        #expect(mastercard.displayName == "Mastercard" && mastercard.defaultApplicationLabel == "MASTERCARD")
        #expect(mastercard.rid == [0xA0, 0x00, 0x00, 0x00, 0x04])
        #expect(mastercard.aid == [0xA0, 0x00, 0x00, 0x00, 0x04, 0x10, 0x10])
        #expect(mastercard.kernel == .mChip && mastercard.kernel.number == 2)
        #expect(mastercard.cryptogramVersions == [.mastercard16, .mastercard20])
        #expect(mastercard.defaultCryptogramVersion == .mastercard16)
        #expect(mastercard.issuerApplicationDataLayout == .mChip)
    }

    @Test("Every scheme is found by its name, its AIDs and its PAN ranges; its versions belong to it")
    func lookups() {
        #expect(PaymentScheme.all == [.visa, .mastercard])
        #expect(Set(PaymentScheme.all.map(\.name)).count == PaymentScheme.all.count)
        #expect(Set(PaymentScheme.all.map(\.rid)).count == PaymentScheme.all.count)
        for scheme in PaymentScheme.all {
            #expect(PaymentScheme(name: scheme.name) == scheme)
            for aid in scheme.applicationIdentifiers {
                #expect(aid.starts(with: scheme.rid) && (5...16).contains(aid.count))
                #expect(PaymentScheme(aid: aid) == scheme)
            }
            #expect(!scheme.cryptogramVersions.isEmpty)
            #expect(scheme.cryptogramVersions.allSatisfy { $0.scheme == scheme })
            #expect(scheme.cryptogramVersionNumbers.count == scheme.cryptogramVersions.count)
        }
        #expect(Set(CryptogramVersion.all) == Set(PaymentScheme.all.flatMap(\.cryptogramVersions)))
        #expect(CryptogramVersion.visa18.description == "Visa CVN 18 (12)")
        #expect(CryptogramVersion.mastercard16.description == "Mastercard CVN 16 (10)")
    }

    @Test("Unknown AIDs, names and PANs give no scheme")
    func unknown() {
        #expect(PaymentScheme(aid: [0xA0, 0x00, 0x00, 0x00, 0x25, 0x01, 0x04]) == nil)  // American Express
        #expect(PaymentScheme(aid: [0xA0, 0x00, 0x00, 0x00]) == nil)
        #expect(PaymentScheme(aid: []) == nil)
        #expect(PaymentScheme(name: "amex") == nil && PaymentScheme(name: "Visa") == nil)
        #expect(PaymentScheme(name: "masterCard") == nil && PaymentScheme(name: "") == nil)
        for pan in ["5011111111111111", "5611111111111111", "2220999999999999", "2721000000000000", "6011000000000004"]
        {
            #expect(PaymentScheme(pan: pan) == nil, "\(pan)")
        }
        #expect(PaymentScheme(pan: "2221000000000009") == .mastercard)
        #expect(PaymentScheme(pan: "2720999999999999") == .mastercard)
        #expect(PaymentScheme(pan: "") == nil && PaymentScheme(pan: "5") == nil)
        #expect(CryptogramVersion(scheme: .visa, number: 0x10) == nil)
        #expect(CryptogramVersion(scheme: .mastercard, number: 0x12) == nil)
    }

    @Test("The IAD layout's offsets find the derivation key index and the CVN of each scheme's IAD")
    func issuerApplicationDataLayout() throws {
        let visa = VisaIssuerApplicationData(
            derivationKeyIndex: 0x07, cryptogramVersionNumber: 0x12, cardVerificationResults: [0x03, 0x00, 0x00],
            cdcvm: nil
        ).encoded
        let mchip = MastercardIssuerApplicationData(
            keyDerivationIndex: 0x07, cryptogramVersionNumber: 0x10,
            cardVerificationResults: [0x80, 0, 0, 0x22, 0, 0]
        ).encoded
        for (scheme, iad, cvn) in [(PaymentScheme.visa, visa, UInt8(0x12)), (.mastercard, mchip, UInt8(0x10))] {
            let layout = scheme.issuerApplicationDataLayout
            #expect(iad[layout.derivationKeyIndexOffset] == 0x07)
            #expect(iad[layout.cryptogramVersionNumberOffset] == cvn)
        }
        let data = ChipAuthorizationData(
            pan: "5413330089012345", panSequenceNumber: 0, elements: [TLV(.issuerApplicationData, mchip)])
        #expect(data.scheme == .mastercard && data.derivationKeyIndex == 0x07)
        let visaData = ChipAuthorizationData(
            pan: "4895370012345678", panSequenceNumber: 0, elements: [TLV(.issuerApplicationData, visa)])
        #expect(visaData.scheme == .visa && visaData.derivationKeyIndex == 0x07)
    }
}
