public import CardBasics
import EMV
import Foundation
public import NFCLink
public import OrchardCrypto
public import OrchardLogging

/// How patient a terminal is: with the user, the device, and the acquirer.
public struct TerminalPolicy: Sendable {
    /// How long the reader waits for the user to authenticate on the device before it sends its APDUs anyway
    /// (the card then releases no cryptogram).
    public var readyTimeout: Duration
    /// The NFC link's deadlines and limits.
    public var link: NFCLinkLimits
    /// Authorization attempts with the same STAN (the first included) when no answer comes.
    public var authorizationAttempts: Int
    /// How long one authorization attempt may take.
    public var attemptTimeout: Duration
    /// The wait before a retry.
    public var retryBackoff: Duration
    /// Reversal attempts before the reversal is left pending for the next start.
    public var reversalAttempts: Int

    public init(
        readyTimeout: Duration = .seconds(30), link: NFCLinkLimits = NFCLinkLimits(), authorizationAttempts: Int = 3,
        attemptTimeout: Duration = .seconds(10), retryBackoff: Duration = .milliseconds(200), reversalAttempts: Int = 3
    ) {
        self.readyTimeout = readyTimeout
        self.link = link
        self.authorizationAttempts = max(1, authorizationAttempts)
        self.attemptTimeout = attemptTimeout
        self.retryBackoff = retryBackoff
        self.reversalAttempts = max(1, reversalAttempts)
    }
}

/// How long the parts of a charge took.
public struct ChargeTimings: Sendable, Hashable, Encodable {
    /// Field on to field off (the tap), in microseconds; nil when no device joined.
    public let tapMicroseconds: Int64?
    /// The round trip of each APDU exchange, in microseconds, in order.
    public let exchangeMicroseconds: [Int64]
    /// First authorization request to its answer, in microseconds; nil when none was sent or answered.
    public let authorizationMicroseconds: Int64?
}

/// The end of a charge at the terminal: approved or declined, with the response code and a reason for
/// the display and the receipt. Codes from the issuer, network or acquirer are ISO 8583's (`00`, `51`,
/// `88`, ...); the terminal's own declines use EMV's terminal-generated codes: `Z1` (declined before going
/// online: no device, no authorization, the card refused) and `Z3` (no answer from the acquirer).
public struct ChargeResult: Sendable, CustomStringConvertible, Encodable {
    public enum Outcome: String, Sendable, Hashable, Encodable {
        case approved, declined
    }

    public let outcome: Outcome
    public let responseCode: String
    public let reason: String
    public let terminalID: String
    public let systemTraceAuditNumber: String
    public let amount: Money
    public let approvalCode: String?
    /// The DPAN masked (first six, last four digits).
    public let maskedPAN: String?
    public let scheme: String?
    public let deviceKind: String?
    public let applicationTransactionCounter: Int?
    /// Authorization requests sent (retries share the STAN).
    public let attempts: Int
    /// For a charge that got no answer: whether the acquirer confirmed the reversal.
    public let reversed: Bool?
    public let timings: ChargeTimings

    public var isApproved: Bool { outcome == .approved }

    public var description: String {
        var text = "\(outcome) \(responseCode) \(amount)"
        if let scheme, let maskedPAN { text += " \(scheme) \(maskedPAN)" }
        if let approvalCode { text += " approval \(approvalCode)" }
        if outcome == .declined || reversed != nil { text += ": \(reason)" }
        return text
    }

    private enum CodingKeys: String, CodingKey {
        case outcome, responseCode, reason, terminalID = "terminalId", systemTraceAuditNumber = "stan", amount
        case minorUnits, currency, approvalCode, maskedPAN = "maskedPan", scheme, deviceKind
        case applicationTransactionCounter = "atc", attempts, reversed, timings
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(outcome, forKey: .outcome)
        try c.encode(responseCode, forKey: .responseCode)
        try c.encode(reason, forKey: .reason)
        try c.encode(terminalID, forKey: .terminalID)
        try c.encode(systemTraceAuditNumber, forKey: .systemTraceAuditNumber)
        try c.encode(amount.description, forKey: .amount)
        try c.encode(amount.minorUnits, forKey: .minorUnits)
        try c.encode(amount.currency.code, forKey: .currency)
        try c.encodeIfPresent(approvalCode, forKey: .approvalCode)
        try c.encodeIfPresent(maskedPAN, forKey: .maskedPAN)
        try c.encodeIfPresent(scheme, forKey: .scheme)
        try c.encodeIfPresent(deviceKind, forKey: .deviceKind)
        try c.encodeIfPresent(applicationTransactionCounter, forKey: .applicationTransactionCounter)
        try c.encode(attempts, forKey: .attempts)
        try c.encodeIfPresent(reversed, forKey: .reversed)
        try c.encode(timings, forKey: .timings)
    }

    /// What a response code means, for a decline without a reason from the network.
    public static func meaning(of code: String) -> String {
        switch code {
        case "00": "approved"
        case "05": "do not honour"
        case "14": "no such card or token"
        case "51": "insufficient funds"
        case "54": "expired card or token"
        case "57": "not permitted for this card"
        case "61": "above the amount limit"
        case "62": "restricted card (suspended or deleted token)"
        case "88": "cryptographic failure (cryptogram or ATC)"
        case "91": "issuer unavailable"
        case "96": "system malfunction"
        case "Z1": "declined before going online"
        case "Z3": "unable to go online"
        default: "declined"
        }
    }
}

/// A point-of-sale terminal: it reads a phone or watch over the NFC link with the `EMV` kernel and sends
/// the online authorization to its acquirer.
///
/// Guarantees:
/// - every charge gets a fresh STAN, written with the journal line before the tap; the terminal ID and STAN
///   are the authorization's idempotency key;
/// - the journal line is marked `sent` (durably) before the authorization goes out; a retry after a timeout
///   reuses the key; when no answer comes after ``TerminalPolicy/authorizationAttempts``, a reversal is sent
///   (and left pending, to be sent again by ``recover()``, until the acquirer confirms it);
/// - the terminal only ever handles a DPAN, keeps it in memory for the request, and stores and logs it
///   masked (first six, last four digits); it never sees an FPAN;
/// - the outcome is a ``ChargeResult``; only a store or configuration failure throws.
public actor PaymentTerminal {
    public let settings: TerminalSettings
    private let store: any TerminalStore
    private let gateway: any AuthorizationGateway
    private let policy: TerminalPolicy
    private let clock: any WallClock
    private let random: any RandomSource
    private let logger: Logger
    private var charging = false

    public init(
        settings: TerminalSettings, store: any TerminalStore, gateway: any AuthorizationGateway,
        policy: TerminalPolicy = TerminalPolicy(), clock: any WallClock = SystemClock(),
        random: any RandomSource = SystemRandom(), logger: Logger = .disabled
    ) {
        self.settings = settings
        self.store = store
        self.gateway = gateway
        self.policy = policy
        self.clock = clock
        self.random = random
        self.logger = logger.labeled("terminal").with(["terminal": .string(settings.terminalID)])
    }

    /// Charges `amount` to the device whose antenna listens at `antenna`. First sends the reversals an
    /// earlier run left pending. An amount in a currency the terminal does not charge in (see
    /// ``TerminalSettings/kernelConfiguration(for:)``) throws before anything is journaled or sent.
    public func charge(_ amount: Money, antenna: String) async throws -> ChargeResult {
        guard !charging else { throw TerminalError(.invalidArgument, "a charge is already in progress") }
        let configuration = try settings.kernelConfiguration(for: amount.currency)
        charging = true
        defer { charging = false }
        _ = try await recover()

        let polling = try settings.polling()
        var record = try await store.begin(
            terminalID: settings.terminalID, amountMinorUnits: amount.minorUnits, currency: amount.currency.code,
            startedAt: clock.now())
        let log = logger.with(["stan": .string(record.systemTraceAuditNumber)])
        log.info("charge started", metadata: ["amount": .string(amount.description)])

        // The tap.
        let tapStart = ContinuousClock.now
        let session: NFCReaderSession
        do {
            session = try await NFCReaderSession.open(antenna: antenna, polling: polling, limits: policy.link)
        } catch {
            log.notice("no card read", metadata: ["link": .string(error.code.description)])
            return try await finish(&record, amount, .declined, "Z1", Self.tapFailure(error), timings: nil)
        }
        record.deviceKind = session.join.kind.rawValue
        var authorizedAtTap = session.isReady
        if !authorizedAtTap {
            do {
                authorizedAtTap = try await session.waitUntilReady(timeout: policy.readyTimeout)
            } catch {
                await session.close()
                return try await finish(
                    &record, amount, .declined, "Z1", Self.tapFailure(error),
                    timings: Self.timings(tapStart, session, nil))
            }
        }
        log.info(
            "device in the field",
            metadata: ["device": .string(session.join.kind.rawValue), "authorized": .bool(authorizedAtTap)])
        let outcome: TerminalOutcome
        let parameters = TransactionParameters(amount: UInt64(amount.minorUnits), date: try transactionDate())
        do throws(EMVError) {
            let kernel = TerminalKernel(configuration: configuration, random: random)
            outcome = try await kernel.run(parameters, card: session)
        } catch {
            await session.close()
            return try await finish(
                &record, amount, .declined, "Z1", "the card link failed during the tap: \(error.code)",
                timings: Self.timings(tapStart, session, nil))
        }
        await session.close()
        let tapTimings = Self.timings(tapStart, session, nil)

        guard outcome.status == .onlineRequest, let card = outcome.card else {
            var reason = "no cryptogram: \(outcome.reason ?? outcome.status.description)"
            if let refusal = outcome.refusal { reason += " (\(Hex.encode(refusal.bytes)))" }
            if !authorizedAtTap { reason += "; the user did not authenticate on the device" }
            log.notice("declined at the tap", metadata: ["status": .string(outcome.status.description)])
            return try await finish(&record, amount, .declined, "Z1", reason, timings: tapTimings)
        }
        guard let dpan = try? PrimaryAccountNumber(card.pan) else {
            return try await finish(
                &record, amount, .declined, "Z1", "the card released an unusable PAN", timings: tapTimings)
        }
        record.maskedPAN = dpan.masked
        record.scheme = card.scheme.description
        record.applicationTransactionCounter = Int(card.atc)

        // Online: the journal says `sent` before anything goes out.
        let request = AuthorizationRequest(
            terminalID: settings.terminalID, systemTraceAuditNumber: record.systemTraceAuditNumber,
            merchantID: settings.merchantID, pan: dpan, expiry: card.expiry,
            panSequenceNumber: card.panSequenceNumber ?? 0,
            amount: amount, scheme: card.scheme, cryptogram: card.cryptogram, applicationTransactionCounter: card.atc,
            chipData: card.field55Bytes, transmittedAt: clock.now())
        record.state = .sent
        record.updatedAt = clock.now()
        try await store.update(record)
        log.info(
            "authorization request", metadata: ["card": .describing(dpan), "atc": .integer(Int(card.atc))])

        let onlineStart = ContinuousClock.now
        var mayHaveArrived = false
        var lastFailure = ""
        for attempt in 1...policy.authorizationAttempts {
            record.attempts = attempt
            if attempt > 1 { try? await Task.sleep(for: policy.retryBackoff) }
            let gateway = gateway
            let result = await Self.withDeadline(policy.attemptTimeout) { try await gateway.authorize(request) }
            switch result {
            case .some(.success(let response)):
                let elapsed = Self.microseconds(ContinuousClock.now - onlineStart)
                let timings = ChargeTimings(
                    tapMicroseconds: tapTimings.tapMicroseconds, exchangeMicroseconds: tapTimings.exchangeMicroseconds,
                    authorizationMicroseconds: elapsed)
                record.approvalCode = response.approvalCode
                log.info(
                    "authorization answer",
                    metadata: ["code": .string(response.responseCode), "attempt": .integer(attempt)])
                return try await finish(
                    &record, amount, response.isApproved ? .approved : .declined, response.responseCode,
                    response.declineReason.map(CardNumberScrubber.scrub)
                        ?? ChargeResult.meaning(of: response.responseCode),
                    timings: timings)
            case .some(.failure(let error as TerminalError)) where error.code == .gatewayUnreachable:
                lastFailure = "the acquirer is unreachable"
                log.warning("acquirer unreachable", metadata: ["attempt": .integer(attempt)])
            case .some(.failure(let error as TerminalError)) where error.code == .gatewayRefused:
                log.warning("acquirer refused the request", metadata: ["attempt": .integer(attempt)])
                if !mayHaveArrived {
                    return try await finish(
                        &record, amount, .declined, "96",
                        "the acquirer refused the request: \(CardNumberScrubber.scrub(error.message))",
                        timings: tapTimings)
                }
                lastFailure = "the acquirer refused the retry"
            case .some(.failure):
                mayHaveArrived = true
                lastFailure = "the acquirer's answer was unusable"
                log.warning("acquirer answer unusable", metadata: ["attempt": .integer(attempt)])
            case .none:
                mayHaveArrived = true
                lastFailure = "no answer from the acquirer"
                log.warning("authorization timed out", metadata: ["attempt": .integer(attempt)])
            }
        }
        let attempts = record.attempts
        guard mayHaveArrived else {
            return try await finish(
                &record, amount, .declined, "Z3", "\(lastFailure) after \(attempts) attempts", timings: tapTimings)
        }
        // The authorization may be at the acquirer: undo it.
        record.state = .reversalPending
        record.updatedAt = clock.now()
        try await store.update(record)
        let reversed = await reverse(record, reason: "timeout", log: log)
        return try await finish(
            &record, amount, .declined, "Z3",
            "\(lastFailure) after \(attempts) attempts; "
                + (reversed ? "the authorization was reversed" : "the reversal is pending and will be sent again"),
            timings: tapTimings, reversed: reversed)
    }

    /// Settles what an earlier run left open: a tap that never sent a request is marked interrupted; a
    /// request without a recorded answer, or a reversal not yet confirmed, is reversed. Returns the lines
    /// it changed.
    @discardableResult
    public func recover() async throws -> [TransactionRecord] {
        var changed: [TransactionRecord] = []
        for var record in try await store.unresolved(terminalID: settings.terminalID) {
            let log = logger.with(["stan": .string(record.systemTraceAuditNumber)])
            switch record.state {
            case .started:
                record.state = .interrupted
                record.reason = "the terminal stopped during the tap"
            default:
                record.state = .reversalPending
                if await reverse(record, reason: "recovery", log: log) {
                    record.state = .reversed
                    record.responseCode = "Z3"
                    record.reason = "no answer recorded before the terminal stopped; the authorization was reversed"
                }
            }
            record.updatedAt = clock.now()
            try await store.update(record)
            changed.append(record)
        }
        return changed
    }

    // MARK: Helpers

    /// Sends the reversal of `record` until the acquirer confirms it or the attempts run out.
    private func reverse(_ record: TransactionRecord, reason: String, log: Logger) async -> Bool {
        guard let currency = try? Currency(record.currency) else { return false }
        let request = ReversalRequest(
            terminalID: record.terminalID, systemTraceAuditNumber: record.systemTraceAuditNumber,
            merchantID: settings.merchantID, amountMinorUnits: record.amountMinorUnits,
            currency: currency.numericString, reason: reason)
        for attempt in 1...policy.reversalAttempts {
            if attempt > 1 { try? await Task.sleep(for: policy.retryBackoff) }
            let gateway = gateway
            if case .some(.success(let answer)) = await Self.withDeadline(
                policy.attemptTimeout,
                {
                    try await gateway.reverse(request)
                })
            {
                log.notice(
                    "reversal confirmed", metadata: ["found": .bool(answer.reversed), "reason": .string(reason)])
                return true
            }
            log.warning("reversal not confirmed", metadata: ["attempt": .integer(attempt)])
        }
        return false
    }

    private func finish(
        _ record: inout TransactionRecord, _ amount: Money, _ outcome: ChargeResult.Outcome, _ code: String,
        _ reason: String, timings: ChargeTimings?, reversed: Bool? = nil
    ) async throws -> ChargeResult {
        let reason = CardNumberScrubber.scrub(reason)
        switch (outcome, reversed) {
        case (_, .some(true)): record.state = .reversed
        case (_, .some(false)): record.state = .reversalPending
        case (.approved, nil): record.state = .approved
        case (.declined, nil): record.state = .declined
        }
        record.responseCode = code
        record.reason = reason
        record.updatedAt = clock.now()
        try await store.update(record)
        logger.with(["stan": .string(record.systemTraceAuditNumber)]).info(
            "charge \(outcome.rawValue)", metadata: ["code": .string(code), "reason": .string(reason)])
        return ChargeResult(
            outcome: outcome, responseCode: code, reason: reason, terminalID: record.terminalID,
            systemTraceAuditNumber: record.systemTraceAuditNumber, amount: amount, approvalCode: record.approvalCode,
            maskedPAN: record.maskedPAN, scheme: record.scheme, deviceKind: record.deviceKind,
            applicationTransactionCounter: record.applicationTransactionCounter, attempts: record.attempts,
            reversed: reversed,
            timings: timings
                ?? ChargeTimings(tapMicroseconds: nil, exchangeMicroseconds: [], authorizationMicroseconds: nil))
    }

    /// The transaction date (tag 9A) from the wall clock, in UTC.
    private func transactionDate() throws -> TransactionDate {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        let parts = calendar.dateComponents([.year, .month, .day], from: clock.now())
        let two = { (value: Int?) in String(format: "%02d", (value ?? 0) % 100) }
        return try TransactionDate(yymmdd: two(parts.year) + two(parts.month) + two(parts.day))
    }

    private static func tapFailure(_ error: NFCLinkError) -> String {
        switch error.code {
        case .notInField: "no device in the field"
        case .deviceNotAllowed: "refused: only phones and watches pay at a terminal"
        case .refused:
            switch error.peerCode {
            case "deviceLocked": "the device is locked: nothing was presented"
            case "noCard": "the device has no card to present"
            case "busy": "the device is at another reader"
            default: "the device refused the field (\(error.peerCode ?? "refused"))"
            }
        case .timedOut: "the device did not answer in time"
        default: "the tap failed (\(error.code))"
        }
    }

    private static func timings(
        _ start: ContinuousClock.Instant, _ session: NFCReaderSession, _ authorization: Duration?
    ) -> ChargeTimings {
        ChargeTimings(
            tapMicroseconds: microseconds(ContinuousClock.now - start),
            exchangeMicroseconds: session.exchangeDurations.map(microseconds),
            authorizationMicroseconds: authorization.map(microseconds))
    }

    private static func microseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000 + attoseconds / 1_000_000_000_000
    }

    /// Runs `body` with a deadline: its result, or nil when the deadline passed first (the body is then
    /// cancelled and its late result ignored).
    static func withDeadline<T: Sendable>(
        _ deadline: Duration, _ body: @escaping @Sendable () async throws -> T
    ) async -> Result<T, any Error>? {
        let race = Race<Result<T, any Error>?>()
        return await withCheckedContinuation { continuation in
            race.start(continuation)
            let work = Task {
                let result: Result<T, any Error>
                do { result = .success(try await body()) } catch { result = .failure(error) }
                if race.finish(result) { race.cancelTimer() }
            }
            race.setTimer(
                Task {
                    try await Task.sleep(for: deadline)
                    if race.finish(nil) { work.cancel() }
                })
        }
    }
}

/// The first of two tasks to finish resumes the continuation.
private final class Race<T: Sendable>: @unchecked Sendable {
    // @unchecked: `continuation`, `timer` and `done` are guarded by `lock`.
    private let lock = NSLock()
    private var continuation: CheckedContinuation<T, Never>?
    private var timer: Task<Void, any Error>?
    private var done = false

    func start(_ continuation: CheckedContinuation<T, Never>) { lock.withLock { self.continuation = continuation } }

    /// Keeps the deadline's task so a result that comes first can cancel it (or cancels it at once).
    func setTimer(_ task: Task<Void, any Error>) {
        let finished = lock.withLock { () -> Bool in
            timer = task
            return done
        }
        if finished { task.cancel() }
    }

    func cancelTimer() { lock.withLock { timer }?.cancel() }

    /// Resumes with `value` if nothing did yet; returns whether this call did.
    @discardableResult
    func finish(_ value: T) -> Bool {
        let waiting = lock.withLock { () -> CheckedContinuation<T, Never>? in
            defer {
                continuation = nil
                done = true
            }
            return continuation
        }
        guard let waiting else { return false }
        waiting.resume(returning: value)
        return true
    }
}
