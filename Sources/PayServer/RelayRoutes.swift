import Foundation
import OrchardCrypto
import OrchardHTTP
import OrchardStore
import RelayAPI
import Synchronization

/// The relay between the devices of one account (the seeds' IDS): the directory of the devices' relay keys and a
/// durable queue of frames per recipient device, delivered by long poll.
///
/// The Pay server reads only a frame's routing header (sender, recipient, sequence): the body is encrypted by the
/// sending device to the recipient device's key, which only that device's Secure Enclave holds, and signed by the
/// sender's Secure Enclave. The server checks that the header's sender is the calling device (its certificate)
/// and that the recipient is a device of the same account; it cannot open, forge or silently alter a frame.
extension PayServer {
    static let relayMigrationName = "relay keys and queued frames"
    static let relayMigrationSQL = """
        CREATE TABLE relay_keys (
            device_id TEXT PRIMARY KEY REFERENCES devices(device_id),
            encryption_key BLOB NOT NULL,
            signing_key BLOB NOT NULL,
            published_at INTEGER NOT NULL
        ) STRICT;
        CREATE TABLE relay_queue (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            recipient TEXT NOT NULL REFERENCES devices(device_id),
            sender TEXT NOT NULL,
            frame BLOB NOT NULL,
            expires_at INTEGER NOT NULL
        ) STRICT;
        CREATE INDEX relay_queue_by_recipient ON relay_queue(recipient, id);
        CREATE TABLE relay_vouches (
            device_id TEXT NOT NULL REFERENCES devices(device_id),
            voucher TEXT NOT NULL REFERENCES devices(device_id),
            signature BLOB NOT NULL,
            PRIMARY KEY (device_id, voucher)
        ) STRICT;
        CREATE TABLE relay_account_keys (
            account TEXT NOT NULL REFERENCES accounts(name),
            generation INTEGER NOT NULL,
            device_id TEXT NOT NULL REFERENCES devices(device_id),
            frame BLOB NOT NULL,
            PRIMARY KEY (account, generation, device_id)
        ) STRICT;
        CREATE TABLE relay_synced_addresses (
            account TEXT PRIMARY KEY REFERENCES accounts(name),
            generation INTEGER NOT NULL,
            ciphertext BLOB NOT NULL
        ) STRICT;
        """

    func installRelayRoutes(into router: inout Router) {
        let devices = self.devices
        let store = self.store
        let clock = self.clock
        let mailboxes = self.relayMailboxes

        router.add(RelayAPI.Declared.publishKeys) { (body: RelayKeyPublication, request) in
            let device = try await devices.registeredDevice(request)
            guard let encryption = Data(base64Encoded: body.encryptionKey).map(Array.init),
                // try?: a key that does not parse is the refusal below.
                (try? P256.KeyAgreement.PublicKey(x963Representation: encryption)) != nil,
                let signing = Data(base64Encoded: body.signingKey).map(Array.init),
                // try?: a key that does not parse is the refusal below.
                (try? P256.Signing.PublicKey(x963Representation: signing)) != nil
            else {
                throw PayServerError(
                    .invalidRequest, "encryptionKey and signingKey are P-256 public keys (X9.63, base64)")
            }
            let now = clock.now()
            try await store.write { db in
                let existing = try db.queryFirst(
                    "SELECT encryption_key, signing_key FROM relay_keys WHERE device_id = ?", [.text(device.deviceID)]
                ) { row in (try row.blob(0), try row.blob(1)) }
                if let existing {
                    guard existing.0 == encryption, existing.1 == signing else {
                        throw PayServerError(
                            .deviceMismatch,
                            "device \(device.deviceID) published other relay keys; a device keeps its relay keys")
                    }
                    return
                }
                try db.execute(
                    "INSERT INTO relay_keys (device_id, encryption_key, signing_key, published_at) VALUES (?, ?, ?, ?)",
                    [.text(device.deviceID), .blob(encryption), .blob(signing), .milliseconds(now)])
            }
            return RelayDirectoryEntry(
                deviceID: device.deviceID, kind: device.kind, encryptionKey: body.encryptionKey,
                signingKey: body.signingKey)
        }

        router.add(RelayAPI.Declared.directory) { request in
            let device = try await devices.registeredDevice(request)
            let entries = try await store.read { db in
                let vouches = try db.query(
                    """
                    SELECT v.device_id, v.voucher, v.signature FROM relay_vouches v
                    JOIN devices d ON d.device_id = v.device_id WHERE d.account = ? ORDER BY v.voucher
                    """, [.text(device.account)]
                ) { row in
                    (
                        try row.string(0),
                        RelayVouchRecord(
                            voucher: try row.string(1), signature: Data(try row.blob(2)).base64EncodedString())
                    )
                }
                return try db.query(
                    """
                    SELECT d.device_id, d.kind, k.encryption_key, k.signing_key
                    FROM devices d JOIN relay_keys k ON k.device_id = d.device_id
                    WHERE d.account = ? AND d.erased_at IS NULL ORDER BY d.device_id
                    """, [.text(device.account)]
                ) { row in
                    let deviceID = try row.string(0)
                    return RelayDirectoryEntry(
                        deviceID: deviceID, kind: try row.string(1),
                        encryptionKey: Data(try row.blob(2)).base64EncodedString(),
                        signingKey: Data(try row.blob(3)).base64EncodedString(),
                        vouches: vouches.filter { $0.0 == deviceID }.map(\.1))
                }
            }
            return try HTTPResponse.json(RelayDirectory(account: device.account, devices: entries))
        }

        router.add(RelayAPI.Declared.vouch) { (body: RelayVouchRequest, request) in
            let voucher = try await devices.registeredDevice(request)
            guard let signature = Data(base64Encoded: body.signature).map(Array.init),
                // try?: a signature that is not DER is the refusal below.
                let parsed = try? P256.Signing.ECDSASignature(derRepresentation: signature)
            else { throw PayServerError(.invalidRequest, "signature is a base64 DER ECDSA signature") }
            try await store.write { db in
                let keys = try db.query(
                    """
                    SELECT d.device_id, d.account, k.encryption_key, k.signing_key
                    FROM devices d JOIN relay_keys k ON k.device_id = d.device_id
                    WHERE d.device_id IN (?, ?) AND d.erased_at IS NULL
                    """, [.text(voucher.deviceID), .text(body.device)]
                ) { row in (try row.string(0), try row.string(1), try row.blob(2), try row.blob(3)) }
                guard let mine = keys.first(where: { $0.0 == voucher.deviceID }),
                    let theirs = keys.first(where: { $0.0 == body.device }), theirs.1 == voucher.account
                else {
                    throw PayServerError(
                        .notFound, "both devices must be of this account with published relay keys")
                }
                // Junk is refused here; the devices check every vouch themselves.
                let content = RelayVouch.signedContent(
                    account: voucher.account, voucher: voucher.deviceID, device: body.device,
                    encryptionKey: theirs.2, signingKey: theirs.3)
                // try?: a stored key that does not parse verifies nothing (the refusal below).
                guard let key = try? P256.Signing.PublicKey(x963Representation: mine.3),
                    key.isValidSignature(parsed, for: content)
                else {
                    throw PayServerError(
                        .invalidRequest, "the signature is not this device's vouch for \(body.device)'s relay keys")
                }
                try db.execute(
                    """
                    INSERT INTO relay_vouches (device_id, voucher, signature) VALUES (?, ?, ?)
                    ON CONFLICT (device_id, voucher) DO UPDATE SET signature = excluded.signature
                    """, [.text(body.device), .text(voucher.deviceID), .blob(signature)])
            }
            return RelayVouchRecord(voucher: voucher.deviceID, signature: body.signature)
        }

        router.add(RelayAPI.Declared.send) { (body: RelaySendRequest, request) in
            let device = try await devices.registeredDevice(request)
            guard let bytes = Data(base64Encoded: body.frame).map(Array.init) else {
                throw PayServerError(.invalidRequest, "frame is a base64 relay frame")
            }
            guard bytes.count <= RelayAPI.maximumFrameByteCount else {
                throw PayServerError(
                    .invalidRequest, "a relay frame is at most \(RelayAPI.maximumFrameByteCount) bytes")
            }
            let header: RelayFrame.Header
            do throws(RelayFrame.FormatError) {
                header = try RelayFrame(parsing: bytes).header
            } catch {
                throw PayServerError(.invalidRequest, "the relay frame does not parse: \(error.message)")
            }
            guard header.sender == device.deviceID else {
                throw PayServerError(.notPermitted, "a device sends relay frames only as itself")
            }
            let now = clock.now()
            let expiresAt = now.addingTimeInterval(TimeInterval(RelayAPI.frameLifetimeSeconds))
            let id = try await store.write { db in
                let recipient = try db.queryFirst(
                    """
                    SELECT d.account FROM devices d JOIN relay_keys k ON k.device_id = d.device_id
                    WHERE d.device_id = ? AND d.erased_at IS NULL
                    """, [.text(header.recipient)]
                ) { row in try row.string(0) }
                guard recipient == device.account else {
                    throw PayServerError(
                        .notFound, "the recipient is not a device of this account with published relay keys")
                }
                try db.execute("DELETE FROM relay_queue WHERE expires_at <= ?", [.milliseconds(now)])
                // RETURNING rather than lastInsertRowID: portable to PostgreSQL.
                return try db.queryFirst(
                    "INSERT INTO relay_queue (recipient, sender, frame, expires_at) VALUES (?, ?, ?, ?) RETURNING id",
                    [.text(header.recipient), .text(header.sender), .blob(bytes), .milliseconds(expiresAt)]
                ) { row in try row.int64(0) } ?? 0
            }
            mailboxes.signal(header.recipient)
            return RelaySendResult(id: id)
        }

        router.add(RelayAPI.Declared.receive) { request in
            let device = try await devices.registeredDevice(request)
            guard let after = Int64(request.queryValue("after") ?? "0"), after >= 0 else {
                throw PayServerError(.invalidRequest, "after is a queue position (0 or more)")
            }
            guard let wait = Int(request.queryValue("wait") ?? "0"), (0...RelayAPI.maximumWaitSeconds).contains(wait)
            else {
                throw PayServerError(
                    .invalidRequest, "wait is 0 to \(RelayAPI.maximumWaitSeconds) seconds")
            }
            let deviceID = device.deviceID
            let seen = mailboxes.generation(deviceID)
            let pending = try await Self.relayPending(for: deviceID, after: after, store: store, now: clock.now())
            if !pending.isEmpty || wait == 0 { return try HTTPResponse.json(RelayInbox(messages: pending)) }
            await mailboxes.wait(for: deviceID, since: seen, seconds: wait)
            return try HTTPResponse.json(
                RelayInbox(
                    messages: try await Self.relayPending(for: deviceID, after: after, store: store, now: clock.now())))
        }
    }

    /// Address sync: the account key's generations, wrapped per device, and the account's address record, all
    /// ciphertext the Pay server cannot open.
    func installAddressSyncRoutes(into router: inout Router) {
        let devices = self.devices
        let store = self.store

        router.add(RelayAPI.Declared.uploadAccountKey) { (body: AccountKeyUpload, request) in
            let device = try await devices.registeredDevice(request)
            var wraps: [(String, [UInt8])] = []
            for wrap in body.wrapped {
                guard let bytes = Data(base64Encoded: wrap.frame).map(Array.init),
                    // try?: a frame that does not parse is the refusal below.
                    let header = try? RelayFrame(parsing: bytes).header, header.sender == device.deviceID,
                    header.recipient == wrap.device, header.sequence == UInt64(max(body.generation, 0))
                else {
                    throw PayServerError(
                        .invalidRequest,
                        "each wrap is a relay frame from this device to its device, with the generation as sequence")
                }
                wraps.append((wrap.device, bytes))
            }
            guard wraps.contains(where: { $0.0 == device.deviceID }) else {
                throw PayServerError(.invalidRequest, "the uploading device wraps the key to itself too")
            }
            let generation = body.generation
            try await store.write { [wraps] db in
                let current =
                    try db.queryFirst(
                        "SELECT MAX(generation) FROM relay_account_keys WHERE account = ?", [.text(device.account)]
                    ) { row in try row.optionalInt64(0) } ?? nil
                guard generation == (current ?? 0) + 1 else {
                    throw PayServerError(
                        .invalidRequest, "the next account key generation is \((current ?? 0) + 1)")
                }
                for (recipient, frame) in wraps {
                    let account = try db.queryFirst(
                        """
                        SELECT d.account FROM devices d JOIN relay_keys k ON k.device_id = d.device_id
                        WHERE d.device_id = ? AND d.erased_at IS NULL
                        """, [.text(recipient)]
                    ) { row in try row.string(0) }
                    guard account == device.account else {
                        throw PayServerError(.notFound, "\(recipient) is not a device of this account with relay keys")
                    }
                    try db.execute(
                        "INSERT INTO relay_account_keys (account, generation, device_id, frame) VALUES (?, ?, ?, ?)",
                        [.text(device.account), .integer(generation), .text(recipient), .blob(frame)])
                }
            }
            return AccountKeyGeneration(generation: generation)
        }

        router.add(RelayAPI.Declared.accountKey) { request in
            let device = try await devices.registeredDevice(request)
            let state = try await store.read { db in
                let latest =
                    try db.queryFirst(
                        "SELECT MAX(generation) FROM relay_account_keys WHERE account = ?", [.text(device.account)]
                    ) { row in try row.optionalInt64(0) } ?? nil
                guard let latest else { return AccountKeyState(generation: 0, wrapped: nil) }
                let frame = try db.queryFirst(
                    "SELECT frame FROM relay_account_keys WHERE account = ? AND device_id = ? AND generation = ?",
                    [.text(device.account), .text(device.deviceID), .integer(latest)]
                ) { row in try row.blob(0) }
                let holders = try db.query(
                    """
                    SELECT device_id FROM relay_account_keys WHERE account = ? AND generation = ? ORDER BY device_id
                    """, [.text(device.account), .integer(latest)]
                ) { row in try row.string(0) }
                return AccountKeyState(
                    generation: latest,
                    wrapped: frame.map {
                        WrappedAccountKey(
                            generation: latest, device: device.deviceID, frame: Data($0).base64EncodedString())
                    }, holders: holders)
            }
            return try HTTPResponse.json(state)
        }

        router.add(RelayAPI.Declared.uploadAddresses) { (body: SyncedRecord, request) in
            let device = try await devices.registeredDevice(request)
            guard let ciphertext = Data(base64Encoded: body.ciphertext).map(Array.init),
                ciphertext.count >= 28, ciphertext.count <= RelayAPI.maximumFrameByteCount
            else { throw PayServerError(.invalidRequest, "ciphertext is base64 IV ‖ ciphertext ‖ tag, at most 64 KiB") }
            let generation = body.generation
            try await store.write { db in
                // Only a device that holds the latest key (it is wrapped to it) writes under it.
                let holds = try db.queryFirst(
                    """
                    SELECT 1 FROM relay_account_keys WHERE account = ? AND device_id = ? AND generation = ?
                        AND generation = (SELECT MAX(generation) FROM relay_account_keys WHERE account = ?)
                    """,
                    [.text(device.account), .text(device.deviceID), .integer(generation), .text(device.account)]
                ) { _ in true }
                guard holds == true else {
                    throw PayServerError(
                        .invalidRequest, "addresses are written under the latest account key, wrapped to this device")
                }
                try db.execute(
                    """
                    INSERT INTO relay_synced_addresses (account, generation, ciphertext) VALUES (?, ?, ?)
                    ON CONFLICT (account) DO UPDATE SET generation = excluded.generation, ciphertext = excluded.ciphertext
                    """, [.text(device.account), .integer(generation), .blob(ciphertext)])
            }
            return AccountKeyGeneration(generation: generation)
        }

        router.add(RelayAPI.Declared.addresses) { request in
            let device = try await devices.registeredDevice(request)
            let record = try await store.read { db in
                try db.queryFirst(
                    "SELECT generation, ciphertext FROM relay_synced_addresses WHERE account = ?",
                    [.text(device.account)]
                ) { row in
                    SyncedRecord(generation: try row.int64(0), ciphertext: Data(try row.blob(1)).base64EncodedString())
                }
            }
            guard let record else { throw PayServerError(.notFound, "this account has no synced addresses yet") }
            return try HTTPResponse.json(record)
        }
    }

    /// Deletes the frames up to `after` (acknowledged) and the expired ones, and returns the rest for `deviceID`.
    static func relayPending(
        for deviceID: String, after: Int64, store: Store, now: Date
    ) async throws -> [RelayDelivery] {
        try await store.write { db in
            try db.execute(
                "DELETE FROM relay_queue WHERE recipient = ? AND (id <= ? OR expires_at <= ?)",
                [.text(deviceID), .integer(after), .milliseconds(now)])
            return try db.query(
                "SELECT id, frame FROM relay_queue WHERE recipient = ? ORDER BY id LIMIT ?",
                [.text(deviceID), .integer(Int64(RelayAPI.maximumFramesPerReceive))]
            ) { row in RelayDelivery(id: try row.int64(0), frame: Data(try row.blob(1)).base64EncodedString()) }
        }
    }
}

/// The devices waiting in a long poll, woken when a frame is queued for them. Each device has a generation that
/// every queued frame advances: a receive that read the generation before it found the queue empty returns at
/// once if a frame arrived in between, so none waits past a frame queued for it.
final class RelayMailboxes: Sendable {
    private struct State {
        var generations: [String: UInt64] = [:]
        var waiters: [String: [UInt64: CheckedContinuation<Void, Never>]] = [:]
        var nextWaiter: UInt64 = 0
    }
    private let state = Mutex(State())

    func generation(_ deviceID: String) -> UInt64 { state.withLock { $0.generations[deviceID] ?? 0 } }

    /// Wakes every receive of `deviceID`.
    func signal(_ deviceID: String) {
        let woken = state.withLock { state in
            state.generations[deviceID, default: 0] &+= 1
            return state.waiters.removeValue(forKey: deviceID).map { Array($0.values) } ?? []
        }
        for continuation in woken { continuation.resume() }
    }

    /// Returns when a frame is queued for `deviceID` after generation `since`, or after `seconds`.
    func wait(for deviceID: String, since: UInt64, seconds: Int) async {
        let id = state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        let timer = Task { [self] in
            // try?: a cancelled timer (the waiter was answered) resumes nobody new.
            try? await Task.sleep(for: .seconds(seconds))
            resume(deviceID, id)
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state in
                    guard (state.generations[deviceID] ?? 0) == since else { return true }
                    state.waiters[deviceID, default: [:]][id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            resume(deviceID, id)
        }
        timer.cancel()
    }

    private func resume(_ deviceID: String, _ id: UInt64) {
        let continuation = state.withLock { state in
            let continuation = state.waiters[deviceID]?.removeValue(forKey: id)
            if state.waiters[deviceID]?.isEmpty == true { state.waiters[deviceID] = nil }
            return continuation
        }
        continuation?.resume()
    }
}
