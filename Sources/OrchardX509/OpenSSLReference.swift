internal import COpenSSL
internal import CShims
package import Foundation
import OrchardCrypto

/// OpenSSL's own reading of certificates, CSRs and CMS signatures: the reference the Swift code is
/// tested against, and the baseline of the benchmarks. Not for production paths (it is slow: the
/// OpenSSL 3.0 decoders cost hundreds of microseconds per object).
package enum OpenSSLReference {
    /// The fields of a certificate as OpenSSL decodes them.
    package struct CertificateFields: Equatable, Sendable {
        package var subjectDER: [UInt8]
        package var issuerDER: [UInt8]
        /// The serial number's magnitude, big-endian, without leading zeros.
        package var serialMagnitude: [UInt8]
        package var notBefore: Date
        package var notAfter: Date
        package var subjectPublicKeyInfoDER: [UInt8]
        package var extensions: [Extension]
        package var signatureAlgorithm: String
        package var signature: [UInt8]
        /// `i2d_re_X509_tbs`: tbsCertificate re-encoded by OpenSSL.
        package var tbsDER: [UInt8]
        /// `i2d_X509` of the decoded certificate.
        package var reencoded: [UInt8]

        package struct Extension: Equatable, Sendable {
            package var oid: String
            package var critical: Bool
            package var value: [UInt8]

            package init(oid: String, critical: Bool, value: [UInt8]) {
                self.oid = oid
                self.critical = critical
                self.value = value
            }
        }
    }

    /// Decodes `der` with `d2i_X509` and reads its fields with OpenSSL's accessors.
    package static func certificateFields(_ der: [UInt8]) throws(X509Error) -> CertificateFields {
        let cert = try OpenSSLCertificate(der: der)
        let x = cert.pointer
        var fields = CertificateFields(
            subjectDER: encode { i2d_X509_NAME(X509_get_subject_name(x), &$0) },
            issuerDER: encode { i2d_X509_NAME(X509_get_issuer_name(x), &$0) },
            serialMagnitude: [], notBefore: Date(timeIntervalSince1970: 0), notAfter: Date(timeIntervalSince1970: 0),
            subjectPublicKeyInfoDER: encode { i2d_X509_PUBKEY(X509_get_X509_PUBKEY(x), &$0) },
            extensions: [], signatureAlgorithm: "", signature: [],
            tbsDER: encode { i2d_re_X509_tbs(x, &$0) }, reencoded: cert.der)
        if let bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), nil) {
            var out = [UInt8](repeating: 0, count: Int((BN_num_bits(bn) + 7) / 8))
            _ = BN_bn2bin(bn, &out)
            BN_free(bn)
            fields.serialMagnitude = out
        }
        fields.notBefore = date(X509_get0_notBefore(x))
        fields.notAfter = date(X509_get0_notAfter(x))
        for i in 0..<X509_get_ext_count(x) {
            guard let ext = X509_get_ext(x, i), let data = X509_EXTENSION_get_data(ext) else { continue }
            let value = Array(
                UnsafeBufferPointer(start: ASN1_STRING_get0_data(data), count: Int(ASN1_STRING_length(data))))
            fields.extensions.append(
                .init(
                    oid: text(X509_EXTENSION_get_object(ext)), critical: X509_EXTENSION_get_critical(ext) == 1,
                    value: value))
        }
        var signature: UnsafePointer<ASN1_BIT_STRING>?
        var algorithm: UnsafePointer<X509_ALGOR>?
        X509_get0_signature(&signature, &algorithm, x)
        if let algorithm {
            var object: OpaquePointer?
            X509_ALGOR_get0(&object, nil, nil, algorithm)
            fields.signatureAlgorithm = text(object)
        }
        if let signature {
            fields.signature = Array(
                UnsafeBufferPointer(start: ASN1_STRING_get0_data(signature), count: Int(ASN1_STRING_length(signature))))
        }
        _ = drainOpenSSLErrors()
        return fields
    }

    /// Whether OpenSSL decodes `der` as a CSR and `X509_REQ_verify` accepts its self-signature.
    package static func csrSignatureIsValid(_ der: [UInt8]) -> Bool {
        let request = der.withUnsafeBufferPointer { b -> OpaquePointer? in
            var p: UnsafePointer<UInt8>? = b.baseAddress
            return d2i_X509_REQ(nil, &p, b.count)
        }
        guard let request else {
            _ = drainOpenSSLErrors()
            return false
        }
        defer { X509_REQ_free(request) }
        guard let key = X509_REQ_get0_pubkey(request) else { return false }
        let ok = X509_REQ_verify(request, key) == 1
        _ = drainOpenSSLErrors()
        return ok
    }

    /// OpenSSL's verdict on a detached CMS signature: `d2i_CMS_ContentInfo` then `CMS_verify` with a store
    /// holding only `roots`, purpose ANY, at `time`.
    package static func cmsVerifyDetached(
        signature: [UInt8], content: [UInt8], roots: [Certificate], at time: Date
    ) -> Bool {
        let cms = signature.withUnsafeBufferPointer { b -> OpaquePointer? in
            var p: UnsafePointer<UInt8>? = b.baseAddress
            return d2i_CMS_ContentInfo(nil, &p, b.count)
        }
        guard let cms else {
            _ = drainOpenSSLErrors()
            return false
        }
        defer { CMS_ContentInfo_free(cms) }
        guard let trust = try? OpenSSLTrustStore(roots: roots),
            let bio = try? MemoryBIO(copying: content)
        else { return false }
        X509_VERIFY_PARAM_set_time(
            X509_STORE_get0_param(trust.pointer), openSSLTime(time))
        let ok = CMS_verify(cms, nil, trust.pointer, bio.pointer, nil, UInt32(CMS_BINARY)) == 1
        _ = drainOpenSSLErrors()
        return ok
    }

    private static func encode(_ body: (inout UnsafeMutablePointer<UInt8>?) -> Int32) -> [UInt8] {
        var out: UnsafeMutablePointer<UInt8>?
        let n = body(&out)
        defer { orchard_OPENSSL_free(out) }
        guard n > 0, let out else { return [] }
        return Array(UnsafeBufferPointer(start: out, count: Int(n)))
    }

    private static func text(_ object: OpaquePointer?) -> String {
        var buffer = [CChar](repeating: 0, count: 128)
        let n = OBJ_obj2txt(&buffer, Int32(buffer.count), object, 1)
        guard n > 0 else { return "" }
        return String(decoding: buffer.prefix(Int(n)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func date(_ time: UnsafePointer<ASN1_TIME>?) -> Date {
        var parts = tm()
        guard ASN1_TIME_to_tm(time, &parts) == 1 else { return Date(timeIntervalSince1970: 0) }
        return Date(timeIntervalSince1970: Double(timegm(&parts)))
    }
}
