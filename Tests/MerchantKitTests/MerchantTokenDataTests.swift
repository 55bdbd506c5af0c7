import Foundation
import PaymentToken
import Testing

/// The decrypted payment data of a merchant token (recurring, automatic reload, deferred): Apple's
/// `merchantTokenIdentifier` and `merchantTokenMetadata` (`cardArt`: `[CardArt]`, `cardMetadata`: `CardMetadata`,
/// from the Apple Pay Merchant Token Management API's reference), parsed from the plaintext's JSON text.
@Suite("Decrypted payment data: merchant token identifier and metadata")
struct MerchantTokenDataTests {
    static let base = """
        "applicationPrimaryAccountNumber":"4895370012345671","applicationExpirationDate":"291231",\
        "currencyCode":"840","transactionAmount":1999,"deviceManufacturerIdentifier":"040010030273",\
        "paymentDataType":"3DSecure","paymentData":{"onlinePaymentCryptogram":"AgAAAAAABk4DWZ4C28yUQAAAAAA="}
        """

    func data(_ extra: String) throws(PaymentTokenError) -> DecryptedPaymentData {
        try DecryptedPaymentData(plaintext: Array("{\(Self.base)\(extra)}".utf8))
    }

    @Test("A merchant token's identifier, card art and card data are read as Apple documents them")
    func merchantTokenFields() throws {
        let data = try data(
            """
            ,"merchantTokenIdentifier":"MTKABCDEFGHIJKLMNOPQRSTUVWXYZ",\
            "merchantTokenMetadata":{"cardArt":[{"name":"Orchard Bank Visa","type":"credit",\
            "url":"https://bank.orchard.test/art.png"}],"cardMetadata":{"cardCountry":"US","expirationDate":"12/34",\
            "fpanSuffix":"1111","longDescription":"Orchard Bank Visa Classic","shortDescription":"Visa Classic"}}
            """)
        #expect(data.merchantTokenIdentifier == "MTKABCDEFGHIJKLMNOPQRSTUVWXYZ")
        let metadata = try #require(data.merchantTokenMetadata)
        #expect(
            metadata.cardArt == [
                .init(name: "Orchard Bank Visa", type: "credit", url: "https://bank.orchard.test/art.png")
            ])
        #expect(
            metadata.cardMetadata
                == .init(
                    cardCountry: "US", expirationDate: "12/34", fpanSuffix: "1111",
                    longDescription: "Orchard Bank Visa Classic", shortDescription: "Visa Classic"))
        // Every member of the metadata is optional; a device token has neither field.
        let bare = try self.data(#","merchantTokenIdentifier":"MTK2","merchantTokenMetadata":{}"#)
        #expect(bare.merchantTokenMetadata == .init(cardArt: [], cardMetadata: nil))
        let device = try self.data("")
        #expect(device.merchantTokenIdentifier == nil && device.merchantTokenMetadata == nil)
        // The description shows neither the identifier's owner nor more than the DPAN's last four digits.
        #expect(!"\(data)".contains("4895370012345671"))
    }

    @Test("Malformed merchant token fields are refused with a typed error")
    func malformedMerchantTokenFields() {
        let cases: [(String, PaymentTokenError.Code)] = [
            (#","merchantTokenIdentifier":7"#, .invalidField),
            (#","merchantTokenMetadata":[]"#, .invalidField),
            (#","merchantTokenMetadata":{"cardArt":{}}"#, .invalidField),
            (#","merchantTokenMetadata":{"cardArt":["x"]}"#, .invalidField),
            (#","merchantTokenMetadata":{"cardArt":[{"name":"n","type":"t"}]}"#, .missingField),
            (#","merchantTokenMetadata":{"cardArt":[{"name":"n","type":"t","url":"u","x":1}]}"#, .unknownField),
            (#","merchantTokenMetadata":{"cardMetadata":[]}"#, .invalidField),
            (#","merchantTokenMetadata":{"cardMetadata":{"fpanSuffix":1111}}"#, .invalidField),
            (#","merchantTokenMetadata":{"cardMetadata":{"pan":"4111111111111111"}}"#, .unknownField),
            (#","merchantTokenMetadata":{"cardHolder":"x"}"#, .unknownField),
            (#","merchantTokenMetadata":{},"merchantTokenMetadata":{}"#, .duplicateKey),
        ]
        for (extra, code) in cases {
            #expect(throws: PaymentTokenError(code, ""), "\(extra)") { try data(extra) }
        }
    }
}
