/// `POST /v1/web/merchants/:merchant/processing-certificates`: a merchant delegates the decryption of its payment
/// tokens to a processor (a PSP), as Apple's merchants upload their PSP's CSR at the developer portal. Only the
/// merchant's own portal certificate can ask, so no processor and no imported bundle gets a certificate for a
/// merchant ID by itself; the processor keeps its private key and receives the certificate from the merchant.
public struct ProcessingCertificateRequest: Codable, Sendable, Hashable {
    /// The processor's PKCS #10 request, PEM: a P-256 key (EC_v1) or an RSA-2048 key (RSA_v1), subject UID the
    /// merchant ID, signed by its own key.
    public let certificateSigningRequest: String
    /// Who processes with the certificate, as the merchant names its acquiring relationship: 1 to 64 lowercase
    /// letters, digits, `.`, `_` and `-` (for example `psp.example`). Recorded with the certificate and listed by
    /// `orchard merchant certs`.
    public let processor: String

    public init(certificateSigningRequest: String, processor: String) {
        self.certificateSigningRequest = certificateSigningRequest
        self.processor = processor
    }

    /// Whether `name` is a processor name: 1 to 64 lowercase letters, digits, `.`, `_` and `-`, starting with a
    /// letter or digit.
    public static func isProcessorName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        func allowed(_ byte: UInt8) -> Bool {
            (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte) || [0x2E, 0x5F, 0x2D].contains(byte)
        }
        guard let first = bytes.first, (1...64).contains(bytes.count), allowed(first), first >= 0x30 else {
            return false
        }
        return bytes.allSatisfy(allowed)
    }
}

/// The certificate issued for a ``ProcessingCertificateRequest``.
public struct ProcessingCertificateResponse: Codable, Sendable, Hashable {
    public let merchantIdentifier: String
    /// The certificate's serial number, upper-case hex (`orchard merchant certs --revoke SERIAL` ends it).
    public let serial: String
    public let processor: String
    /// The certificate then the merchant CA's, PEM: what the processor installs beside its key.
    public let certificateChain: [String]
    /// When the certificate expires, ISO 8601.
    public let notAfter: String

    public init(
        merchantIdentifier: String, serial: String, processor: String, certificateChain: [String], notAfter: String
    ) {
        self.merchantIdentifier = merchantIdentifier
        self.serial = serial
        self.processor = processor
        self.certificateChain = certificateChain
        self.notAfter = notAfter
    }
}
