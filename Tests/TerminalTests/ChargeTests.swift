import CardBasics
import EMV
import Foundation
import NFCLink
import OrchardCrypto
import OrchardLogging
import Terminal
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The terminal's charge against a card behind a real antenna in this process, and a scripted acquirer.
@Suite("Charges")
struct ChargeTests {
    @Test("V2: Approved: the ARQC verifies; STAN and terminal ID are the key; the journal and log hold the DPAN masked")
    func approved() async throws {
        let directory = try TemporaryDirectory()
        let target = try CardTarget()
        let antenna = try NFCAntenna(path: directory.antenna, kind: .phone, target: target)
        defer { antenna.stop() }
        let acquirer = TestAcquirer()
        let store: any TerminalStore = InMemoryTerminalStore()
        let log = InMemoryLogSink()
        let terminal = try await makeTerminal(gateway: acquirer, store: store, log: log)

        let result = try await terminal.charge(try usd("12.34"), antenna: directory.antenna)
        #expect(result.isApproved, "\(result)")
        #expect(result.responseCode == "00" && result.approvalCode == "A1B2C3" && result.attempts == 1)
        #expect(result.maskedPAN == "476173******0119" && result.scheme == "visa" && result.deviceKind == "phone")
        #expect(result.systemTraceAuditNumber == "000001" && result.applicationTransactionCounter == 1)
        #expect(result.timings.exchangeMicroseconds.count >= 3 && result.timings.authorizationMicroseconds != nil)
        #expect(result.description.hasPrefix("approved 00 12.34 USD visa 476173******0119"))
        let request = try #require(await acquirer.requests.first)
        #expect(request.idempotencyKey == "terminal-T-TEST-1-000001")
        #expect(request.amount.minorUnits == 1234 && request.posEntryMode == "07" && request.expiry == "3106")
        #expect("\(request)".contains("476173******0119") && !"\(request)".contains(TestIssuer.visaDPAN))

        let second = try await terminal.charge(try usd("1.00"), antenna: directory.antenna)
        #expect(
            second.isApproved && second.systemTraceAuditNumber == "000002" && second.applicationTransactionCounter == 2)

        let journal = try await store.transactions(terminalID: "T-TEST-1", limit: 10)
        #expect(journal.map(\.state) == [.approved, .approved])
        #expect(journal.allSatisfy { $0.maskedPAN == "476173******0119" && $0.responseCode == "00" })
        let encoded = try JSONEncoder().encode(journal) + JSONEncoder().encode(result)
        let logged = Data(log.lines.joined(separator: "\n").utf8)
        for bytes in [Array(encoded), Array(logged)] {
            for form in cardNumberForms(TestIssuer.visaDPAN) { #expect(!bytes.containsSequence(form)) }
        }
        #expect(log.lines.contains { $0.contains("476173******0119") })
        #expect(await target.fieldOffs == 2)
    }

    @Test("Declines: the issuer's code, a cryptogram the issuer rejects, a card that released nothing")
    func declines() async throws {
        let directory = try TemporaryDirectory()
        let antenna = try NFCAntenna(path: directory.antenna, kind: .watch, target: try CardTarget())
        let acquirer = TestAcquirer(script: [.code("51")])
        let terminal = try await makeTerminal(gateway: acquirer)
        let insufficient = try await terminal.charge(try usd("20.00"), antenna: directory.antenna)
        #expect(!insufficient.isApproved && insufficient.responseCode == "51")
        #expect(insufficient.reason == "insufficient funds" && insufficient.deviceKind == "watch")
        antenna.stop()

        // A card personalised under another issuer master key: its cryptogram cannot verify.
        let foreign = try CardTarget(issuerKey: SymmetricKey(data: [UInt8](repeating: 0x77, count: 16)))
        let stranger = try NFCAntenna(path: directory.antenna, kind: .phone, target: foreign)
        let cryptogram = try await terminal.charge(try usd("20.00"), antenna: directory.antenna)
        stranger.stop()
        #expect(cryptogram.responseCode == "88" && cryptogram.reason == "cryptogramMismatch", "\(cryptogram)")
        // An unauthorized device: no cryptogram leaves, nothing is sent online.
        let unauthorized = try NFCAntenna(
            path: directory.antenna, kind: .phone, target: try CardTarget(authorized: false))
        let before = await acquirer.requests.count
        let nothing = try await terminal.charge(try usd("20.00"), antenna: directory.antenna)
        unauthorized.stop()
        #expect(!nothing.isApproved && nothing.responseCode == "Z1")
        #expect(nothing.reason.contains("no cryptogram") && nothing.reason.contains("6985"))
        #expect(nothing.reason.contains("did not authenticate"))
        #expect(await acquirer.requests.count == before)
        // Nobody in the field.
        let empty = try await terminal.charge(try usd("20.00"), antenna: directory.antenna)
        #expect(empty.responseCode == "Z1" && empty.reason == "no device in the field" && empty.deviceKind == nil)
    }

    @Test("R3: No answer: the retry carries the same STAN and gets the first decision; the issuer decides once")
    func retry() async throws {
        let directory = try TemporaryDirectory()
        let antenna = try NFCAntenna(path: directory.antenna, kind: .phone, target: try CardTarget())
        defer { antenna.stop() }
        let acquirer = TestAcquirer(script: [.lost, .answer])
        let store: any TerminalStore = InMemoryTerminalStore()
        let terminal = try await makeTerminal(gateway: acquirer, store: store)
        let result = try await terminal.charge(try usd("5.00"), antenna: directory.antenna)
        #expect(result.isApproved && result.attempts == 2, "\(result)")
        #expect(await acquirer.authorizationKeys == ["terminal-T-TEST-1-000001", "terminal-T-TEST-1-000001"])
        #expect(await acquirer.decisions == 1)
        #expect(await acquirer.reversals.isEmpty)
        #expect(try await store.transactions(terminalID: "T-TEST-1", limit: 1).first?.attempts == 2)
    }

    @Test("The terminal's own deadline: an acquirer that never answers is abandoned and retried")
    func deadline() async throws {
        let directory = try TemporaryDirectory()
        let antenna = try NFCAntenna(path: directory.antenna, kind: .phone, target: try CardTarget())
        defer { antenna.stop() }
        let acquirer = TestAcquirer(script: [.slow(.seconds(600)), .answer])
        var policy = TerminalPolicy.test
        policy.attemptTimeout = .seconds(2)
        let terminal = try await makeTerminal(gateway: acquirer, policy: policy)
        let result = try await terminal.charge(try usd("5.00"), antenna: directory.antenna)
        #expect(result.attempts >= 2, "\(result)")
        #expect(await acquirer.decisions == 1)
        #expect(Set(await acquirer.authorizationKeys) == ["terminal-T-TEST-1-000001"])
    }

    @Test("Still no answer: a reversal with the same STAN; an unconfirmed one stays pending until recovery")
    func reversal() async throws {
        let directory = try TemporaryDirectory()
        let antenna = try NFCAntenna(path: directory.antenna, kind: .phone, target: try CardTarget())
        defer { antenna.stop() }
        let acquirer = TestAcquirer(script: Array(repeating: .lost, count: 3))
        let store: any TerminalStore = InMemoryTerminalStore()
        let terminal = try await makeTerminal(gateway: acquirer, store: store)
        let result = try await terminal.charge(try usd("5.00"), antenna: directory.antenna)
        #expect(!result.isApproved && result.responseCode == "Z3" && result.reversed == true, "\(result)")
        #expect(result.attempts == 3 && result.reason.contains("reversed"))
        let keys = await acquirer.authorizationKeys
        #expect(keys.count == 3 && Set(keys).count == 1)
        let reversal = try #require(await acquirer.reversals.first)
        #expect(reversal.systemTraceAuditNumber == "000001" && reversal.amountMinorUnits == 500)
        #expect(reversal.currency == "840" && reversal.reason == "timeout")
        #expect(try await store.transactions(terminalID: "T-TEST-1", limit: 1).first?.state == .reversed)

        // The acquirer is gone when the reversal is due: it stays pending and the next start sends it.
        let flaky = TestAcquirer(
            script: Array(repeating: .lost, count: 3),
            reversalScript: Array(repeating: .unreachable, count: 3))
        let pendingStore: any TerminalStore = InMemoryTerminalStore()
        let flakyTerminal = try await makeTerminal(gateway: flaky, store: pendingStore)
        let pending = try await flakyTerminal.charge(try usd("7.00"), antenna: directory.antenna)
        #expect(pending.reversed == false && pending.reason.contains("pending"))
        #expect(try await pendingStore.unresolved(terminalID: "T-TEST-1").map(\.state) == [.reversalPending])
        let recovered = try await flakyTerminal.recover()
        #expect(recovered.map(\.state) == [.reversed])
        #expect(await flaky.reversals.map(\.systemTraceAuditNumber) == ["000001"])
        #expect(try await pendingStore.unresolved(terminalID: "T-TEST-1").isEmpty)
    }

    @Test("Unreachable: nothing arrived, so nothing to reverse; a refused request is not retried")
    func unreachableAndRefused() async throws {
        let directory = try TemporaryDirectory()
        let antenna = try NFCAntenna(path: directory.antenna, kind: .phone, target: try CardTarget())
        defer { antenna.stop() }
        let down = TestAcquirer(script: [.unreachable, .unreachable, .unreachable])
        let terminal = try await makeTerminal(gateway: down)
        let result = try await terminal.charge(try usd("5.00"), antenna: directory.antenna)
        #expect(result.responseCode == "Z3" && result.reversed == nil && result.attempts == 3)
        #expect(await down.reversals.isEmpty)

        let strict = TestAcquirer(script: [.refuse])
        let refusedTerminal = try await makeTerminal(gateway: strict)
        let refused = try await refusedTerminal.charge(try usd("5.00"), antenna: directory.antenna)
        #expect(refused.responseCode == "96" && refused.attempts == 1 && refused.reason.contains("refused"))
        #expect(await strict.reversals.isEmpty)
    }

    @Test("Recovery: a tap cut short is marked interrupted; a request without a recorded answer is reversed")
    func recovery() async throws {
        let store: any TerminalStore = InMemoryTerminalStore()
        let acquirer = TestAcquirer()
        let terminal = try await makeTerminal(gateway: acquirer, store: store)
        let date = Date()
        _ = try await store.begin(terminalID: "T-TEST-1", amountMinorUnits: 100, currency: "USD", startedAt: date)
        var sent = try await store.begin(
            terminalID: "T-TEST-1", amountMinorUnits: 200, currency: "USD", startedAt: date)
        sent.state = .sent
        try await store.update(sent)
        let changed = try await terminal.recover()
        #expect(changed.map(\.state) == [.interrupted, .reversed])
        #expect(await acquirer.reversals.map(\.systemTraceAuditNumber) == ["000002"])
        #expect(await acquirer.reversals.first?.reason == "recovery")
        #expect(try await terminal.recover().isEmpty)
    }

    @Test("A Mac or iPad that claims the field is refused before any APDU; the charge declines with Z1")
    func onlyPhonesAndWatches() async throws {
        let directory = try TemporaryDirectory()
        let acquirer = TestAcquirer()
        let terminal = try await makeTerminal(gateway: acquirer)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in directory.antenna.utf8.enumerated() { raw[index] = byte }
        }
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        listen(fd, 1)
        Thread {
            let connection = accept(fd, nil, nil)
            var header = [UInt8](repeating: 0, count: 3)
            _ = recv(connection, &header, 3, Int32(MSG_WAITALL))
            var payload = [UInt8](repeating: 0, count: Int(header[1]) << 8 | Int(header[2]))
            _ = recv(connection, &payload, payload.count, Int32(MSG_WAITALL))
            let join = Array(#"{"kind":"mac","ready":true,"version":1}"#.utf8)
            let frame = [0x81, UInt8(join.count >> 8), UInt8(join.count & 0xFF)] + join
            _ = frame.withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            var rest = [UInt8](repeating: 0, count: 64)
            _ = recv(connection, &rest, 64, 0)
            close(connection)
            close(fd)
        }.start()
        let result = try await terminal.charge(try usd("5.00"), antenna: directory.antenna)
        #expect(result.responseCode == "Z1" && result.reason.contains("only phones and watches"), "\(result)")
        #expect(await acquirer.requests.isEmpty)
    }

    @Test("C6: Above the contactless limit the reader asks for another interface; nothing goes online")
    func limits() async throws {
        let directory = try TemporaryDirectory()
        let antenna = try NFCAntenna(path: directory.antenna, kind: .phone, target: try CardTarget())
        defer { antenna.stop() }
        let acquirer = TestAcquirer()
        let terminal = try await makeTerminal(
            gateway: acquirer, settings: try TerminalSettings(terminalID: "T-TEST-1", contactlessLimit: 10000))
        let result = try await terminal.charge(try usd("100.01"), antenna: directory.antenna)
        #expect(result.responseCode == "Z1" && result.reason.contains("contactless limit"))
        #expect(try await terminal.charge(try usd("100.00"), antenna: directory.antenna).isApproved)
        #expect(await acquirer.requests.count == 1)
    }
}
