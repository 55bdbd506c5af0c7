internal import Foundation
internal import OrchardCrypto
internal import OrchardX509

/// The PKI figures of `orchard bench crypto`: certificate parsing in Swift against OpenSSL's `d2i_X509`,
/// and an Apple-style CMS verification on the fast path (chain cached) against its ceiling, one ECDSA verify.
enum X509Figures {
    static func figures() throws -> [BenchmarkFigure] {
        let signature = try X509Benchmarks.makeAppleStyleSignature()
        guard let leafDER = try CMSSignedData(berEncoded: signature.signature).certificates.first?.derRepresentation
        else { throw BenchmarkError(.invalidConfiguration, "the benchmark signature embeds no certificate") }
        return [
            BenchmarkFigure(
                name: "X.509 parse, P-256 leaf (Swift vs d2i_X509)",
                swift: { iterations in
                    for _ in 0..<iterations { _ = try X509Benchmarks.parseCertificateSwift(leafDER) }
                },
                raw: { iterations in
                    for _ in 0..<iterations { _ = try X509Benchmarks.parseCertificateOpenSSL(leafDER) }
                },
                crossCheck: {
                    let swift = try X509Benchmarks.parseCertificateSwift(leafDER)
                    guard swift.derRepresentation == leafDER else {
                        throw BenchmarkError(.mismatch, "the Swift parse changed the certificate's bytes")
                    }
                }),
            BenchmarkFigure(
                name: "CMS verify, Apple-style 1 KB (chain cached) vs one ECDSA verify",
                swift: { iterations in
                    for _ in 0..<iterations where !signature.verifyFast() {
                        throw BenchmarkError(.operationFailed, "the CMS signature did not verify")
                    }
                },
                raw: { iterations in
                    for _ in 0..<iterations where !signature.verifyCeiling() {
                        throw BenchmarkError(.operationFailed, "the ceiling ECDSA verify failed")
                    }
                },
                crossCheck: {
                    guard signature.verifyFast(), signature.verifyCeiling(), signature.verifyOpenSSL() else {
                        throw BenchmarkError(.mismatch, "the fast path, the ceiling and OpenSSL disagree")
                    }
                }),
        ]
    }
}
