import Foundation
import Testing

@testable import OrchardCrypto

@Suite("UTC day and hour stamps without formatters")
struct CivilTimeTests {
    @Test func stampsMatchTheCalendar() {
        // 2024-02-29T23:59:59Z: a leap day, the last second of its hour.
        let leap = Date(timeIntervalSince1970: 1_709_251_199)
        #expect(CivilTime.dayStamp(leap) == "2024-02-29")
        #expect(CivilTime.hourStamp(leap) == "2024-02-29T23")
        #expect(CivilTime.dayStamp(Date(timeIntervalSince1970: 0)) == "1970-01-01")
        #expect(CivilTime.hourStamp(Date(timeIntervalSince1970: -1)) == "1969-12-31T23")
        #expect(CivilTime.dayStamp(Date(timeIntervalSince1970: 1e15)) == nil)  // beyond year 9999
    }

    @Test func hourStampsParseBackToTheStartOfTheirHour() {
        #expect(CivilTime.parseHourStamp("2024-02-29T23") == Date(timeIntervalSince1970: 1_709_247_600))
        for bad in [
            "2023-02-29T10", "2024-13-01T00", "2024-00-10T00", "2024-01-32T00", "2024-01-01T24", "2024-01-01 10",
            "2024-1-01T100", "2024-01-01T1", "２０２４-01-01T10", "+024-01-01T10", "",
        ] {
            #expect(CivilTime.parseHourStamp(bad) == nil, "\(bad)")
        }
    }
}
