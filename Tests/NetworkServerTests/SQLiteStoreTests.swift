import Acquirer
import CardBasics
import Foundation
import Issuer
import NetworkAuthorizationAPI
import NetworkServer
import NetworkTestSupport
import OrchardCrypto
import OrchardStore
import Testing
import TokenService

/// A fresh directory under the system's temporary directory, removed when released.
final class TemporaryDirectory {
    let path: String

    init() throws {
        path = FileManager.default.temporaryDirectory.path + "/orchard-network-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// Every regular file in the directory and its size.
    func files() throws -> [(name: String, bytes: [UInt8])] {
        try FileManager.default.contentsOfDirectory(atPath: path).sorted().map { name in
            (name, Array(try Data(contentsOf: URL(fileURLWithPath: path + "/" + name))))
        }
    }
}

/// `value` with some top-level JSON fields replaced (records have no public memberwise initializers).
func modified<T: Codable>(_ value: T, _ changes: [String: String]) throws -> T {
    var object = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(value)) as? [String: Any])
    for (key, newValue) in changes { object[key] = newValue }
    return try JSONDecoder().decode(T.self, from: JSONSerialization.data(withJSONObject: object))
}

extension Array where Element == UInt8 {
    func contains(ascii text: String) -> Bool {
        let needle = Array(text.utf8)
        guard !needle.isEmpty, needle.count <= count else { return false }
        for start in 0...(count - needle.count) where self[start] == needle[0] {
            if Array(self[start..<(start + needle.count)]) == needle { return true }
        }
        return false
    }
}

@Suite("SQLite stores for the network's parties")
struct SQLiteStoreTests {
    @Test func vaultRoundTripsAndKeepsDPANsAndLookupsUnique() async throws {
        let directory = try TemporaryDirectory()
        let vault = try SQLiteTokenVaultStore(path: directory.path + "/network.sqlite")
        let h = try await NetworkHarness(vaultStore: vault)
        let phone = try h.makeDevice("phone-1")
        let watch = try h.makeDevice("watch-1", kind: "watch")
        let onPhone = try await h.provision("4111111111111111", on: phone)
        _ = try await h.provision("4111111111111111", on: watch)
        let token = try #require(try await vault.token(dpan: onPhone.data.dpan))
        #expect(token.tokenReference == onPhone.token.tokenReference && token.deviceID == "phone-1")
        #expect(try await vault.token(reference: token.tokenReference) == token)
        #expect(try await vault.tokens(deviceID: "phone-1").map(\.tokenReference) == [token.tokenReference])
        let card = try #require(try await vault.card(id: token.cardID))
        #expect(try await vault.card(panLookup: card.panLookup) == card)
        #expect(try await vault.tokens(cardID: card.cardID).count == 2)
        // A second token with the same DPAN, or a second card with the same lookup hash, is refused.
        let clone = try modified(token, ["tokenReference": "tok_clone", "deviceID": "x"])
        await #expect(throws: StoreError.self) { try await vault.saveToken(clone) }
        let cardClone = try modified(card, ["cardID": "card_clone"])
        await #expect(throws: StoreError.self) { try await vault.saveCard(cardClone) }
        // The whole flow works on it: authorization, ATC, lifecycle, FPAN update.
        #expect(try await h.authorize(onPhone, on: phone, amount: 100).responseCode == .approved)
        #expect(try await h.authorize(onPhone, on: phone, amount: 100, atc: 1).declineReason == .atcReplayed)
        try await h.tokenService.suspendDevice("phone-1", by: .cardholder)
        #expect(try await h.authorize(onPhone, on: phone, amount: 100).declineReason == .tokenSuspended)
        try await h.tokenService.resumeDevice("phone-1", by: .cardholder)
        try await h.issuer.reissueCard(
            pan: try PrimaryAccountNumber("4111111111111111"), newPAN: try PrimaryAccountNumber("4111111111111129"),
            newExpiry: try CardExpiry(year: 2035, month: 6))
        let afterReissue = try await h.authorize(onPhone, on: phone, amount: 100)
        #expect(afterReissue.responseCode == .approved && afterReissue.cardSuffix == "1129")
        #expect(try await vault.token(dpan: onPhone.data.dpan)?.cardID == token.cardID)
    }

    @Test("Expired provisioning sessions are purged on the clock's time; an unexpired one stays and still provisions")
    func expiredProvisioningSessionsArePurged() async throws {
        let directory = try TemporaryDirectory()
        let vault = try SQLiteTokenVaultStore(path: directory.path + "/network.sqlite")
        let h = try await NetworkHarness(vaultStore: vault)
        let phone = try h.makeDevice("phone-1")
        let old = try #require(try await h.checkCard("4111111111111111", on: phone).sessionID)
        h.clock.advance(by: 500)
        let young = try #require(try await h.checkCard("4111111111111111", on: phone).sessionID)
        #expect(try await h.tokenService.purgeExpiredSessions() == 0)
        // The default lifetime is 900 s: the first session is 901 s old, the second 401 s.
        h.clock.advance(by: 401)
        #expect(try await h.tokenService.purgeExpiredSessions() == 1)
        #expect(try await vault.session(id: old) == nil)
        #expect(try await vault.session(id: young) != nil)
        guard case .provisioned = try await h.link(young, on: phone) else {
            Issue.record("the unexpired session no longer provisions")
            return
        }
        // A row from before the expiry column (NULL) is from before a restart, so expired: it goes too.
        try await vault.store.write { db in
            try db.execute("UPDATE provisioning_sessions SET expires_at = NULL WHERE session_id = ?", [.text(young)])
        }
        #expect(try await h.tokenService.purgeExpiredSessions() == 1)
        #expect(try await vault.session(id: young) == nil)
    }

    @Test func recordsSurviveReopening() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/acquirer.sqlite"
        do {
            let store = try SQLiteAcquirerStore(path: path)
            try await store.saveMerchant(
                MerchantAccount(
                    merchantID: "m1", name: "Shop", categoryCode: "5814", countryCode: "840", terminalIDs: ["T1"]))
            await store.store.close()
        }
        let reopened = try SQLiteAcquirerStore(path: path)
        #expect(try await reopened.merchant(id: "m1")?.terminalIDs == ["T1"])
        #expect(try await reopened.merchant(id: "m2") == nil)
        #expect(try await reopened.authorization(idempotencyKey: "k") == nil)
    }

    @Test("The Apple merchant IDs an account charges for survive a restart; a file from before them is migrated")
    func appleMerchantIDsSurviveReopening() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/acquirer.sqlite"
        do {
            // A file as the acquirer left it before Apple merchant IDs (migrations 1 and 2), with a merchant.
            let old = try Store(
                path: path, options: StoreOptions(durability: .full),
                migrations: Array(SQLiteAcquirerStore.migrations.prefix(2)))
            await old.close()
            let store = try SQLiteAcquirerStore(path: path)
            try await store.saveMerchant(
                MerchantAccount(merchantID: "m1", name: "Shop", categoryCode: "5814", countryCode: "840"))
            try await store.saveAppleMerchantID("merchant.dev.shop", merchantID: "m1")
            // Again for the same account: no change; for another: refused, and the first keeps it.
            try await store.saveAppleMerchantID("merchant.dev.shop", merchantID: "m1")
            await #expect(throws: AcquirerError(.duplicate, "")) {
                try await store.saveAppleMerchantID("merchant.dev.shop", merchantID: "m2")
            }
            await store.store.close()
        }
        let reopened = try SQLiteAcquirerStore(path: path)
        #expect(try await reopened.merchantID(forAppleMerchantID: "merchant.dev.shop") == "m1")
        #expect(try await reopened.merchantID(forAppleMerchantID: "merchant.dev.other") == nil)
        #expect(try await reopened.merchant(id: "m1")?.name == "Shop")
        await reopened.store.close()
    }

    /// Case P1 at the library level: after a full run on SQLite files, a full FPAN is only in
    /// `issuer.sqlite` (and encrypted in `network.sqlite`), a full DPAN only in `network.sqlite`, no CVV in
    /// any file, and the acquirer's file holds masked numbers only. Every byte of every file (database,
    /// `-wal`, `-shm`) is scanned. The issuer's file holds no FPAN in clear either (S5).
    @Test("P1/S5: no FPAN in clear in any file, issuer.sqlite included; a DPAN only in network.sqlite; no CVV")
    func cardNumbersAtRestStayInTheirFiles() async throws {
        let directory = try TemporaryDirectory()
        let vault = try SQLiteTokenVaultStore(path: directory.path + "/network.sqlite")
        let issuerKey = try IssuerStorageKey.generate()
        let issuerStore = try await SQLiteIssuerStore.open(path: directory.path + "/issuer.sqlite", key: issuerKey)
        let acquirerStore = try SQLiteAcquirerStore(path: directory.path + "/acquirer.sqlite")
        let h = try await NetworkHarness(vaultStore: vault, issuerStore: issuerStore)
        let acquirer = Acquirer(acquirerID: "acq-1", store: acquirerStore, network: h.tokenService, clock: h.clock)
        try await acquirer.registerMerchant(
            MerchantAccount(
                merchantID: "m1", name: "Shop", categoryCode: "5814", countryCode: "840", terminalIDs: ["T1"]))
        let phone = try h.makeDevice("phone-1")
        let watch = try h.makeDevice("watch-1", kind: "watch")
        let fpans = ["4111111111111111", "5555555555554444", "4000056655665556"]
        var installed: [(InstalledCard, SimulatedDevice)] = []
        for pan in fpans {
            installed.append((try await h.provision(pan, on: phone), phone))
            installed.append((try await h.provision(pan, on: watch), watch))
        }
        let stepUp = try await h.checkCard("4000000000003220", on: phone)
        _ = try await h.tokenService.submitOneTimeCode(
            sessionID: try #require(stepUp.sessionID), deviceID: "phone-1", code: "123456")
        _ = try await h.checkCard("4000000000000002", on: phone)
        _ = try await h.checkCard("4111111111111111", on: phone, cvv: "000")
        for (index, (card, device)) in installed.enumerated() {
            let amount = try Money(minorUnits: 100 + Int64(index), currency: Currency("840"))
            let result = try await acquirer.authorize(
                AcquirerAuthorizationRequest(
                    origin: .terminal(terminalID: "T1", systemTraceAuditNumber: String(format: "%06d", index + 1)),
                    merchantID: "m1", pan: card.data.dpan, expiry: card.data.tokenExpiry, amount: amount,
                    channel: .contactless,
                    cryptogram: try await device.cryptogram(for: card, kind: .proximityARQC, amount: amount)))
            #expect(result.isApproved)
        }
        try await h.tokenService.suspendDevice("watch-1", by: .cardholder)
        await vault.store.close()
        await issuerStore.store.close()
        await acquirerStore.store.close()

        let allFPANs = fpans + ["4000000000003220", "4000000000000002"]
        let dpans = installed.map { $0.0.data.dpan.digits }
        let cvvs = try allFPANs.map { try h.cvv($0) }
        let files = try directory.files()
        #expect(files.contains { $0.name == "network.sqlite" } && files.contains { $0.name == "issuer.sqlite" })
        for file in files {
            // Not even the issuer's file holds one in clear: its cards are sealed, found by keyed hash.
            for pan in allFPANs {
                let found = file.bytes.contains(ascii: pan)
                #expect(!found, "FPAN ending \(pan.suffix(4)) in \(file.name)")
            }
            for dpan in dpans where !file.name.hasPrefix("network.sqlite") {
                let found = file.bytes.contains(ascii: dpan)
                #expect(!found, "DPAN ending \(dpan.suffix(4)) in \(file.name)")
            }
            // Records are JSON: a stored CVV would be a JSON string or number.
            for cvv in cvvs {
                let found =
                    file.bytes.contains(ascii: "\"\(cvv)\"") || file.bytes.contains(ascii: ":\(cvv),")
                    || file.bytes.contains(ascii: ":\(cvv)}")
                #expect(!found, "a CVV-shaped value in \(file.name)")
            }
            // A CVV field or column by name: a JSON key or string, or an SQL column (after a space, a parenthesis or a
            // comma). Not the three letters alone: sealed records are random bytes, which hold "cvv" or "CVV"
            // somewhere in a few percent of runs.
            for prefix in ["\"", " ", "(", ","] {
                for name in ["cvv", "CVV"] {
                    #expect(!file.bytes.contains(ascii: prefix + name), "\(prefix + name) in \(file.name)")
                }
            }
        }
        // The files do hold what they must: the issuer its cards, the network the DPANs, the acquirer masks.
        let issuerBytes = try #require(files.first { $0.name == "issuer.sqlite" }).bytes
        let networkBytes = files.filter { $0.name.hasPrefix("network.sqlite") }.flatMap(\.bytes)
        let acquirerBytes = files.filter { $0.name.hasPrefix("acquirer.sqlite") }.flatMap(\.bytes)
        #expect(!issuerBytes.isEmpty)
        let issuerAgain = try await SQLiteIssuerStore.open(path: directory.path + "/issuer.sqlite", key: issuerKey)
        #expect(try await issuerAgain.card(pan: try PrimaryAccountNumber("4111111111111111")) != nil)
        await issuerAgain.store.close()
        #expect(dpans.allSatisfy { networkBytes.contains(ascii: $0) })
        #expect(acquirerBytes.contains(ascii: installed[0].0.data.dpan.masked))
    }
}

/// The issuer keeps card numbers as the vault does.
@Suite("Issuer store: cards sealed, found by keyed hash")
struct IssuerSealedStoreTests {
    func card(_ pan: String) throws -> IssuedCard {
        IssuedCard(
            pan: try PrimaryAccountNumber(pan), expiry: try CardExpiry(year: 2034, month: 12), network: .visa,
            type: .credit, accountID: "acct-1", cardholderName: "Alice Doe", productName: "Orchard Visa",
            stepUpDestinationHint: "a***@example.com")
    }

    @Test("P1/S5: an issuer.sqlite with clear card numbers is sealed when it opens; another key is refused")
    func clearDeploymentIsMigratedAndAnotherKeyRefused() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/issuer.sqlite"
        // A deployment made before the sealing: migration 1 only, the card keyed by its number in clear.
        let old = try Store(
            path: path, options: StoreOptions(durability: .full, secureDelete: true),
            migrations: [SQLiteIssuerStore.migrations[0]])
        let clear = try card("4111111111111111")
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let record = Array(try encoder.encode(clear))
        _ = try await old.write { database in
            try database.execute(
                "INSERT INTO cards (pan, record) VALUES (?, ?)", [.text("4111111111111111"), .blob(record)])
        }
        await old.close()
        #expect(try directory.files().contains { $0.bytes.contains(ascii: "4111111111111111") })

        let key = try IssuerStorageKey.generate()
        let store = try await SQLiteIssuerStore.open(path: path, key: key)
        // Gone at once, from the database file and its log, while the store is open.
        for file in try directory.files() {
            let found = file.bytes.contains(ascii: "4111111111111111")
            #expect(!found, "open: \(file.name)")
        }
        #expect(try await store.card(pan: clear.pan) == clear)
        try await store.saveCard(try card("4000056655665556"))
        #expect(try await store.allCards().map(\.pan.digits) == ["4000056655665556", "4111111111111111"])
        let columns = try await store.store.read { database in
            try database.query("SELECT name FROM pragma_table_info('cards')", []) { row in try row.string(0) }
        }
        #expect(columns == ["pan_lookup", "sealed_record"])
        await store.store.close()
        for file in try directory.files() {
            let found = file.bytes.contains(ascii: "4111111111111111") || file.bytes.contains(ascii: "4000056655665556")
            #expect(!found, "\(file.name)")
        }

        // Another key: refused, not misread.
        await #expect(throws: (any Error).self) {
            try await SQLiteIssuerStore.open(path: path, key: try IssuerStorageKey.generate())
        }
        let again = try await SQLiteIssuerStore.open(path: path, key: key)
        #expect(try await again.card(pan: clear.pan)?.cardholderName == "Alice Doe")
        await again.store.close()
    }
}
