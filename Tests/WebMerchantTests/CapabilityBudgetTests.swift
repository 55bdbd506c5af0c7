import Foundation
import OrchardCrypto
import OrchardStore
import PayServer
import PaymentToken
import Testing
import WebMerchantAPI

/// What junk capability questions (pairs that are not validated, from any address) can cost the Pay server:
/// never the budget or the cache validated pairs are answered from.
@Suite("Web merchants: capability statements under junk")
struct CapabilityBudgetTests {
    static func ask(
        _ statements: CapabilityStatements, _ merchant: String, _ domain: String, from client: String
    ) async throws -> CapabilityStatement? {
        do {
            return try await statements.statement(merchantIdentifier: merchant, domain: domain, client: client)
        } catch is CapabilityStatements.RateLimited {
            return nil
        }
    }

    @Test("W7: a client's budget key is its network: loopback one, IPv4 by /24, IPv6 by /64")
    func clientKeys() {
        for loopback in ["127.0.0.1", "127.9.8.7", "::1", "::ffff:127.0.0.2"] {
            #expect(CapabilityStatements.clientKey(loopback) == "loopback", "\(loopback)")
        }
        #expect(CapabilityStatements.clientKey("198.51.100.7") == "v4:198.51.100")
        #expect(CapabilityStatements.clientKey("::ffff:198.51.100.9") == "v4:198.51.100")
        #expect(CapabilityStatements.clientKey("198.51.101.7") == "v4:198.51.101")
        #expect(CapabilityStatements.clientKey("2001:db8:1:2:3:4:5:6") == "v6:20010DB800010002")
        #expect(CapabilityStatements.clientKey("2001:db8:1:2::9") == "v6:20010DB800010002")
        #expect(CapabilityStatements.clientKey("2001:db8:1:3::1") == "v6:20010DB800010003")
        for other in ["", "garbage", "1.2.3", "198.51.100.7:443"] {
            #expect(CapabilityStatements.clientKey(other) == "other", "\(other)")
        }
    }

    @Test("W7: junk from rotating addresses never draws on the shared budget; a client network and all have their own")
    func junkBudgets() async throws {
        let fixture = try await SessionFixture()
        defer { Task { await fixture.close() } }
        var budgets = CapabilityStatements.Budgets()
        (budgets.rate, budgets.burst) = (0.001, 1)
        (budgets.clientRate, budgets.clientBurst) = (0.001, 3)
        (budgets.negativeRate, budgets.negativeBurst) = (0.001, 8)
        let statements = try fixture.capabilityStatements(budgets: budgets)
        // 200 junk questions from loopback, each from another address of 127/8: one client, 3 answered.
        var answered: [CapabilityStatement] = []
        for index in 0..<200 {
            let client = "127.\(index % 7).\(index / 7).\(index % 250 + 1)"
            if let answer = try await Self.ask(statements, "merchant.junk.\(index)", "junk\(index).test", from: client)
            {
                answered.append(answer)
            }
        }
        #expect(answered.count == 3 && answered.allSatisfy { !$0.validated })
        // From 50 other networks: each has a budget of its own, but all of them together only the ceiling's 5 left.
        var elsewhere = 0
        for index in 0..<50
        where try await Self.ask(statements, "m.x\(index)", "x.test", from: "198.51.\(index).1") != nil {
            elsewhere += 1
        }
        #expect(elsewhere == 5)
        // A junk question asked again is answered from the negative cache, whatever the budgets.
        #expect(try await Self.ask(statements, "merchant.junk.0", "junk0.test", from: "127.0.0.1") == answered[0])
        // The validated pair, asked from the exhausted loopback: signed, from the shared budget junk never drew on.
        let real = try #require(
            try await Self.ask(statements, SessionFixture.merchant, SessionFixture.domain, from: "127.0.0.1"))
        let verifier = try CapabilityStatements.verifier(root: fixture.pki.root, clock: fixture.clock)
        #expect(
            real.validated
                && CapabilityStatements.problem(with: real, verifier: verifier, now: fixture.clock.now()) == nil)
    }

    @Test("W7: the caches are LRU and apart: a flood of junk evicts no validated statement")
    func cachesApart() async throws {
        let fixture = try await SessionFixture()
        defer { Task { await fixture.close() } }
        let expires = fixture.clock.now().addingTimeInterval(86_400)
        try await fixture.store.write { db in
            _ = try db.execute(
                """
                INSERT INTO merchant_domains
                (merchant_identifier, domain, registered_at, verified_at, expires_at, state)
                VALUES (?, 'third.web.test', 0, 0, ?, 'verified')
                """, [.text(SessionFixture.merchant), .milliseconds(expires)])
        }
        var budgets = CapabilityStatements.Budgets()
        (budgets.rate, budgets.burst) = (0.001, 3)
        (budgets.clientRate, budgets.clientBurst) = (1, 1_000)
        (budgets.negativeRate, budgets.negativeBurst) = (1, 1_000)
        (budgets.positiveCapacity, budgets.negativeCapacity) = (2, 8)
        let statements = try fixture.capabilityStatements(budgets: budgets)
        let client = "127.0.0.1"
        let hot = try #require(
            try await Self.ask(statements, SessionFixture.merchant, SessionFixture.domain, from: client))
        // 300 junk questions, each answered: the negative cache keeps only its last 8.
        var junk: [CapabilityStatement] = []
        for index in 0..<300 {
            junk.append(try #require(try await Self.ask(statements, "merchant.junk.\(index)", "j.test", from: client)))
        }
        #expect(try await Self.ask(statements, "merchant.junk.299", "j.test", from: client) == junk[299])
        fixture.clock.advance(by: 1)
        #expect(try await Self.ask(statements, "merchant.junk.0", "j.test", from: client)?.issuedAt != junk[0].issuedAt)
        // The hot validated statement is still kept.
        #expect(try await Self.ask(statements, SessionFixture.merchant, SessionFixture.domain, from: client) == hot)
        // Among validated pairs, the least recently used goes: B, then A asked again, then C evicts B.
        let second = try await Self.ask(statements, SessionFixture.other, "other.web.test", from: client)
        #expect(second?.validated == true)
        #expect(try await Self.ask(statements, SessionFixture.merchant, SessionFixture.domain, from: client) == hot)
        let third = try await Self.ask(statements, SessionFixture.merchant, "third.web.test", from: client)
        #expect(third?.validated == true)
        #expect(try await Self.ask(statements, SessionFixture.merchant, SessionFixture.domain, from: client) == hot)
        #expect(try await Self.ask(statements, SessionFixture.merchant, "third.web.test", from: client) == third)
        // B was evicted, and the shared budget (3) is spent: it would need a new signature.
        #expect(try await Self.ask(statements, SessionFixture.other, "other.web.test", from: client) == nil)
    }
}
