import Acquirer
import CardBasics
import Device
import DeviceProcess
import Foundation
import Issuer
import MerchantServer
import NetworkServer
import OrchardCrypto
import OrchardRuntime
import OrchardServices
import OrchardStore
import Wallet

/// What `orchard chaos` found.
struct ChaosSummary: Encodable {
    let seed: Int
    let cycles: Int
    let payments: Int
    let approved: Int
    let declined: Int
    let failed: Int
    let indeterminate: Int
    let lifecycleChanges: Int
    /// Acknowledged payments whose hold or record is missing.
    let lost: Int
    /// Payments held or approved more than once.
    let duplicated: Int
    /// Money held that no party's final record explains, or a party left with an open payment.
    let unreconciled: Int
    let kills: [String: Int]
    let reconciliation: NetworkReconciliationReport
    let durationSeconds: Int
    let violations: [String]

    var line: String {
        "chaos: \(cycles) cycles, \(payments) payments, \(lost) lost, \(duplicated) duplicated, "
            + "\(unreconciled) unreconciled (seed \(seed))"
    }
}

/// One `orchard chaos` run over a deployment: the parties as processes of the same `orchard` executable, a seeded
/// schedule, a journal fsync'd outside every killed process, and the checks across the stores at the end.
final class ChaosRun: @unchecked Sendable {
    /// The long-running parties (the terminal and the app are one process per payment).
    enum Party: String, CaseIterable {
        case network, pay, merchant, phone, watch

        /// A server party: several instances of it may run on one PostgreSQL database.
        var isServer: Bool { self == .network || self == .pay || self == .merchant }
    }

    /// One long-running process: a party, or a further instance of a server party (`network.2`).
    struct Member: Hashable {
        let party: Party
        let instance: Int

        /// `network` for instance 1, `network.2` for instance 2: its stderr file and its key in the kill counts.
        var name: String { instance == 1 ? party.rawValue : "\(party.rawValue).\(instance)" }
    }

    /// One journalled operation.
    struct Entry: Codable {
        let op: Int
        let kind: String
        let device: String
        var amount: Int64?
        var outcome: String
        var stan: String?
        var approvalCode: String?
        var orderID: String?
        var killed: String?
    }

    static let passcode = "123456"
    static let cards = ["phone": ("4111111111111111", "266"), "watch": ("5555555555554444", "667")]

    let deployment: DeploymentDirectory
    let seed: Int
    let cycles: Int
    let paymentsPerCycle: Int
    /// Instances of each server party (more than one only on PostgreSQL).
    let instances: Int
    let trace: @Sendable (String) -> Void
    let executable: String
    let folder: String
    private let random: InsecureDeterministicRandom
    private var processes: [Member: Subprocess] = [:]
    private var journal: FileHandle
    private var entries: [Entry] = []
    private var kills: [String: Int] = [:]
    private var lifecycleChanges = 0
    private var outputCounter = 0
    private let environment: [String: String] = [
        // The merchant's reconciliation pass runs often, so the end of the run waits little for it.
        "ORCHARD_MERCHANT_RECONCILE_INTERVAL_SECONDS": "2"
    ]

    init(
        deployment: DeploymentDirectory, seed: Int, cycles: Int, paymentsPerCycle: Int, instances: Int = 1,
        trace: @escaping @Sendable (String) -> Void
    ) throws {
        self.deployment = deployment
        self.seed = seed
        self.cycles = cycles
        self.paymentsPerCycle = paymentsPerCycle
        self.instances = instances
        self.trace = trace
        executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
        folder = deployment.path + "/chaos"
        random = InsecureDeterministicRandom(seed: Array("orchard-chaos-\(seed)".utf8))
        try SecureFile.createDirectory(folder, mode: 0o700)
        let journalPath = folder + "/journal.jsonl"
        if !FileManager.default.fileExists(atPath: journalPath) {
            _ = FileManager.default.createFile(
                atPath: journalPath, contents: nil, attributes: [.posixPermissions: 0o600])
        }
        guard let handle = FileHandle(forWritingAtPath: journalPath) else {
            throw CLIError.failure("cannot open \(journalPath)")
        }
        handle.seekToEndOfFile()
        journal = handle
    }

    // MARK: - The run

    func run() async throws -> ChaosSummary {
        let started = Date()
        try await setUp()
        var op = 0
        for cycle in 0..<cycles {
            let victimIndex = Int(randomBelow(UInt32(Party.allCases.count + 1)))
            let victim = victimIndex < Party.allCases.count ? Party.allCases[victimIndex].rawValue : "client"
            let strike = Int(randomBelow(UInt32(paymentsPerCycle)))
            for index in 0..<paymentsPerCycle {
                op += 1
                // Within the first 400 ms: a payment takes a few hundred, so most kills land while it runs.
                let killAfter = index == strike ? Double(randomBelow(400)) / 1000 : nil
                try await payment(op, killing: killAfter.map { (victim, $0) })
            }
            if randomBelow(4) == 0 {
                op += 1
                try await lifecycle(op)
            }
            if cycle % 10 == 9 || cycle == cycles - 1 {
                trace("chaos: cycle \(cycle + 1)/\(cycles), \(entries.count) operations, kills \(kills)")
            }
        }
        let report = try await finish()
        return try await check(report: report, duration: Date().timeIntervalSince(started))
    }

    // MARK: - Parties

    /// Devices, their cards, the terminal, and every party running.
    private func setUp() async throws {
        for name in ["phone", "watch"] where !Device.names(in: deployment).contains(name) {
            let kind =
                name == "phone"
                ? ["--kind", "phone", "--biometry", "face"] : ["--kind", "watch", "--biometry", "none"]
            try await must(
                ["device", "create", "--name", name, "--passcode-file", "-"] + kind,
                stdin: Array((Self.passcode + "\n").utf8))
        }
        try await must(["terminal", "setup"])
        for member in members { try await start(member) }
        for name in ["phone", "watch"] {
            let active = (try? Device.walletCards(of: name, in: deployment))?.contains { $0.state == .active } ?? false
            guard !active, let (pan, cvv) = Self.cards[name] else { continue }
            // The card number and CVV on stdin, never in argv.
            try await must(
                ["device", "add-card", "--name", name, "--expiry", "12/34", "--cardholder", "Alice Doe"],
                stdin: Array("\(pan)\n\(cvv)\n".utf8))
        }
        trace(
            "chaos: every party runs"
                + (instances > 1 ? " (\(instances) instances of each server party)" : "")
                + "; seed \(seed), \(cycles) cycles of \(paymentsPerCycle) payments")
    }

    /// Every long-running process: each party, and each server party's further instances.
    private var members: [Member] {
        Party.allCases.flatMap { party in
            (1...(party.isServer ? instances : 1)).map { Member(party: party, instance: $0) }
        }
    }

    private func start(_ member: Member) async throws {
        let party = member.party
        let arguments: [String]
        switch party {
        case .network, .pay, .merchant:
            arguments = ["serve", party.rawValue] + (member.instance > 1 ? ["--instance", "\(member.instance)"] : [])
        case .phone: arguments = ["device", "run", "--name", "phone", "--auto-auth", "face-id"]
        case .watch: arguments = ["device", "run", "--name", "watch", "--auto-auth", "double-click"]
        }
        let process = try Subprocess(
            executable, arguments + ["--data-dir", deployment.path], environment: environment,
            stderrPath: folder + "/\(member.name).stderr")
        processes[member] = process
        for _ in 0..<1200 {
            guard process.isRunning else {
                throw CLIError.failure("\(member.name) ended while starting (see \(folder)/\(member.name).stderr)")
            }
            if isReady(member, pid: process.pid) {
                if party == .watch {
                    try await must(["device", "wrist", "--name", "watch", "--on", "yes"])
                    try await must(
                        ["device", "unlock", "--name", "watch", "--method", "passcode"],
                        stdin: Array((Self.passcode + "\n").utf8))
                }
                return
            }
            try await Task.sleep(for: .milliseconds(25))
        }
        throw CLIError.failure("\(member.name) did not start in 30 s")
    }

    private func isReady(_ member: Member, pid: Int32) -> Bool {
        let party = member.party
        switch party {
        case .network, .pay, .merchant:
            guard let name = try? ServiceName(party.rawValue),
                let record = try? deployment.runningService(name, instance: member.instance)
            else { return false }
            return record.pid == pid
        case .phone, .watch:
            return ControlSocketClient.isRunning(at: Device.controlSocketPath(of: party.rawValue, in: deployment))
        }
    }

    /// Kills `party`: with several instances, one of them chosen at random (the others go on serving).
    private func kill(_ party: Party) async {
        let instance = party.isServer && instances > 1 ? 1 + Int(randomBelow(UInt32(instances))) : 1
        let member = Member(party: party, instance: instance)
        guard let process = processes[member] else { return }
        process.send(SIGKILL)
        _ = await process.exit()
        kills[member.name, default: 0] += 1
    }

    /// Every party that is not running is started again.
    private func restartDead() async throws {
        for member in members where processes[member]?.isRunning != true { try await start(member) }
    }

    // MARK: - Operations

    /// One payment: an in-store tap (phone or watch) or, one in three, an in-app purchase on the phone; with
    /// `killing`, the victim is killed that many seconds after the payment started.
    private func payment(_ op: Int, killing: (victim: String, after: Double)?) async throws {
        let inApp = randomBelow(3) == 0
        let device = inApp || randomBelow(2) == 0 ? "phone" : "watch"
        let amount = Int64(100 + randomBelow(1900))
        let decimal = String(format: "%d.%02d", amount / 100, amount % 100)
        var entry = Entry(
            op: op, kind: inApp ? "in-app" : "tap", device: device, amount: amount, outcome: "started")
        try record(entry)
        let arguments =
            inApp
            ? ["app", "buy", "--device", device, "--item", "Chaos \(op)", "--amount", decimal]
            : [
                "terminal", "charge", "--device", device, "--amount", decimal, "--json", "--wait", "10", "--attempts",
                "3", "--timeout", "5",
            ]
        let (process, stdoutPath) = try spawn(arguments)
        if let killing {
            try await Task.sleep(for: .milliseconds(Int(killing.after * 1000)))
            entry.killed = killing.victim
            if let party = Party(rawValue: killing.victim) {
                await kill(party)
            } else {
                process.send(SIGKILL)
                kills["client", default: 0] += 1
            }
        }
        let ended = await process.exit(within: 120)
        let output = (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? ""
        // A killed or failed client prints nothing readable: no answer, and the outcome follows from its exit.
        let answer = try? ChargeOutput.decode(Data(output.utf8))
        switch (ended, answer?.outcome) {
        case (.exited(0)?, "approved"?): entry.outcome = "approved"
        case (.exited(0)?, "declined"?): entry.outcome = "declined"
        case (.exited?, _): entry.outcome = inApp ? "indeterminate" : "failed"
        default: entry.outcome = "indeterminate"
        }
        entry.stan = answer?.stan
        entry.approvalCode = answer?.approvalCode
        entry.orderID = answer?.orderID
        try record(entry)
        try await restartDead()
        // A terminal killed mid-payment reverses what it sent at its next start.
        if !inApp, entry.killed == "client" || entry.outcome != "approved" && entry.outcome != "declined" {
            _ = try await orchardCommand(["terminal", "recover"])
        }
    }

    /// The watch put in lost mode and taken out of it with its passcode.
    private func lifecycle(_ op: Int) async throws {
        var entry = Entry(op: op, kind: "lifecycle", device: "watch", outcome: "started")
        try record(entry)
        let lost = try await orchardCommand(["device", "lost-mode", "--name", "watch"])
        let resumed = try await orchardCommand(
            ["device", "resume", "--name", "watch"], stdin: Array((Self.passcode + "\n").utf8))
        entry.outcome = lost == .exited(0) && resumed == .exited(0) ? "acknowledged" : "failed"
        if entry.outcome == "acknowledged" { lifecycleChanges += 1 }
        try record(entry)
    }

    // MARK: - The end

    /// Every party runs again, the terminal recovers, the merchant closes what it left open; then everything stops
    /// and reconciliation runs a day later.
    private func finish() async throws -> NetworkReconciliationReport {
        try await restartDead()
        _ = try await orchardCommand(["terminal", "recover"])
        // With several instances a merchant leaves a charge it did not finish to the others only after the grace in
        // which it may still be driving it (`PaymentProcessor.sharedChargeGrace`, 60 s): wait past it.
        for _ in 0..<(instances > 1 ? 900 : 300) {
            if try openMerchantPayments() == 0 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        for member in members.reversed() {
            guard let process = processes[member] else { continue }
            process.send(SIGTERM)
            if await process.exit(within: 30) == nil { trace("chaos: \(member.name) did not stop; killed") }
        }
        let registry = try DeploymentCommands.registry()
        return try await NetworkServer.reconcileOnce(
            configuration: try registry.loadConfiguration(from: deployment, environment: [:]), directory: deployment,
            environment: ServiceEnvironment(wallClock: ManualClock(now: Date().addingTimeInterval(86_400))))
    }

    private func openMerchantPayments() throws -> Int {
        let database = try readOnly(.merchant)
        return try database.queryFirst(
            "SELECT COUNT(*) FROM order_payments WHERE state IN ('charging', 'reversing')", []
        ) { try $0.int(0) } ?? 0
    }

    // MARK: - Checks

    private func check(report: NetworkReconciliationReport, duration: TimeInterval) async throws -> ChaosSummary {
        var violations: [String] = []
        var lost = 0
        var duplicated = 0
        var unreconciled = 0

        // The issuer: every hold (approved, not reversed), by network transaction ID.
        let issuer = try readOnly(.issuer)
        let ids = try issuer.query("SELECT network_transaction_id FROM authorizations", []) { try $0.string(0) }
        let issuerStore = try await SQLiteIssuerStore.open(in: deployment)
        var holds: [String: IssuerAuthorizationEntry] = [:]
        var approvalCodes: [String: Int] = [:]
        for id in ids {
            guard let entry = try await issuerStore.authorization(networkTransactionID: id),
                entry.response.responseCode.isApproved, entry.reversedAt == nil
            else { continue }
            holds[id] = entry
            if let code = entry.response.approvalCode { approvalCodes[code, default: 0] += 1 }
        }
        await issuerStore.store.close()
        for (code, count) in approvalCodes where count > 1 {
            duplicated += count - 1
            violations.append("approval code \(code) held \(count) times")
        }
        func networkTransactionID(_ key: String) -> String {
            NetworkServerService.acquirerID + ":" + Acquirer.networkTransactionID(for: key)
        }
        var claimed: Set<String> = []

        // The terminal's journal.
        let terminal = try readOnly(.terminal)
        let taps = try terminal.query(
            "SELECT terminal_id, stan, state, amount, approval_code, masked_pan, atc FROM transactions", []
        ) { row in
            (
                try row.string(0), try row.string(1), try row.string(2), try row.int64(3), try row.optionalString(4),
                try row.optionalString(5), try row.optionalInt64(6)
            )
        }
        var approvedATCs: Set<String> = []
        var terminalByStan: [String: (state: String, approvalCode: String?)] = [:]
        for tap in taps {
            let id = networkTransactionID("terminal:\(tap.0):\(tap.1)")
            terminalByStan[tap.1] = (tap.2, tap.4)
            switch tap.2 {
            case "approved":
                claimed.insert(id)
                if holds[id]?.amount.minorUnits != tap.3 {
                    lost += 1
                    violations.append("terminal STAN \(tap.1) approved, no hold of its amount at the issuer")
                }
                if let pan = tap.5, let atc = tap.6, !approvedATCs.insert("\(pan)/\(atc)").inserted {
                    duplicated += 1
                    violations.append("ATC \(atc) of \(pan) approved twice")
                }
            case "declined", "reversed", "interrupted":
                // Final without money: declined, reversed, or stopped before any request went out.
                if holds[id] != nil {
                    unreconciled += 1
                    violations.append("terminal STAN \(tap.1) \(tap.2), yet held at the issuer")
                }
            default:
                unreconciled += 1
                violations.append("terminal STAN \(tap.1) left \(tap.2)")
            }
        }

        // The merchant's payments.
        let merchantID = try DeploymentCommands.registry().loadConfiguration(from: deployment, environment: [:])[
            MerchantService.merchantIdentifier]
        let merchant = try readOnly(.merchant)
        let charges = try merchant.query("SELECT order_id, idempotency_key, state FROM order_payments", []) { row in
            (try row.string(0), try row.string(1), try row.string(2))
        }
        var approvedOrders: [String: Int] = [:]
        for charge in charges {
            let id = networkTransactionID("merchant:\(merchantID):\(charge.1)")
            switch charge.2 {
            case "approved":
                claimed.insert(id)
                approvedOrders[charge.0, default: 0] += 1
                if holds[id] == nil {
                    lost += 1
                    violations.append("order \(charge.0) approved, no hold at the issuer")
                }
            case "charging", "reversing":
                unreconciled += 1
                violations.append("order \(charge.0) left \(charge.2)")
            default:
                if holds[id] != nil {
                    unreconciled += 1
                    violations.append("order \(charge.0) \(charge.2), yet held at the issuer")
                }
            }
        }
        for (order, count) in approvedOrders where count > 1 {
            duplicated += count - 1
            violations.append("order \(order) approved \(count) times")
        }

        // Every hold is explained by exactly one approved record, and the acquirer recorded it.
        let acquirerStore = try SQLiteAcquirerStore(
            location: try StoreSettings.location(for: .acquirer, in: deployment, environment: [:]))
        let pending = try await acquirerStore.pendingAuthorizations(sentBefore: .distantFuture)
        await acquirerStore.store.close()
        // The acquirer's key of each network transaction (`terminal:<ID>:<STAN>`, `merchant:<ID>:<key>`), to say
        // whose payment an unexplained hold is.
        let acquirer = try readOnly(.acquirer)
        var acquirerKeys: [String: String] = [:]
        for table in ["authorizations", "pending_authorizations", "reversals"] {
            for key in try acquirer.query("SELECT idempotency_key FROM \(table)", [], { try $0.string(0) }) {
                acquirerKeys[networkTransactionID(key)] = key
            }
        }
        for id in holds.keys.sorted() where !claimed.contains(id) {
            unreconciled += 1
            violations.append(
                "hold \(id) (acquirer key \(acquirerKeys[id] ?? "unknown")) has no approved record at the terminal or "
                    + "merchant")
        }
        if !pending.isEmpty {
            unreconciled += pending.count
            violations.append("\(pending.count) acquirer authorization(s) without a result")
        }

        // The journal against the stores: nothing acknowledged is missing.
        var counts: [String: Int] = [:]
        for entry in latestEntries() {
            counts[entry.outcome, default: 0] += 1
            guard entry.outcome == "approved" else { continue }
            if entry.kind == "tap" {
                guard let stan = entry.stan, let final = terminalByStan[stan], final.state == "approved",
                    final.approvalCode == entry.approvalCode
                else {
                    lost += 1
                    violations.append("operation \(entry.op) was acknowledged approved; the terminal does not say so")
                    continue
                }
            } else if entry.kind == "in-app" {
                guard let order = entry.orderID, approvedOrders[order] == 1 else {
                    lost += 1
                    violations.append("operation \(entry.op) was acknowledged approved; the merchant does not say so")
                    continue
                }
            }
        }

        // In-app nonces: each redeemed once (every accepted credential tallies once and spends its nonce).
        let pay = try readOnly(.pay)
        let used = try pay.queryFirst("SELECT COUNT(*) FROM payment_nonces WHERE used = 1", []) { try $0.int(0) } ?? 0
        // As BIGINT: PostgreSQL's SUM of BIGINT is NUMERIC.
        let tallied =
            try pay.queryFirst(
                "SELECT CAST(COALESCE(SUM(purchases), 0) AS BIGINT) FROM in_app_purchase_tallies", []
            ) { try $0.int(0) } ?? 0
        if tallied > used {
            duplicated += tallied - used
            violations.append("\(tallied) credentials accepted for \(used) spent nonces")
        }

        let payments = latestEntries().filter { $0.kind != "lifecycle" }
        return ChaosSummary(
            seed: seed, cycles: cycles, payments: payments.count, approved: counts["approved"] ?? 0,
            declined: counts["declined"] ?? 0, failed: counts["failed"] ?? 0,
            indeterminate: counts["indeterminate"] ?? 0, lifecycleChanges: lifecycleChanges, lost: lost,
            duplicated: duplicated, unreconciled: unreconciled, kills: kills, reconciliation: report,
            durationSeconds: Int(duration.rounded()), violations: violations)
    }

    /// A read-only connection to `party`'s store where the deployment keeps it: its SQLite file, or its schema of
    /// the PostgreSQL database `config.json` names (`orchard init --database`).
    private func readOnly(_ party: OrchardRuntime.Party) throws -> Database {
        try Database(
            location: try StoreSettings.location(for: party, in: deployment, environment: [:]),
            options: StoreOptions(durability: .full), access: .readOnly)
    }

    /// The last journal line of each operation of this run.
    private func latestEntries() -> [Entry] {
        var byOp: [Int: Entry] = [:]
        for entry in entries { byOp[entry.op] = entry }
        return byOp.keys.sorted().compactMap { byOp[$0] }
    }

    // MARK: - Helpers

    /// Appends `entry` to the journal and syncs it before the operation goes on.
    private func record(_ entry: Entry) throws {
        entries.append(entry)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        var line = try encoder.encode(entry)
        line.append(0x0A)
        journal.write(line)
        guard fsync(journal.fileDescriptor) == 0 else { throw CLIError.failure("cannot sync the chaos journal") }
    }

    private func spawn(_ arguments: [String], stdin: [UInt8]? = nil) throws -> (Subprocess, String) {
        outputCounter += 1
        let stdoutPath = folder + "/out-\(seed)-\(outputCounter).json"
        try? FileManager.default.removeItem(atPath: stdoutPath)
        let process = try Subprocess(
            executable, arguments + ["--data-dir", deployment.path], environment: environment, stdin: stdin,
            stdoutPath: stdoutPath, stderrPath: folder + "/commands.stderr")
        return (process, stdoutPath)
    }

    /// Runs a one-shot command to its end (at most 120 s); nil when it had to be killed.
    @discardableResult
    private func orchardCommand(_ arguments: [String], stdin: [UInt8]? = nil) async throws -> Subprocess.Termination? {
        let (process, stdoutPath) = try spawn(arguments, stdin: stdin)
        defer { try? FileManager.default.removeItem(atPath: stdoutPath) }
        return await process.exit(within: 120)
    }

    private func must(_ arguments: [String], stdin: [UInt8]? = nil) async throws {
        let ended = try await orchardCommand(arguments, stdin: stdin)
        guard ended == .exited(0) else {
            throw CLIError.failure(
                "`orchard \(arguments.prefix(3).joined(separator: " "))` failed (\(ended?.description ?? "timed out")); "
                    + "see \(folder)/commands.stderr")
        }
    }

    /// A uniform number below `bound` from the seeded source.
    private func randomBelow(_ bound: UInt32) -> UInt32 {
        let bytes = random.bytes(4)
        let value = bytes.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        return value % bound
    }
}

/// What the run reads of `orchard terminal charge --json` (a `ChargeResult`) and `orchard app buy` (a
/// `DemoApp.Purchase`): the outcome, and the STAN and approval code or the order ID. Other members are passed over.
struct ChargeOutput: Decodable {
    let outcome: String?
    let stan: String?
    let approvalCode: String?
    let orderID: String?

    /// `output` as one JSON object (a key given twice is refused, as every Orchard reader refuses it).
    static func decode(_ output: Data) throws -> ChargeOutput {
        if let duplicate = DuplicateJSONKeys.first(in: output) {
            throw CLIError.failure("the client's answer gives '\(duplicate)' twice")
        }
        return try JSONDecoder().decode(ChargeOutput.self, from: output)
    }
}
