import CardBasics
import EMV
public import Foundation
public import OrchardCrypto
import OrchardHTTP
public import OrchardRuntime
public import PayAPI

/// Where the device process puts what it learns of a purchase in a reader's field: the amount, its currency
/// and the terminal's country, nothing about the card or the device.
public protocol PurchaseAnalyticsSink: Sendable {
    /// A card released a cryptogram for `amountMinorUnits` in `currency` (ISO 4217 numeric) at a terminal in
    /// `country` (ISO 3166-1 numeric).
    func purchase(amountMinorUnits: UInt64, currency: UInt16, country: UInt16)
}

/// How a device makes `PayAPI`'s anonymous record from what it saw in the reader's field.
extension AnonymousPurchase {
    /// Buckets in whole units of the currency: `0-5`, `5-10`, `10-25`, `25-50`, `50-100`, `100-250`, `250+`.
    /// The currency's exponent comes from ISO 4217 (``Currency``; 2 for a currency it does not list).
    public init(amountMinorUnits: UInt64, currency: UInt16, country: UInt16, at date: Date) {
        let exponent = Currency(numericCode: Int(currency))?.exponent ?? 2
        var scale: UInt64 = 1
        for _ in 0..<exponent { scale *= 10 }
        let whole = amountMinorUnits / scale
        let bounds: [(UInt64, String)] = [
            (5, "0-5"), (10, "5-10"), (25, "10-25"), (50, "25-50"), (100, "50-100"), (250, "100-250"),
        ]
        self.init(
            amountBucket: bounds.first { whole < $0.0 }?.1 ?? "250+",
            hour: CivilTime.hourStamp(date) ?? "0000-01-01T00", region: String(format: "%03d", Int(country % 1000)))
    }

    /// What a GET PROCESSING OPTIONS (Visa-style) or GENERATE AC (Mastercard-style) that released a cryptogram
    /// says about the purchase: nil for every other exchange, and when the card answered without a cryptogram.
    public static func observed(
        command: [UInt8], response: [UInt8]
    ) -> (amountMinorUnits: UInt64, currency: UInt16, country: UInt16)? {
        guard response.count > 2, response.suffix(2) == [0x90, 0x00],
            let apdu = try? CommandAPDU(bytes: command), apdu.cla == 0x80,
            let answer = try? TLV.decode(response.dropLast(2)),
            answer.contains(where: { $0.tag == .applicationCryptogram || $0.first(.applicationCryptogram) != nil })
        else { return nil }
        let values: [TLV]
        switch apdu.ins {
        case 0xA8:
            guard let template = try? TLV.decodeSingle(apdu.data), template.tag == .commandTemplate,
                let split = try? ContactlessCard.visaPDOL.split(template.value)
            else { return nil }
            values = split
        case 0xAE:
            guard let split = try? ContactlessCard.mastercardCDOL1.split(apdu.data) else { return nil }
            values = split
        default:
            return nil
        }
        guard let amount = values.value(.amountAuthorised).flatMap({ EMVNumeric.value(ofNumeric: $0) }),
            let currency = values.value(.transactionCurrencyCode).flatMap({ EMVNumeric.value(ofNumeric: $0) }),
            let country = values.value(.terminalCountryCode).flatMap({ EMVNumeric.value(ofNumeric: $0) })
        else { return nil }
        return (amount, UInt16(truncatingIfNeeded: currency), UInt16(truncatingIfNeeded: country))
    }
}

/// Sends each purchase to the deployment's Pay server, anonymously:
/// - after a random delay, uniform in `0...maxDelay` (so the arrival time does not match the payment's);
/// - over TLS trusting only `DIR/pki/root/root-ca.pem`, **without** the device's client certificate, on a
///   connection of its own;
/// - holding only ``AnonymousPurchase``'s three fields, the hour taken from the injected clock at the tap.
///
/// The Pay server is found through its run record (`DIR/run/pay.json`) when the delay is over. With no Pay
/// server running, or any failure, the record is dropped: it is never retried, stored or allowed to hold up
/// a payment.
public final class PayAnalyticsReporter: PurchaseAnalyticsSink {
    /// What became of one record (for tests and the device's event line).
    public enum Delivery: String, Sendable {
        case sent, dropped
    }

    public let deployment: DeploymentDirectory
    public let maxDelay: Duration
    private let clock: any WallClock
    private let random: any RandomSource
    private let delivered: @Sendable (AnonymousPurchase, Delivery) -> Void

    /// The `ORCHARD_ANALYTICS_MAX_DELAY` variable (seconds, 0 for tests), else 10 seconds.
    public static func configuredMaxDelay(_ environment: [String: String]) -> Duration {
        if let text = environment["ORCHARD_ANALYTICS_MAX_DELAY"], let seconds = Double(text), seconds >= 0,
            seconds <= 3600
        {
            return .milliseconds(Int64(seconds * 1000))
        }
        return .seconds(10)
    }

    public init(
        deployment: DeploymentDirectory, maxDelay: Duration, clock: any WallClock = SystemClock(),
        random: any RandomSource = SystemRandom(),
        delivered: @escaping @Sendable (AnonymousPurchase, Delivery) -> Void = { _, _ in }
    ) {
        self.deployment = deployment
        self.maxDelay = maxDelay
        self.clock = clock
        self.random = random
        self.delivered = delivered
    }

    public func purchase(amountMinorUnits: UInt64, currency: UInt16, country: UInt16) {
        let record = AnonymousPurchase(
            amountMinorUnits: amountMinorUnits, currency: currency, country: country, at: clock.now())
        let delay = randomDelay()
        Task.detached { [self] in
            if delay > .zero { try? await Task.sleep(for: delay) }
            let outcome = await send(record)
            delivered(record, outcome)
        }
    }

    /// Sends `record` now, to the first running instance of the Pay server that takes it (an instance that cannot
    /// be reached or answers 503 is passed over). Returns whether it reached one.
    public func send(_ record: AnonymousPurchase) async -> Delivery {
        let instances = deployment.runningInstances(of: .pay).map(\.baseURL)
        guard !instances.isEmpty, let endpoints = try? FailoverEndpoints(instances),
            let root = try? deployment.readCertificate(named: "root-ca"),
            let client = try? HTTPClient(
                configuration: HTTPClientConfiguration(
                    trustedRootsPEM: root, connectTimeout: .seconds(2), requestTimeout: .seconds(5),
                    maxResponseBytes: 4096, maxAttempts: 1, maxCachedConnections: 1))
        else { return .dropped }
        defer { client.shutdown() }
        guard
            let request = try? HTTPClientRequest.json(.post, PayAPI.Route.anonymousPurchases, record),
            let response = try? await client.send(request, failover: endpoints),
            (200..<300).contains(response.status.code)
        else { return .dropped }
        return .sent
    }

    private func randomDelay() -> Duration {
        let milliseconds = maxDelay.components.seconds * 1000 + maxDelay.components.attoseconds / 1_000_000_000_000_000
        guard milliseconds > 0 else { return .zero }
        let draw = random.bytes(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return .milliseconds(Int64(draw % UInt64(milliseconds + 1)))
    }
}
