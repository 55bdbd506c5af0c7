import Foundation
import OrchardCrypto
import OrchardHTTP
import OrchardLogging
import OrchardStore
import PayAPI
import TokenRequestorAPI

/// The Pay server's routes for devices (all over mutual TLS with a device's client certificate): registration,
/// the provisioning relay, the cards' display data, the owner's lifecycle actions and token-status notifications.
///
/// The relay forwards envelopes it cannot open: the card data is sealed on the device to the token service's key
/// (whose certificate the device checks against the Orchard root), and the personalisation is sealed by the token
/// service to the Secure Element key of the certificate the device registered. What the Pay server keeps of a
/// card is its display data (network, type, last four digits, description) under the token's reference.
extension PayServer {
    /// The EMVCo token requestor ID of Orchard Pay in a single-directory deployment, where its own root certifies
    /// it. A Pay side deployed on its own uses the one the network assigned (``NetworkClient/tokenRequestorID``).
    static let tokenRequestorID = "40010075001"
    /// The terms the token service asks the user to accept, by ID.
    static let terms = [
        "orchard-pay-terms-v1": """
        Orchard Pay terms (sandbox). Adding a card creates a device account number for this device only; the card \
        number is never stored on the device or by Orchard Pay. The issuer may suspend or delete it at any time.
        """
    ]

    func installDeviceRoutes(into router: inout Router) {
        let devices = self.devices
        let network = self.network
        let store = self.store
        let clock = self.clock

        router.add(PayAPI.Declared.register) { (body: DeviceRegistrationRequest, request) in
            guard let der = Data(base64Encoded: body.secureElementCertificate) else {
                throw PayServerError(.invalidRequest, "secureElementCertificate is base64 DER")
            }
            guard let enclaveKey = Data(base64Encoded: body.enclavePublicKey) else {
                throw PayServerError(.invalidRequest, "enclavePublicKey is base64 X9.63")
            }
            return try await devices.register(
                try devices.subject(of: request), secureElementCertificate: Array(der), enclaveKey: Array(enclaveKey))
        }

        router.add(PayAPI.Declared.provisioningKey) { request in
            _ = try await devices.registeredDevice(request)
            let key: TokenRequestorAPI.ProvisioningKey = try await network.get(TokenRequestorAPI.Route.provisioningKey)
            guard let certificate = key.certificate else {
                throw PayServerError(.networkUnavailable, "the token service has no provisioning certificate")
            }
            return try HTTPResponse.json(ProvisioningKeyResponse(certificate: certificate))
        }

        router.add(PayAPI.Declared.checkCard) { (body: CheckCardBody, request) in
            let device = try await devices.registeredDevice(request)
            try Self.checkIdempotencyKey(body.idempotencyKey)
            let answer: TokenRequestorAPI.CheckCardAnswer = try await network.post(
                TokenRequestorAPI.Route.checkCard,
                TokenRequestorAPI.CheckCardRequest(
                    idempotencyKey: device.deviceID + "/" + body.idempotencyKey,
                    tokenRequestorID: network.tokenRequestorID,
                    deviceID: device.deviceID, deviceKind: device.kind, encryptedCardData: body.encryptedCardData))
            return try await Self.relay(answer, for: device.deviceID, at: clock.now(), store: store)
        }

        router.add(PayAPI.Declared.oneTimeCode) { (body: OneTimeCodeBody, request) in
            let device = try await devices.registeredDevice(request)
            try await Self.checkSession(body.sessionID, belongsTo: device.deviceID, store: store)
            let answer: TokenRequestorAPI.CheckCardAnswer = try await network.post(
                TokenRequestorAPI.Route.oneTimeCode,
                TokenRequestorAPI.OneTimeCodeRequest(
                    sessionID: body.sessionID, deviceID: device.deviceID, code: body.code))
            return try await Self.relay(answer, for: device.deviceID, at: clock.now(), store: store)
        }

        router.add(PayAPI.Declared.terms) { request in
            let termsID = try request.parameter("id")
            guard let text = Self.terms[termsID] else { throw PayServerError(.notFound, "no terms \(termsID)") }
            return try HTTPResponse.json(TermsResponse(termsID: termsID, text: text))
        }

        router.add(PayAPI.Declared.link) { (body: LinkBody, request) in
            let device = try await devices.registeredDevice(request)
            try Self.checkIdempotencyKey(body.idempotencyKey)
            try await Self.checkSession(body.sessionID, belongsTo: device.deviceID, store: store)
            // The Secure Element certificate the device registered, never one from this request. The session row
            // stays, so a retried Link (same key) reaches the network and gets its first answer.
            let answer: TokenRequestorAPI.LinkAnswer = try await network.post(
                TokenRequestorAPI.Route.link,
                TokenRequestorAPI.LinkRequest(
                    idempotencyKey: device.deviceID + "/" + body.idempotencyKey, sessionID: body.sessionID,
                    deviceID: device.deviceID,
                    secureElementCertificateChain: [Data(device.secureElementCertificate).base64EncodedString()],
                    termsAccepted: body.termsAccepted))
            let token: TokenRequestorAPI.ProvisionedToken
            switch answer {
            case .declined(let reason): return LinkResult(outcome: "declined", declineReason: reason)
            case .provisioned(let provisioned): token = provisioned
            }
            let display = Self.display(token.profile)
            try await store.write { db in
                try db.execute(
                    """
                    INSERT INTO device_cards (token_reference, device_id, network, type, suffix, description, state,
                        added_at)
                    VALUES (?, ?, ?, ?, ?, ?, 'active', ?)
                    ON CONFLICT (token_reference) DO NOTHING
                    """,
                    [
                        .text(token.tokenReference), .text(device.deviceID), .text(display.network),
                        .text(display.type),
                        .text(display.suffix), .text(display.description), .milliseconds(clock.now()),
                    ])
            }
            return LinkResult(
                outcome: "provisioned", tokenReference: token.tokenReference, deviceAccountSuffix: token.dpanSuffix,
                card: display, personalisation: token.personalisation)
        }

        router.add(PayAPI.Declared.cards) { request in
            let subject = try devices.subject(of: request)
            await self.pullNetworkNotifications()
            return try HTTPResponse.json(try await Self.cards(of: subject.deviceID, store: store))
        }

        router.add(PayAPI.Declared.notifications) { request in
            // An erased device still learns of its deletion when it comes back online.
            let subject = try devices.subject(of: request)
            guard let after = Int64(request.queryValue("after") ?? "0"), after >= 0 else {
                throw PayServerError(.invalidRequest, "after is a sequence number (0 or more)")
            }
            await self.pullNetworkNotifications()
            let (pending, lostMode) = try await store.write { db in
                try db.execute(
                    "DELETE FROM device_notifications WHERE device_id = ? AND sequence <= ?",
                    [.text(subject.deviceID), .integer(after)])
                let lostMode =
                    try db.queryFirst(
                        "SELECT lost_mode FROM devices WHERE device_id = ?", [.text(subject.deviceID)]
                    ) { try $0.int64(0) != 0 } ?? false
                let pending = try db.query(
                    """
                    SELECT sequence, token_reference, event, state FROM device_notifications
                    WHERE device_id = ? ORDER BY sequence LIMIT 100
                    """, [.text(subject.deviceID)]
                ) { row in
                    TokenNotification(
                        sequence: try row.int64(0), tokenReference: try row.string(1), event: try row.string(2),
                        state: try row.string(3))
                }
                return (pending, lostMode)
            }
            return try HTTPResponse.json(NotificationsResponse(notifications: pending, lostMode: lostMode))
        }

        let merchants = self.merchants
        router.add(PayAPI.Declared.appEntitlements) { request in
            _ = try await devices.registeredDevice(request)
            let application = try request.parameter("app")
            return try HTTPResponse.json(
                AppEntitlements(
                    applicationIdentifier: application,
                    merchantIdentifiers: try await merchants.entitlements(of: application)))
        }

        for action in PayAPI.LifecycleAction.allCases {
            router.add(PayAPI.Declared.lifecycle(action)) {
                request in
                let device = try await self.ownedDevice(request)
                if action != .erase, device.erased {
                    throw PayServerError(
                        .deviceNotRegistered,
                        "device \(device.deviceID) was erased; it stays erased until it registers again")
                }
                if action == .resume {
                    // The user's passcode on the device, never the certificate of a device of the account alone.
                    try await self.checkPasscodeAttestation(request, device: device)
                }
                return try HTTPResponse.json(
                    try await self.lifecycle(action, device: device.deviceID, store: store, network: network))
            }
        }

        router.add(PayAPI.Declared.resumeChallenge) { request in
            let device = try await self.ownedDevice(request)
            guard !device.erased else {
                throw PayServerError(
                    .deviceNotRegistered,
                    "device \(device.deviceID) was erased; it stays erased until it registers again")
            }
            let challenge = self.random.bytes(PayAPI.PasscodeAttestation.challengeByteCount)
            let wall = clock
            try await store.write { db in
                // On PostgreSQL the database's clock, which every instance reads (another may take the answer).
                let now = Date(orchardMilliseconds: try db.expiryMilliseconds(.database) { wall.now() })
                let expiresAt = now.addingTimeInterval(Self.resumeChallengeLifetime)
                try db.execute(
                    """
                    INSERT INTO resume_challenges (device_id, challenge, expires_at) VALUES (?, ?, ?)
                    ON CONFLICT (device_id) DO UPDATE SET challenge = excluded.challenge, expires_at = excluded.expires_at
                    """, [.text(device.deviceID), .blob(challenge), .milliseconds(expiresAt)])
            }
            return try HTTPResponse.json(
                ResumeChallenge(
                    challenge: Data(challenge).base64EncodedString(),
                    expiresInSeconds: Int(Self.resumeChallengeLifetime)))
        }
    }

    /// How long a resume challenge may wait for its attestation.
    static let resumeChallengeLifetime: TimeInterval = 120

    /// The device named in the path, if it belongs to the account of the calling device.
    func ownedDevice(_ request: HTTPRequest) async throws -> DeviceRegistry.Record {
        let owner = try devices.subject(of: request)
        let target = try request.parameter("device")
        guard let device = try await devices.device(target), device.account == owner.account else {
            // The same answer for another account's device and for none: no probing of device names.
            throw PayServerError(.notFound, "the account has no device \(target)")
        }
        return device
    }

    /// Leaving lost mode: the body's challenge must be the device's outstanding one (spent here, right or
    /// wrong), and the attestation its Secure Enclave's signature over it, with the key the device registered.
    func checkPasscodeAttestation(_ request: HTTPRequest, device: DeviceRegistry.Record) async throws {
        let refused = PayServerError(
            .notPermitted,
            "leaving lost mode needs the passcode entered on the device: ask for a resume challenge, and send its "
                + "Secure Enclave's attestation")
        // Through the one strict decoder: a key given twice is its 400 `duplicate_key` (the challenge unspent);
        // any other body that is no attestation is the refusal above.
        let body: ResumeRequest
        do throws(HTTPError) {
            body = try request.decodeJSON(ResumeRequest.self)
        } catch  where error.code == .duplicateKey {
            throw error
        } catch {
            throw refused
        }
        guard let challenge = Data(base64Encoded: body.challenge), let signature = Data(base64Encoded: body.attestation)
        else { throw refused }
        let wall = clock
        let outstanding = try await store.write { db in
            let now = Date(orchardMilliseconds: try db.expiryMilliseconds(.database) { wall.now() })
            let row = try db.queryFirst(
                "SELECT challenge, expires_at FROM resume_challenges WHERE device_id = ?", [.text(device.deviceID)]
            ) { row in (try row.blob(0), try row.date(1), now) }
            try db.execute("DELETE FROM resume_challenges WHERE device_id = ?", [.text(device.deviceID)])
            return row
        }
        guard let outstanding, outstanding.2 < outstanding.1, constantTimeEquals(outstanding.0, Array(challenge)),
            let registered = device.enclaveKey,
            // try?: a registered key that does not parse is the refusal below.
            let key = try? P256.Signing.PublicKey(x963Representation: registered),
            // try?: a signature that is not DER is the refusal below.
            let ecdsa = try? P256.Signing.ECDSASignature(derRepresentation: Array(signature)),
            key.isValidSignature(ecdsa, for: PayAPI.PasscodeAttestation.signedContent(challenge: Array(challenge)))
        else { throw refused }
    }

    /// Lost mode, resume and erase reach the token service at once (the device may be offline); the device learns
    /// of them through its notifications.
    func lifecycle(
        _ action: PayAPI.LifecycleAction, device deviceID: String, store: Store, network: NetworkClient
    ) async throws -> LifecycleResult {
        let change: TokenRequestorAPI.LifecycleAction
        switch action {
        case .lostMode: change = .suspend
        case .resume: change = .resume
        case .erase: change = .delete
        }
        let answer: TokenRequestorAPI.DeviceLifecycleAnswer = try await network.post(
            TokenRequestorAPI.Route.device(deviceID, change), TokenRequestorAPI.LifecycleRequest(actor: .cardholder))
        try await store.write { db in
            switch action {
            case .lostMode:
                try db.execute("UPDATE devices SET lost_mode = 1 WHERE device_id = ?", [.text(deviceID)])
            case .resume:
                try db.execute("UPDATE devices SET lost_mode = 0 WHERE device_id = ?", [.text(deviceID)])
            case .erase:
                try db.execute(
                    "UPDATE devices SET lost_mode = 0, erased_at = ? WHERE device_id = ?",
                    [.milliseconds(self.clock.now()), .text(deviceID)])
            }
            for status in answer.tokens where status.deviceID == deviceID {
                try db.execute(
                    "UPDATE device_cards SET state = ? WHERE token_reference = ?",
                    [.text(status.state.rawValue), .text(status.tokenReference)])
            }
        }
        await pullNetworkNotifications()
        return LifecycleResult(
            deviceID: deviceID, action: action, cards: try await Self.cards(of: deviceID, store: store))
    }

    /// Reads the network's token-status notifications since the last one applied and queues each for its device
    /// (if registered here), updating the card's state. Best effort: without the network, what is queued is
    /// served and the next pull catches up. Two pulls at once apply each notification once (the feed position
    /// is compared and set in the transaction that applies it).
    func pullNetworkNotifications() async {
        let position: Int64
        do {
            position =
                try await store.read { db in
                    try db.queryFirst("SELECT last_sequence FROM network_feed WHERE id = 1", []) { try $0.int64(0) }
                } ?? 0
        } catch {
            return
        }
        guard
            // try?: best effort: without the network the next pull catches up.
            let feed: TokenRequestorAPI.NotificationFeed = try? await network.get(
                TokenRequestorAPI.Route.notifications(after: position)),
            let newest = feed.notifications.last?.sequence
        else { return }
        // try?: a failed write rolls the position back with the rest, so the next pull applies the same notifications.
        try? await store.write { db in
            let changed = try db.execute(
                """
                INSERT INTO network_feed (id, last_sequence) VALUES (1, ?)
                ON CONFLICT (id) DO UPDATE SET last_sequence = excluded.last_sequence
                WHERE network_feed.last_sequence = ?
                """, [.integer(newest), .integer(position)])
            guard changed == 1 else { return }  // another pull applied these
            for note in feed.notifications where note.event != .provisioned {
                guard
                    try db.queryFirst(
                        "SELECT 1 FROM devices WHERE device_id = ?", [.text(note.deviceID)], { _ in true })
                        != nil
                else { continue }
                try db.execute(
                    "UPDATE device_cards SET state = ? WHERE token_reference = ? AND device_id = ?",
                    [.text(note.state.rawValue), .text(note.tokenReference), .text(note.deviceID)])
                try db.execute(
                    "INSERT INTO device_notifications (device_id, token_reference, event, state) VALUES (?, ?, ?, ?)",
                    [
                        .text(note.deviceID), .text(note.tokenReference), .text(note.event.rawValue),
                        .text(note.state.rawValue),
                    ])
            }
        }
    }

    static func cards(of deviceID: String, store: Store) async throws -> [DeviceCard] {
        try await store.read { db in
            try db.query(
                """
                SELECT token_reference, network, type, suffix, description, state FROM device_cards
                WHERE device_id = ? ORDER BY added_at, token_reference
                """, [.text(deviceID)]
            ) { row in
                DeviceCard(
                    tokenReference: try row.string(0),
                    card: CardDisplay(
                        network: try row.string(1), type: try row.string(2), suffix: try row.string(3),
                        description: try row.string(4)),
                    state: try row.string(5))
            }
        }
    }

    /// Passes the token service's answer on as the wallet shows it, and remembers which device a session is for.
    static func relay(
        _ answer: TokenRequestorAPI.CheckCardAnswer, for deviceID: String, at now: Date, store: Store
    ) async throws -> CardCheckResult {
        if let sessionID = answer.sessionID {
            try await store.write { db in
                try db.execute(
                    "INSERT OR IGNORE INTO provisioning_sessions (session_id, device_id, created_at) VALUES (?, ?, ?)",
                    [.text(sessionID), .text(deviceID), .milliseconds(now)])
            }
        }
        switch answer.decision {
        case .approve(let profile):
            return CardCheckResult(
                outcome: .approved, sessionID: answer.sessionID, termsID: answer.termsID, card: display(profile))
        case .stepUp(let challenge, let profile):
            return CardCheckResult(
                outcome: .stepUp, sessionID: answer.sessionID, termsID: answer.termsID,
                stepUpMethod: challenge.method, stepUpDestination: challenge.destinationHint, card: display(profile))
        case .decline(let reason):
            return CardCheckResult(outcome: .declined, sessionID: nil, termsID: nil, declineReason: reason, card: nil)
        }
    }

    static func display(_ profile: TokenRequestorAPI.CardProfile) -> CardDisplay {
        CardDisplay(
            network: profile.network, type: profile.type, suffix: profile.suffix,
            description: "\(profile.issuerName) \(profile.productName)")
    }

    static func checkSession(_ sessionID: String, belongsTo deviceID: String, store: Store) async throws {
        let owner = try await store.read { db in
            try db.queryFirst(
                "SELECT device_id FROM provisioning_sessions WHERE session_id = ?", [.text(sessionID)]
            ) { try $0.string(0) }
        }
        guard owner == deviceID else {
            throw PayServerError(.notFound, "no provisioning session \(sessionID) for this device")
        }
    }

    /// Idempotency keys are the client's: 1 to 64 printable characters, never a card number's shape.
    static func checkIdempotencyKey(_ key: String) throws(PayServerError) {
        let bytes = Array(key.utf8)
        guard (1...64).contains(bytes.count),
            bytes.allSatisfy({ (0x21...0x7E).contains($0) && $0 != UInt8(ascii: "/") })
        else {
            throw PayServerError(.invalidRequest, "an idempotency key is 1 to 64 printable characters without /")
        }
        guard !containsCardNumberShape(key) else { throw PayServerError(.invalidRequest, cardNumberShapedKeyMessage) }
    }
}
