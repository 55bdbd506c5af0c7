import EMV
import Foundation
import OrchardCrypto
import PaymentCredential
import Testing

let masterKey = SymmetricKey(data: [UInt8](repeating: 0x5A, count: 8) + [UInt8](repeating: 0xA5, count: 8))
let nonce = [UInt8](repeating: 0x42, count: 32)
let merchant = "merchant.dev.orchard.demo"

func makeCredential(
    cryptogram: RemoteCryptogram? = nil, applicationDataHash: [UInt8]? = SHA256.hash(Array("order-1".utf8))
) throws -> PaymentCredential {
    try PaymentCredential(
        nonce: nonce, merchantIdentifier: merchant, applicationIdentifier: "dev.orchard.demo-app",
        dpan: SecureBytes(Array("4895370012345678".utf8)), expiry: "301231",
        cryptogram: try cryptogram
            ?? RemoteCryptogram.generate(
                masterKey: masterKey, atc: 7, amount: 1999, currency: 840, nonce: nonce, merchantIdentifier: merchant),
        eci: "05", amount: 1999, currency: 840, applicationDataHash: applicationDataHash, channel: .inApp)
}

@Suite("Remote cryptogram")
struct RemoteCryptogramTests {
    let cryptogram: RemoteCryptogram
    init() throws {
        cryptogram = try RemoteCryptogram.generate(
            masterKey: masterKey, atc: 0x0102, amount: 1999, currency: 840, nonce: nonce, merchantIdentifier: merchant)
    }

    @Test("Layout: 20 bytes, version, key index, ATC, nonce binding, MAC; round trip")
    func layout() throws {
        let bytes = cryptogram.bytes
        #expect(bytes.count == 20)
        #expect(Array(bytes[0..<4]) == [0x01, 0x01, 0x01, 0x02])
        #expect(Array(bytes[4..<12]) == Array(SHA256.hash(nonce).prefix(8)))
        #expect(try RemoteCryptogram(bytes: bytes) == cryptogram)
        #expect(cryptogram.isBound(toNonce: nonce))
        #expect(!cryptogram.isBound(toNonce: [UInt8](repeating: 0x43, count: 32)))
        #expect(throws: PaymentCredentialError(.malformed, "")) { try RemoteCryptogram(bytes: bytes.prefix(19)) }
        var other = bytes
        other[0] = 2
        #expect(throws: PaymentCredentialError(.unsupportedVersion, "")) { try RemoteCryptogram(bytes: other) }
    }

    @Test("The MAC is ISO 9797-1 algorithm 3 under the EMV common session key, over the documented input")
    func macInput() throws {
        let sessionKey = try EMVKeyDerivation.commonSessionKey(masterKey: masterKey, atc: 0x0102)
        let input: [UInt8] =
            [0x01, 0x01, 0x01, 0x02] + [0x00, 0x00, 0x00, 0x00, 0x19, 0x99] + [0x08, 0x40]
            + Array(SHA256.hash(nonce).prefix(8)) + SHA256.hash(Array(merchant.utf8))
        #expect(try RetailMAC.mac(input, key: sessionKey, padding: .method2) == cryptogram.mac)
    }

    @Test("Verifies for its transaction only: amount, currency, merchant, key, any flipped bit")
    func verification() throws {
        let merchantHash = SHA256.hash(Array(merchant.utf8))
        #expect(
            try cryptogram.verify(
                masterKey: masterKey, amount: 1999, currency: 840, merchantIdentifierHash: merchantHash))
        #expect(
            !(try cryptogram.verify(
                masterKey: masterKey, amount: 2000, currency: 840, merchantIdentifierHash: merchantHash)))
        #expect(
            !(try cryptogram.verify(
                masterKey: masterKey, amount: 1999, currency: 978, merchantIdentifierHash: merchantHash)))
        #expect(
            !(try cryptogram.verify(
                masterKey: masterKey, amount: 1999, currency: 840,
                merchantIdentifierHash: SHA256.hash(Array("merchant.dev.other".utf8)))))
        let otherKey = SymmetricKey(data: [UInt8](repeating: 0x11, count: 16))
        #expect(
            !(try cryptogram.verify(
                masterKey: otherKey, amount: 1999, currency: 840, merchantIdentifierHash: merchantHash)))
        for index in 1..<20 {
            for bit in 0..<8 {
                var flipped = cryptogram.bytes
                flipped[index] ^= UInt8(1 << bit)
                let parsed = try RemoteCryptogram(bytes: flipped)
                #expect(
                    !(try parsed.verify(
                        masterKey: masterKey, amount: 1999, currency: 840, merchantIdentifierHash: merchantHash)))
            }
        }
        #expect(throws: PaymentCredentialError(.invalidArgument, "")) {
            try cryptogram.verify(
                masterKey: SymmetricKey(data: [UInt8](repeating: 1, count: 8)), amount: 1, currency: 840,
                merchantIdentifierHash: merchantHash)
        }
    }

    @Test("Remote transaction data round-trips and refuses a wrong length")
    func transactionData() throws {
        let data = RemoteTransactionData(merchantIdentifier: merchant, amount: 1999, currency: 840)
        #expect(data.encoded.count == 42)
        #expect(try RemoteTransactionData(encoded: data.encoded) == data)
        #expect(throws: PaymentCredentialError(.malformed, "")) {
            try RemoteTransactionData(encoded: data.encoded.dropLast())
        }
    }
}

@Suite("Payment credential")
struct PaymentCredentialTests {
    @Test("Encodes and decodes every field; the description hides the DPAN")
    func roundTrip() throws {
        let credential = try makeCredential()
        let decoded = try PaymentCredential(encoded: credential.encoded())
        #expect(decoded.nonce == nonce && decoded.merchantIdentifier == merchant)
        #expect(decoded.applicationIdentifier == "dev.orchard.demo-app" && decoded.dpanString == "4895370012345678")
        #expect(decoded.expiry == "301231" && decoded.eci == "05" && decoded.amount == 1999 && decoded.currency == 840)
        #expect(decoded.cryptogram == credential.cryptogram && decoded.channel == .inApp)
        #expect(decoded.applicationDataHash == SHA256.hash(Array("order-1".utf8)))
        let without = try PaymentCredential(encoded: try makeCredential(applicationDataHash: nil).encoded())
        #expect(without.applicationDataHash == nil)
        for text in [credential.description, credential.debugDescription, String(reflecting: credential)] {
            #expect(!text.contains("4895370012345678") && !text.contains("5678"))
        }
        var dumped = ""
        dump(credential, to: &dumped)
        #expect(!dumped.contains("4895370012345678"))
    }

    @Test("W4: version 2 binds a web credential to its merchant session (tags 0C, 0D); every misuse is refused")
    func sessionVersion() throws {
        let session = try PaymentCredential.MerchantSessionBinding(
            identifier: "SSH" + String(repeating: "A", count: 32) + "_" + String(repeating: "B", count: 64),
            nonce: "0a1b2c3d")
        let inApp = try makeCredential()
        func web(
            _ session: PaymentCredential.MerchantSessionBinding?, channel: PaymentCredential.Channel = .web
        )
            throws -> PaymentCredential
        {
            try PaymentCredential(
                nonce: nonce, merchantIdentifier: merchant, applicationIdentifier: "store.orchard.test",
                dpan: SecureBytes(Array("4895370012345678".utf8)), expiry: "301231", cryptogram: inApp.cryptogram,
                eci: "05", amount: 1999, currency: 840, applicationDataHash: nil, channel: channel,
                merchantSession: session)
        }
        let credential = try web(session)
        let bytes = credential.encoded().unsafeCopyOfBytes()
        #expect(Array(bytes.prefix(4)) == [0x00, 0x00, 0x01, 0x02])
        let tail =
            [0x0B, 0x00, 0x01, 0x03, 0x0C, 0x00, 0x64] + Array(session.identifier.utf8) + [0x0D, 0x00, 0x08]
            + Array("0a1b2c3d".utf8)
        #expect(Array(bytes.suffix(tail.count)) == tail)
        let decoded = try PaymentCredential(encoded: credential.encoded())
        #expect(decoded.merchantSession == session && decoded.channel == .web)
        // An in-app credential stays version 1.
        #expect(inApp.encoded().unsafeCopyOfBytes()[3] == 1 && inApp.merchantSession == nil)
        // Only a web credential has a session.
        #expect(throws: PaymentCredentialError(.invalidArgument, "")) { try web(session, channel: .inApp) }
        // Version 2 without its session tags; version 2 as in-app; bad session forms.
        var withoutSession = bytes
        withoutSession.removeLast(tail.count - 4)
        #expect(throws: PaymentCredentialError(.malformed, "")) {
            try PaymentCredential(encoded: SecureBytes(withoutSession))
        }
        var v2InApp = inApp.encoded().unsafeCopyOfBytes()
        v2InApp[3] = 2
        #expect(throws: PaymentCredentialError(.malformed, "")) {
            try PaymentCredential(encoded: SecureBytes(v2InApp + Array(tail.dropFirst(4))))
        }
        #expect(throws: PaymentCredentialError(.invalidArgument, "")) {
            try PaymentCredential.MerchantSessionBinding(identifier: session.identifier, nonce: "0A1B2C3D")
        }
        #expect(throws: PaymentCredentialError(.invalidArgument, "")) {
            try PaymentCredential.MerchantSessionBinding(identifier: "", nonce: "0a1b2c3d")
        }
    }

    @Test("Malformed encodings: truncation, unknown, repeated or missing tags, wrong version")
    func malformed() throws {
        let bytes = try makeCredential().encoded().unsafeCopyOfBytes()
        for cut in [1, 3, 10, bytes.count - 1] {
            #expect(throws: PaymentCredentialError.self) {
                try PaymentCredential(encoded: SecureBytes(bytes.prefix(cut)))
            }
        }
        #expect(throws: PaymentCredentialError(.malformed, "")) {
            try PaymentCredential(encoded: SecureBytes(bytes + [0x0C, 0x00, 0x00]))
        }
        #expect(throws: PaymentCredentialError(.malformed, "")) {
            try PaymentCredential(encoded: SecureBytes(bytes + [0x0B, 0x00, 0x01, 0x02]))
        }
        // Without the nonce field (tag 01, 32 bytes at offset 4).
        #expect(throws: PaymentCredentialError(.malformed, "")) {
            try PaymentCredential(encoded: SecureBytes(Array(bytes[0..<4]) + Array(bytes[39...])))
        }
        var version = bytes
        version[3] = 3
        #expect(throws: PaymentCredentialError(.unsupportedVersion, "")) {
            try PaymentCredential(encoded: SecureBytes(version))
        }
        #expect(throws: PaymentCredentialError(.invalidArgument, "")) {
            try PaymentCredential(
                nonce: [1, 2, 3], merchantIdentifier: merchant, applicationIdentifier: "a.b",
                dpan: SecureBytes(Array("4895370012345678".utf8)), expiry: "301231",
                cryptogram: try makeCredential().cryptogram, eci: "05", amount: 1, currency: 840,
                applicationDataHash: nil, channel: .web)
        }
    }

    @Test("Sealed to the Pay server key and signed by the SE key; other keys, purposes and edits are refused")
    func sealing() throws {
        let payServer = try P256.KeyAgreement.PrivateKey()
        let secureElement = try P256.Signing.PrivateKey()
        let sealed = try SealedPaymentCredential.seal(
            try makeCredential(), signingKey: secureElement, to: payServer.publicKey)
        let opened = try SealedPaymentCredential.open(sealed, with: payServer)
        #expect(opened.isSigned(by: secureElement.publicKey))
        #expect(!opened.isSigned(by: try P256.Signing.PrivateKey().publicKey))
        #expect(opened.credential.dpanString == "4895370012345678")
        #expect(!opened.description.contains("4895370012345678"))
        #expect(throws: PaymentCredentialError(.notAddressedToRecipient, "")) {
            try SealedPaymentCredential.open(sealed, with: try P256.KeyAgreement.PrivateKey())
        }
        var altered = sealed
        altered[100] ^= 0x01
        #expect(throws: PaymentCredentialError(.notAddressedToRecipient, "")) {
            try SealedPaymentCredential.open(altered, with: payServer)
        }
        let otherPurpose = try SealedEnvelope.seal([0, 1, 2], to: payServer.publicKey, purpose: "something-else")
        #expect(throws: PaymentCredentialError(.notAddressedToRecipient, "")) {
            try SealedPaymentCredential.open(otherPurpose, with: payServer)
        }
        #expect(throws: PaymentCredentialError(.malformed, "")) {
            try SealedPaymentCredential.open([UInt8](repeating: 0, count: 5000), with: payServer)
        }
    }
}
