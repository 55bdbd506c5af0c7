import CardBasics
import Foundation
import OrchardLogging
import Testing

@Suite("Logger")
struct LoggerTests {
    static let fixedTime = Date(timeIntervalSince1970: 1_764_439_464.123)

    func logger(_ sink: InMemoryLogSink, level: LogLevel = .info) -> Logger {
        Logger(label: "test", level: level, sink: sink, clock: { Self.fixedTime })
    }

    @Test func writesOneSortedJSONLinePerEvent() throws {
        let sink = InMemoryLogSink()
        let id = UUID(uuidString: "7D444840-9DC0-11D1-B245-5FFDCE74FAD2")!
        logger(sink).with(["request_id": .uuid(id)]).info(
            "paid /orders/7", metadata: ["amount": 1250, "ok": true, "tags": ["a", "b"], "ratio": 0.5])
        #expect(
            sink.lines == [
                #"{"amount":1250,"level":"info","logger":"test","message":"paid /orders/7","ok":true,"ratio":0.5,"#
                    + #""request_id":"7d444840-9dc0-11d1-b245-5ffdce74fad2","tags":["a","b"],"#
                    + #""time":"2025-11-29T18:04:24.123Z"}"#
            ])
        let object = try JSONSerialization.jsonObject(with: Data(sink.lines[0].utf8)) as? [String: Any]
        #expect(object?["message"] as? String == "paid /orders/7")
    }

    @Test func levelsBelowTheThresholdAreDroppedUnbuilt() {
        let sink = InMemoryLogSink()
        let log = logger(sink, level: .warning)
        nonisolated(unsafe) var built = false
        func expensive() -> LogMessage {
            built = true
            return "x"
        }
        log.info(expensive())
        log.debug("no")
        log.warning("yes")
        log.error("also")
        #expect(!built)
        #expect(sink.records.map(\.level) == [.warning, .error])
        #expect(log.isEnabled(.critical) && !log.isEnabled(.notice))
    }

    @Test func parsesLevelNames() throws {
        #expect(try LogLevel(parsing: "WARNING") == .warning)
        #expect(throws: LoggingError.self) { try LogLevel(parsing: "loud") }
        #expect(LogLevel.trace < LogLevel.critical)
    }

    @Test func escapesControlCharactersAndKeepsSlashes() {
        let sink = InMemoryLogSink()
        logger(sink).info("line1\nline2 \"q\" \\ /path\u{1}")
        #expect(sink.lines[0].contains(#""message":"line1\nline2 \"q\" \\ /path\u0001""#))
    }

    @Test func reservedKeysDoNotOverwriteFields() {
        let sink = InMemoryLogSink()
        logger(sink).info("m", metadata: ["level": "fake", "time": "fake"])
        #expect(sink.lines[0].contains(#""_level":"fake""#))
        #expect(sink.lines[0].contains(#""level":"info""#))
    }

    /// Logging a value that holds a card number writes it masked.
    @Test("V2: a value holding a card number is written masked")
    func aValueHoldingACardNumberIsWrittenMasked() throws {
        struct Payment {
            let pan: PrimaryAccountNumber
            let amount: Int
        }
        let sink = InMemoryLogSink()
        let payment = Payment(pan: try PrimaryAccountNumber("5555555555554444"), amount: 100)
        let log = logger(sink)
        log.info("charging \(payment)", metadata: ["payment": .describing(payment), "pan": .describing(payment.pan)])
        // Mistakes are caught too: the raw digits in a string, in metadata, and as an integer.
        log.error(
            "raw 5555555555554444", metadata: ["raw": "5555 5555 5555 4444", "n": .integer(5_555_555_555_554_444)])
        let text = sink.lines.joined(separator: "\n")
        #expect(!text.contains("5555555555554444"))
        #expect(!text.contains("5555 5555 5555 4444"))
        #expect(text.contains("555555******4444"))
        #expect(text.contains(#""pan":"555555******4444""#))
        #expect(text.contains(#""n":"555555******4444""#))
    }

    /// A card number used as a metadata key (at the top or inside an object) is masked too.
    @Test("V2/S10: a card number in a metadata key, at the top or nested, is written masked")
    func aCardNumberInAMetadataKeyIsWrittenMasked() throws {
        let sink = InMemoryLogSink()
        logger(sink).info(
            "balances",
            metadata: ["5555555555554444": 12, "cards": .object(["4111 1111 1111 1111": "active", "count": 1])])
        let line = try #require(sink.lines.first)
        #expect(!line.contains("5555555555554444") && !line.contains("4111 1111 1111 1111"))
        #expect(line.contains(#""555555******4444":12"#))
        #expect(line.contains(#""cards":{"4111 11** **** 1111":"active","count":1}"#))
    }

    @Test func standardErrorSinkWritesLines() {
        // Smoke test of the real sink: it must not crash or block.
        Logger(label: "stderr-test", sink: StandardErrorLogSink.shared).debug("not written at info")
    }
}
