import Foundation

extension CMSVerifier {
    /// Why `signature` is not a detached CMS signature over `content` that this verifier accepts (its roots and its
    /// policy), made at `milliseconds` (the signingTime, to the second, that `field` names), or nil when it is. The
    /// association file, the merchant session and the capability statement are all signed this way, each by its
    /// own leaf under the token-signing root (the verifier's policy names the kind; the reason names the marker a
    /// leaf of another kind lacks). `signed` names what carries the signature in the reasons ("the statement":
    /// "the statement's signature …"); nil says "the signature".
    package func signingProblem(
        _ signature: [UInt8], content: [UInt8], signedAt milliseconds: Int64, field: String, signed: String? = nil
    ) -> String? {
        let owner = signed.map { "\($0)'s" } ?? "the"
        let result: CMSVerificationResult
        do {
            result = try verifyDetachedSignature(signature, content: content, at: .signingTime)
        } catch {
            return "\(owner) signature is not a CMS SignedData (\(error.message))"
        }
        switch result {
        case .invalid(let failure):
            return "\(owner) signature does not verify to the Orchard token-signing root: \(failure.message)"
        case .valid(_, _, let signingTime):
            guard signingTime == Date(timeIntervalSince1970: Double(milliseconds / 1000)) else {
                return "\(signed.map { "\($0)'s" } ?? "the signature's") signingTime is not \(field)"
            }
            return nil
        }
    }
}
