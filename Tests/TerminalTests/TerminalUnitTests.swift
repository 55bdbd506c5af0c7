import CardBasics
import EMV
import Foundation
import NFCLink
import OrchardCrypto
import OrchardLogging
import OrchardRuntime
import OrchardStore
import Terminal
import Testing

@Suite("Terminal settings")
struct SettingsTests {
    @Test("C6: Settings give the kernel's configuration and the polling; every field's form is checked")
    func settings() throws {
        let settings = try TerminalSettings(
            terminalID: "T-1", merchantName: "Orchard Coffee", countryCode: 250, currency: "EUR",
            contactlessLimit: 5000,
            cvmRequiredLimit: 2500, acceptedNetworks: ["masterCard", "visa"])
        let kernel = try settings.kernelConfiguration(for: try Currency("EUR"))
        #expect(kernel.countryCode == 250 && kernel.currencyCode == 978)
        #expect(kernel.preferredAID == PaymentScheme.mastercard.aid)
        #expect(kernel.supportedApplications.map(\.scheme) == [.mastercard, .visa])
        #expect(kernel.contactlessTransactionLimit == 5000 && kernel.cvmRequiredLimit == 2500)
        // Limits are in the terminal's currency: a terminal with limits charges in no other; one without does.
        #expect(throws: TerminalError(.currencyNotAccepted, "")) {
            try settings.kernelConfiguration(for: try Currency("USD"))
        }
        let unlimited = try TerminalSettings(terminalID: "T-2", currency: "EUR")
        #expect(try unlimited.kernelConfiguration(for: try Currency("USD")).currencyCode == 840)
        let polling = try settings.polling()
        #expect(polling.networks == ["masterCard", "visa"] && polling.merchantName == "Orchard Coffee")
        #expect(polling.applicationIdentifiers == [PaymentScheme.mastercard.aid, PaymentScheme.visa.aid])
        let json = try JSONEncoder().encode(settings)
        #expect(try JSONDecoder().decode(TerminalSettings.self, from: json) == settings)

        let bad: [() throws -> TerminalSettings] = [
            { try TerminalSettings(terminalID: "") }, { try TerminalSettings(terminalID: "T 1") },
            { try TerminalSettings(terminalID: String(repeating: "T", count: 17)) },
            { try TerminalSettings(terminalID: "T1", merchantID: "a:b") },
            { try TerminalSettings(terminalID: "T1", countryCode: 1000) },
            { try TerminalSettings(terminalID: "T1", terminalTransactionQualifiers: [0x36]) },
            { try TerminalSettings(terminalID: "T1", contactlessLimit: -1) },
            { try TerminalSettings(terminalID: "T1", acceptedNetworks: []) },
            { try TerminalSettings(terminalID: "T1", acceptedNetworks: ["amex"]) },
            { try TerminalSettings(terminalID: "T1", acceptedNetworks: ["visa", "visa"]) },
            { try TerminalSettings(terminalID: "T1", acquirerURL: "http://plain") },
        ]
        for make in bad { #expect(throws: TerminalError(.invalidArgument, "")) { try make() } }
        #expect(throws: TerminalError(.unknownCurrency, "")) { try TerminalSettings(terminalID: "T1", currency: "XXX") }
        let tampered = String(decoding: json, as: UTF8.self).replacingOccurrences(of: "\"T-1\"", with: "\"T 1\"")
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(TerminalSettings.self, from: Data(tampered.utf8))
        }
    }

    @Test("An acquirer's answer is checked before use")
    func answers() throws {
        #expect(try AuthorizationResponse(responseCode: "00", approvalCode: "123456").isApproved)
        #expect(try !AuthorizationResponse(responseCode: "51").isApproved)
        for code in ["0", "000", "a0", "0\n"] {
            #expect(throws: TerminalError(.protocolViolation, "")) { try AuthorizationResponse(responseCode: code) }
        }
        #expect(throws: TerminalError(.protocolViolation, "")) {
            try AuthorizationResponse(responseCode: "05", declineReason: String(repeating: "x", count: 65))
        }
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(AuthorizationResponse.self, from: Data(#"{"responseCode":"0"}"#.utf8))
        }
    }
}

@Suite("Terminal store")
struct StoreTests {
    @Test("DIR/terminal.sqlite: STANs in order and durable across reopening, the journal, unresolved lines")
    func sqlite() async throws {
        let directory = try TemporaryDirectory()
        let deployment = DeploymentDirectory(path: directory.path + "/dir")
        var store = try TerminalDatabase(deployment: deployment)
        #expect(store.path == deployment.databasePath(for: .terminal))
        try await store.saveTerminal(try TerminalSettings(terminalID: "T1"))
        try await store.saveTerminal(try TerminalSettings(terminalID: "T2"))
        let start = Date(timeIntervalSince1970: 1_750_000_000)
        let first = try await store.begin(terminalID: "T1", amountMinorUnits: 100, currency: "USD", startedAt: start)
        let second = try await store.begin(terminalID: "T1", amountMinorUnits: 200, currency: "USD", startedAt: start)
        let other = try await store.begin(terminalID: "T2", amountMinorUnits: 300, currency: "EUR", startedAt: start)
        #expect([first, second, other].map(\.systemTraceAuditNumber) == ["000001", "000002", "000001"])
        await #expect(throws: TerminalError(.notConfigured, "")) {
            try await store.begin(terminalID: "T9", amountMinorUnits: 1, currency: "USD", startedAt: start)
        }
        var updated = second
        updated.state = .sent
        updated.maskedPAN = "476173******0119"
        updated.applicationTransactionCounter = 7
        updated.attempts = 2
        try await store.update(updated)
        // A new setting keeps the STAN counter.
        try await store.saveTerminal(try TerminalSettings(terminalID: "T1", merchantName: "Renamed"))
        await store.close()

        store = try TerminalDatabase(deployment: deployment)
        #expect(try await store.terminal("T1")?.merchantName == "Renamed")
        #expect(try await store.terminals().map(\.terminalID) == ["T1", "T2"])
        let third = try await store.begin(terminalID: "T1", amountMinorUnits: 400, currency: "USD", startedAt: start)
        #expect(third.systemTraceAuditNumber == "000003")
        let journal = try await store.transactions(terminalID: "T1", limit: 10)
        #expect(journal.map(\.systemTraceAuditNumber) == ["000003", "000002", "000001"])
        #expect(journal[1] == updated)
        #expect(
            try await store.unresolved(terminalID: "T1").map(\.systemTraceAuditNumber) == [
                "000001", "000002", "000003",
            ])
        var missing = third
        missing = TransactionRecord(
            id: 999, terminalID: "T1", systemTraceAuditNumber: "000009", startedAt: start, amountMinorUnits: 1,
            currency: "USD")
        await #expect(throws: TerminalError(.storeFailure, "")) { try await store.update(missing) }
        await store.close()
        #expect(SecureFile.mode(of: deployment.databasePath(for: .terminal)) == 0o600)
    }

    @Test("One process per terminal: a second lock on the same terminal is refused until the first goes")
    func lock() throws {
        let directory = try TemporaryDirectory()
        var first: TerminalLock? = try TerminalLock(terminalID: "T1", in: directory.deployment)
        #expect(throws: TerminalError(.invalidArgument, "")) {
            try TerminalLock(terminalID: "T1", in: directory.deployment)
        }
        let other = try TerminalLock(terminalID: "T2", in: directory.deployment)
        withExtendedLifetime(first) {}
        first = nil
        let again = try TerminalLock(terminalID: "T1", in: directory.deployment)
        withExtendedLifetime((other, again)) {}
    }

    @Test("The STAN wraps from 999999 to 000001")
    func wrap() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/terminal.sqlite"
        let store = try TerminalDatabase(path: path)
        try await store.saveTerminal(try TerminalSettings(terminalID: "T1"))
        await store.close()
        // Move the counter to its end from outside, as a long-lived terminal would have.
        let database = try Database(path: path, options: StoreOptions(durability: .full))
        #expect(try database.execute("UPDATE terminals SET next_stan = 999999") == 1)
        let reopened = try TerminalDatabase(path: path)
        let date = Date()
        let last = try await reopened.begin(terminalID: "T1", amountMinorUnits: 1, currency: "USD", startedAt: date)
        let next = try await reopened.begin(terminalID: "T1", amountMinorUnits: 1, currency: "USD", startedAt: date)
        #expect(last.systemTraceAuditNumber == "999999" && next.systemTraceAuditNumber == "000001")
        await reopened.close()
    }
}
