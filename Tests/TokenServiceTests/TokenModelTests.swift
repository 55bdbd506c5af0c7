import CardBasics
import Foundation
import Issuer
import NetworkTestSupport
import OrchardCrypto
import Testing
import TokenService

@Suite("ATC window")
struct ATCWindowTests {
    let policy = ATCPolicy(lookBehind: 8, maxForwardJump: 100)

    @Test func sequentialOutOfOrderReplayStaleAndJump() {
        var window = ATCWindow()
        #expect(window.check(101, policy: policy) == .tooFarAhead)
        #expect(window.check(1, policy: policy) == .fresh)
        window.record(1)
        #expect(window.check(1, policy: policy) == .replayed)
        window.record(2)
        window.record(5)
        // 3 and 4 were skipped (cryptograms still in flight): each is accepted once.
        #expect(window.check(4, policy: policy) == .fresh)
        window.record(4)
        #expect(window.check(4, policy: policy) == .replayed)
        #expect(window.check(3, policy: policy) == .fresh)
        #expect(window.check(2, policy: policy) == .replayed)
        window.record(20)
        // 12 is exactly the look-behind distance (8) below 20: stale; 13 is inside.
        #expect(window.check(12, policy: policy) == .stale)
        #expect(window.check(13, policy: policy) == .fresh)
        #expect(window.check(120, policy: policy) == .fresh)
        #expect(window.check(121, policy: policy) == .tooFarAhead)
        window.record(120)
        #expect(window.check(20, policy: policy) == .stale)
        #expect(window.highest == 120 && window.used == 1)
    }

    @Test func policyIsClamped() {
        #expect(ATCPolicy(lookBehind: 500, maxForwardJump: 0).lookBehind == 64)
        #expect(ATCPolicy(lookBehind: 0, maxForwardJump: 0).maxForwardJump == 1)
        var window = ATCWindow()
        window.record(10)
        window.record(73)
        #expect(window.check(10, policy: ATCPolicy(lookBehind: 64)) == .replayed)
        #expect(window.check(9, policy: ATCPolicy(lookBehind: 64)) == .stale)
    }
}

@Suite("Token ranges and domain controls")
struct TokenRangeTests {
    @Test func dpansAreLuhnValidInTheRange() throws {
        let hsm = try SoftwareHSM(localMasterKey: SymmetricKey(bitCount: 256), verifiers: [])
        let range = try TokenRange(
            rangeID: "r", issuerID: "i", network: .visa, prefix: "489537",
            proximityKey: try hsm.generateKey(usage: .proximityIssuerMasterKey, id: "a"),
            remoteKey: try hsm.generateKey(usage: .remoteIssuerMasterKey, id: "b"))
        let random = InsecureDeterministicRandom(seed: [9])
        var seen: Set<String> = []
        for _ in 0..<200 {
            let dpan = try #require(range.drawDPAN(using: random))
            #expect(dpan.digits.count == 16 && dpan.digits.hasPrefix("489537") && range.contains(dpan))
            seen.insert(dpan.digits)
        }
        #expect(seen.count == 200)
        #expect(!range.contains(try PrimaryAccountNumber("4111111111111111")))
        // Ranges must carry keys of the right usages and sensible prefixes.
        #expect(throws: TokenServiceError(.keyUsageViolation, "")) {
            try TokenRange(
                rangeID: "r", issuerID: "i", network: .visa, prefix: "489537", proximityKey: range.remoteKey,
                remoteKey: range.proximityKey)
        }
        #expect(throws: TokenServiceError(.configuration, "")) {
            try TokenRange(
                rangeID: "r", issuerID: "i", network: .visa, prefix: "48953", proximityKey: range.proximityKey,
                remoteKey: range.remoteKey)
        }
    }

    @Test func aTokenRangeMayNotOverlapRealCardsOrAnotherRange() async throws {
        let hsm = try SoftwareHSM(localMasterKey: SymmetricKey(bitCount: 256), verifiers: [])
        func range(_ id: String, _ prefix: String) throws -> TokenRange {
            try TokenRange(
                rangeID: id, issuerID: TestCards.issuerID, network: .visa, prefix: prefix,
                proximityKey: try hsm.generateKey(usage: .proximityIssuerMasterKey, id: id + "-a"),
                remoteKey: try hsm.generateKey(usage: .remoteIssuerMasterKey, id: id + "-b"))
        }
        let route = IssuerRoute(
            issuerID: TestCards.issuerID, cardBINPrefixes: TestCards.cardBINPrefixes,
            host: UnreachableIssuer(issuerID: TestCards.issuerID))
        let keys = try TokenServiceKeys.generate(in: hsm)
        func make(_ ranges: [TokenRange], issuers: [IssuerRoute]) throws {
            _ = try TokenService(
                keyStore: hsm, keys: keys, ranges: ranges, issuers: issuers, vault: InMemoryTokenVaultStore(),
                deviceKeys: TestDoubleDeviceKeyVerifier(), notifier: InMemoryNotificationOutbox())
        }
        try make([try range("ok", "489537")], issuers: [route])
        // 4111110 lies inside the real BIN 411111.
        #expect(throws: TokenServiceError(.configuration, "")) {
            try make([try range("bad", "4111110")], issuers: [route])
        }
        // 400000 is itself a real BIN.
        #expect(throws: TokenServiceError(.configuration, "")) {
            try make([try range("bad", "400000")], issuers: [route])
        }
        #expect(throws: TokenServiceError(.configuration, "")) {
            try make([try range("a", "489537"), try range("b", "4895371")], issuers: [route])
        }
        #expect(throws: TokenServiceError(.configuration, "")) { try make([try range("ok", "489537")], issuers: []) }
        #expect(throws: TokenServiceError(.configuration, "")) { try make([], issuers: [route, route]) }
        let swapped = TokenServiceKeys(
            vaultKey: keys.lookupKey, lookupKey: keys.vaultKey, provisioningKey: keys.provisioningKey,
            personalisationSigningKey: keys.personalisationSigningKey)
        #expect(throws: TokenServiceError(.keyUsageViolation, "")) {
            _ = try TokenService(
                keyStore: hsm, keys: swapped, ranges: [], issuers: [route], vault: InMemoryTokenVaultStore(),
                deviceKeys: TestDoubleDeviceKeyVerifier(), notifier: InMemoryNotificationOutbox())
        }
    }

    @Test func domainControls() {
        let inApp: DomainControls = [.inApp]
        #expect(inApp.allows(.inApp) && !inApp.allows(.contactless) && !inApp.allows(.web))
        #expect(DomainControls.all.allows(.contactless) && DomainControls.all.allows(.web))
        #expect(!DomainControls.all.allows(.magneticStripe) && !DomainControls.all.allows(.manualEntry))
    }
}
