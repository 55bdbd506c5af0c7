import Foundation
import OrchardX509

extension CMSVerifier {
    /// Why `signature` is not the token-signing chain's detached CMS signature over `content`, made at
    /// `milliseconds` (the signingTime, to the second, that `field` names), or nil when it is. The association
    /// file, the merchant session and the capability statement are all signed this way, each by its own leaf (the
    /// verifier's policy names the kind; the reason names the marker a leaf of another kind lacks).
    func signingProblem(_ signature: [UInt8], content: [UInt8], signedAt milliseconds: Int64, field: String) -> String?
    {
        let result: CMSVerificationResult
        do {
            result = try verifyDetachedSignature(signature, content: content, at: .signingTime)
        } catch {
            return "the signature is not a CMS SignedData (\(error.message))"
        }
        switch result {
        case .invalid(let failure):
            return "the signature does not verify to the Orchard token-signing root: \(failure.message)"
        case .valid(_, _, let signingTime):
            guard signingTime == Date(timeIntervalSince1970: Double(milliseconds / 1000)) else {
                return "the signature's signingTime is not \(field)"
            }
            return nil
        }
    }
}
