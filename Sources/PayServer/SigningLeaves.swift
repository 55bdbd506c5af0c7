import Foundation
public import OrchardCrypto
public import OrchardRuntime
import OrchardServices
public import OrchardX509
public import PaymentToken

#if canImport(Glibc)
    import Glibc
#endif

/// The Pay server's signing chains: one leaf per ``OrchardX509/SigningLeafKind`` under the token root's
/// integration CA, each with its own key and marker, so a verifier of one kind refuses what another kind's key
/// signed (docs/x509.md, "The token-signing PKI"). `orchard init` writes them; a deployment made before one leaf
/// per kind has only `token-signing`, and the Pay server issues the missing leaves when it starts
/// (``load(from:clock:random:)``).
public struct SigningLeaves: Sendable {
    /// Payment tokens: `pki/pay/token-signing` (Apple's marker 1.2.840.113635.100.6.29).
    public let paymentToken: TokenSigningPKI
    /// Merchant sessions: `pki/pay/token-session-signing`.
    public let merchantSession: TokenSigningPKI
    /// Domain-association files: `pki/pay/token-association-signing`.
    public let domainAssociationFile: TokenSigningPKI
    /// Capability statements: `pki/pay/token-capability-signing`.
    public let capabilityStatement: TokenSigningPKI

    /// The chain whose leaf signs `kind`.
    public subscript(kind: SigningLeafKind) -> TokenSigningPKI {
        switch kind {
        case .paymentToken: paymentToken
        case .merchantSession: merchantSession
        case .domainAssociationFile: domainAssociationFile
        case .capabilityStatement: capabilityStatement
        }
    }

    /// The token-signing leaf as the signer of the association files merchants still serve, when this deployment
    /// was made before one leaf per kind (its domain-association leaf was issued later than its token leaf), until
    /// that leaf was issued; nil for a deployment made with every leaf.
    public var legacyAssociationFileSigner: AssociationFiles.LegacySigner? {
        let issued = domainAssociationFile.leaf.notValidBefore
        guard issued > paymentToken.leaf.notValidBefore.addingTimeInterval(600) else { return nil }
        return AssociationFiles.LegacySigner(leaf: paymentToken.leaf, until: issued.addingTimeInterval(300))
    }

    /// The name in `pki/` (folder `pay`) of `kind`'s leaf and key.
    public static func fileName(_ kind: SigningLeafKind) -> String {
        switch kind {
        case .paymentToken: PayService.Files.tokenSigning
        case .merchantSession: "token-session-signing"
        case .domainAssociationFile: "token-association-signing"
        case .capabilityStatement: "token-capability-signing"
        }
    }

    /// The kinds Orchard marks under its own arc, whose leaves sit beside Apple's token-signing leaf.
    static let orchardKinds: [SigningLeafKind] = SigningLeafKind.allCases.filter { $0 != .paymentToken }

    /// Issues a leaf of every Orchard kind under `tokenSigning`'s integration CA, valid from `notValidBefore`, and
    /// writes each (key 0600) to `directory`.
    static func issueMissing(
        _ kinds: [SigningLeafKind], under tokenSigning: TokenSigningPKI, notValidBefore: Date,
        to directory: DeploymentDirectory, random: any RandomSource
    ) throws {
        for kind in kinds {
            let chain = try tokenSigning.issuingLeaf(for: kind, notValidBefore: notValidBefore, random: random)
            let name = fileName(kind)
            // The key first: a certificate on disk always has its key beside it.
            try directory.writePrivateKey(try chain.leafKey.pkcs8PEM, named: name)
            try DeploymentPKI.writeCertificates([chain.leaf], named: name, to: directory)
        }
    }

    /// Reads every leaf, checking each key is its certificate's, each leaf is issued by the integration CA and
    /// carries its kind's marker alone. The leaves a deployment made before one leaf per kind lacks are issued by
    /// the integration CA and written first, under an exclusive lock on `DIR/run/pay-signing-leaves.lock`, so
    /// instances starting at once on one directory issue them once; `issued` names them.
    public static func load(
        from directory: DeploymentDirectory, clock: any WallClock, random: any RandomSource
    ) throws -> (leaves: SigningLeaves, issued: [SigningLeafKind]) {
        let tokenSigning = try PayService.loadTokenSigningPKI(from: directory)
        var issued: [SigningLeafKind] = []
        if try !missing(in: directory).isEmpty {
            try SecureFile.createDirectory(directory.runPath, mode: 0o700)
            let lock = try FileLock(path: "\(directory.runPath)/pay-signing-leaves.lock")
            defer { lock.release() }
            issued = try missing(in: directory)
            try issueMissing(
                issued, under: tokenSigning, notValidBefore: clock.now().addingTimeInterval(-300), to: directory,
                random: random)
        }
        var chains: [SigningLeafKind: TokenSigningPKI] = [.paymentToken: tokenSigning]
        for kind in orchardKinds {
            let name = fileName(kind)
            let leaf = try CertificateAuthority.load(named: name, from: directory)
            guard leaf.certificate.issuer == tokenSigning.intermediate.subject else {
                throw ServicesError(.pkiFailure, "pki/\(name).pem is not issued by the token integration CA")
            }
            chains[kind] = TokenSigningPKI(
                root: tokenSigning.root, rootKey: tokenSigning.rootKey, intermediate: tokenSigning.intermediate,
                intermediateKey: tokenSigning.intermediateKey, leaf: leaf.certificate, leafKey: leaf.privateKey)
        }
        for (kind, chain) in chains where chain.kind != kind {
            throw ServicesError(
                .pkiFailure,
                "pki/\(fileName(kind)).pem is not a \(kind) signing leaf: it must carry the marker \(kind.marker) "
                    + "and no other signing-leaf marker")
        }
        let leaves = SigningLeaves(
            paymentToken: tokenSigning, merchantSession: chains[.merchantSession]!,
            domainAssociationFile: chains[.domainAssociationFile]!, capabilityStatement: chains[.capabilityStatement]!
        )
        return (leaves, issued)
    }

    /// The Orchard kinds whose certificate is not in `directory` (the key is written first, so a certificate
    /// present has its key).
    private static func missing(in directory: DeploymentDirectory) throws -> [SigningLeafKind] {
        try orchardKinds.filter { kind in
            !FileManager.default.fileExists(atPath: try directory.certificatePath(named: fileName(kind)))
        }
    }
}

/// An exclusive `flock` on a file, waited for; released by ``release()`` or by the kernel when the process dies.
private struct FileLock {
    private let descriptor: Int32

    init(path: String) throws(ServicesError) {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            throw ServicesError(.pkiFailure, "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else {
                let reason = String(cString: strerror(errno))
                close(fd)
                throw ServicesError(.pkiFailure, "cannot lock \(path): \(reason)")
            }
        }
        descriptor = fd
    }

    func release() { close(descriptor) }
}
