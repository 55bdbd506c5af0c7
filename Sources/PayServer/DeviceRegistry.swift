import Foundation
import OrchardCrypto
import OrchardHTTP
import OrchardStore
import OrchardX509
import PayAPI

/// The devices registered with the Pay server. A device proves who it is by its TLS client certificate, which
/// the device CA issued (`O=Orchard device, OU=<kind>, UID=<account>, CN=<name>`); at registration it also
/// presents its Secure Element certificate, from the same CA with the same subject, which the Pay server keeps
/// to hand to the token service at Link and Provision (the token service checks it again: the Pay server is a
/// relay, not the anchor).
final class DeviceRegistry: Sendable {
    /// Who a client certificate says the device is.
    struct Subject: Hashable, Sendable {
        let deviceID: String
        let kind: String
        let account: String
    }

    static let deviceKinds: Set<String> = ["phone", "watch", "ipad", "mac"]

    let store: Store
    let deviceCA: Certificate
    private let deviceCAKey: CertificatePublicKey?
    private let clock: any WallClock
    /// The certificates whose signature verified (only `true` is remembered).
    private let verifiedSignatures = DERMemo<Bool>(capacity: 4096)
    private let admitted = DERMemo<Admitted>(capacity: 4096)

    /// What a client certificate established the first time it was presented: issued by the device CA (its
    /// signature verified), for client authentication, with a device subject. A keep-alive connection presents
    /// the same bytes on every request; only the validity period depends on the time and is checked each time.
    private struct Admitted: Sendable {
        let subject: Subject
        let notValidBefore: Date
        let notValidAfter: Date
    }

    init(store: Store, deviceCA: Certificate, clock: any WallClock) {
        self.store = store
        self.deviceCA = deviceCA
        // try?: a device CA whose key cannot be read admits no device: every check fails closed.
        deviceCAKey = try? deviceCA.publicKey
        self.clock = clock
    }

    /// The route requirement: a client certificate the device CA issued for client authentication.
    var requirement: ClientCertificateRequirement {
        .required(where: { [self] presented in admittedSubject(presented.derRepresentation) != nil })
    }

    /// The device a client certificate names, if the device CA issued it for client authentication and it is
    /// valid now.
    private func admittedSubject(_ der: [UInt8]) -> Subject? {
        let admission = admitted.value(for: der) {
            // try?: a certificate that does not parse is not admitted.
            guard let certificate = try? Certificate(derEncoded: der), isIssuedByDeviceCA(certificate),
                // try?: an extended key usage that cannot be read is no clientAuth.
                (try? certificate.extendedKeyUsage)?.contains(.clientAuth) == true,
                let subject = Self.subject(of: certificate)
            else { return nil }
            return Admitted(
                subject: subject, notValidBefore: certificate.notValidBefore, notValidAfter: certificate.notValidAfter)
        }
        let now = clock.now()
        guard let admission, admission.notValidBefore <= now, now <= admission.notValidAfter else { return nil }
        return admission.subject
    }

    private func isIssuedByDeviceCA(_ certificate: Certificate) -> Bool {
        guard let deviceCAKey else { return false }
        let now = clock.now()
        guard certificate.issuer == deviceCA.subject, certificate.notValidBefore <= now,
            now <= certificate.notValidAfter
        else { return false }
        // The signature check is the costly part and its answer never changes for the same bytes: remember the
        // certificates whose signature verified (validity is still checked on every request, above).
        return verifiedSignatures.value(for: certificate.derRepresentation) {
            certificate.isSignature(validUnder: deviceCAKey) ? true : nil
        } != nil
    }

    static func subject(of certificate: Certificate) -> Subject? {
        let subject = certificate.subject
        guard subject.organization == "Orchard device", let name = subject.commonName,
            let kind = subject.organizationalUnit,
            let account = subject.userID, deviceKinds.contains(kind), PayService.isAccountName(account),
            isDeviceName(name)
        else { return nil }
        return Subject(deviceID: name, kind: kind, account: account)
    }

    /// Device names as devices take them: 1 to 64 letters, digits, `.`, `_` or `-`.
    static func isDeviceName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        return (1...64).contains(bytes.count)
            && bytes.allSatisfy { byte in
                (0x61...0x7A).contains(byte) || (0x41...0x5A).contains(byte) || (0x30...0x39).contains(byte)
                    || [UInt8(ascii: "."), UInt8(ascii: "-"), UInt8(ascii: "_")].contains(byte)
            }
    }

    /// The subject of the request's (already verified) client certificate.
    func subject(of request: HTTPRequest) throws(PayServerError) -> Subject {
        guard let der = request.clientCertificate?.derRepresentation, let subject = admittedSubject(der) else {
            throw PayServerError(.notPermitted, "this route needs a device's client certificate")
        }
        return subject
    }

    /// Registers (or re-registers) the device of `subject` with its Secure Element certificate. The account is
    /// created at its first device (signing in to the account in the sandbox). Re-registering an erased device
    /// sets it up again; lost mode stays until the owner leaves it.
    ///
    /// `enclaveKey` (X9.63) is kept for the device's life: a registration that names another is refused, since
    /// a device's Secure Enclave key never changes and it is what proves the user's passcode (leaving lost mode).
    func register(
        _ subject: Subject, secureElementCertificate der: [UInt8], enclaveKey: [UInt8]
    ) async throws -> RegisteredDevice {
        // try?: a key that does not parse is the refusal below.
        guard (try? P256.Signing.PublicKey(x963Representation: enclaveKey)) != nil else {
            throw PayServerError(.invalidRequest, "enclavePublicKey is a P-256 public key (X9.63, base64)")
        }
        // try?: a certificate that does not parse is the refusal below.
        guard let certificate = try? Certificate(derEncoded: der) else {
            throw PayServerError(.invalidRequest, "the Secure Element certificate is not a DER certificate")
        }
        guard isIssuedByDeviceCA(certificate), Self.subject(of: certificate) == subject,
            // try?: a key usage that cannot be read is no keyAgreement (the refusal below).
            (try? certificate.keyUsage)?.contains(.keyAgreement) == true
        else {
            throw PayServerError(
                .deviceMismatch,
                "the Secure Element certificate is not the device CA's certificate for device \(subject.deviceID)")
        }
        let now = clock.now()
        return try await store.write { db in
            try db.execute(
                "INSERT OR IGNORE INTO accounts (name, created_at) VALUES (?, ?)",
                [.text(subject.account), .milliseconds(now)])
            let existing = try db.queryFirst(
                "SELECT account, kind, lost_mode, enclave_public_key FROM devices WHERE device_id = ?",
                [.text(subject.deviceID)]
            ) { row in (try row.string(0), try row.string(1), try row.int64(2) != 0, try row.optionalBlob(3)) }
            if let existing {
                guard existing.0 == subject.account, existing.1 == subject.kind else {
                    throw PayServerError(
                        .deviceMismatch, "device \(subject.deviceID) is registered to another account or kind")
                }
                if let registered = existing.3, registered != enclaveKey {
                    throw PayServerError(
                        .deviceMismatch,
                        "device \(subject.deviceID) registered another Secure Enclave key; a device keeps its key")
                }
                try db.execute(
                    """
                    UPDATE devices SET secure_element_certificate = ?, enclave_public_key = ?, erased_at = NULL
                    WHERE device_id = ?
                    """, [.blob(der), .blob(enclaveKey), .text(subject.deviceID)])
                return RegisteredDevice(
                    deviceID: subject.deviceID, account: subject.account, kind: subject.kind, lostMode: existing.2)
            }
            try db.execute(
                """
                INSERT INTO devices
                    (device_id, account, kind, secure_element_certificate, enclave_public_key, registered_at)
                VALUES (?, ?, ?, ?, ?, ?)
                """,
                [
                    .text(subject.deviceID), .text(subject.account), .text(subject.kind), .blob(der),
                    .blob(enclaveKey), .milliseconds(now),
                ])
            return RegisteredDevice(
                deviceID: subject.deviceID, account: subject.account, kind: subject.kind, lostMode: false)
        }
    }

    /// A registered device as stored.
    struct Record: Sendable {
        let deviceID: String
        let account: String
        let kind: String
        let secureElementCertificate: [UInt8]
        let lostMode: Bool
        let erased: Bool
        /// X9.63; nil for a device registered before Secure Enclave keys were kept.
        let enclaveKey: [UInt8]?
    }

    func device(_ deviceID: String) async throws -> Record? {
        try await store.read { db in
            try db.queryFirst(
                """
                SELECT device_id, account, kind, secure_element_certificate, lost_mode, erased_at IS NOT NULL,
                       enclave_public_key
                FROM devices WHERE device_id = ?
                """, [.text(deviceID)]
            ) { row in
                Record(
                    deviceID: try row.string(0), account: try row.string(1), kind: try row.string(2),
                    secureElementCertificate: try row.blob(3), lostMode: try row.int64(4) != 0,
                    erased: try row.int64(5) != 0, enclaveKey: try row.optionalBlob(6))
            }
        }
    }

    /// The registered, not erased, device that sent `request`.
    func registeredDevice(_ request: HTTPRequest) async throws -> Record {
        let subject = try subject(of: request)
        guard let record = try await device(subject.deviceID), record.account == subject.account, !record.erased else {
            throw PayServerError(
                .deviceNotRegistered, "device \(subject.deviceID) is not registered; register it first")
        }
        return record
    }
}
