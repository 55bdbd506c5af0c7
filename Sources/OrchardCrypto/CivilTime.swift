package import Foundation

/// Calendar arithmetic in UTC without Foundation's `Calendar` or formatters (proleptic Gregorian; H. Hinnant's
/// days-from-civil algorithms), so times convert exactly and fast: ASN.1 times, and the day and hour stamps of
/// the Pay server's tallies, which a `DateFormatter` (built on ICU) would make cost more than the request.
package enum CivilTime {
    package static func date(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int) -> Date? {
        guard (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year), hour < 24, minute < 60,
            second < 60
        else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        return Date(timeIntervalSince1970: Double(days * 86_400 + hour * 3_600 + minute * 60 + second))
    }

    package typealias Components = (year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int)

    /// The UTC calendar fields of `date`, or `nil` beyond about ±300 million years (or not finite).
    package static func components(_ date: Date) -> Components? {
        let interval = date.timeIntervalSince1970.rounded(.down)
        guard interval.isFinite, abs(interval) < 1e16 else { return nil }
        let seconds = Int(interval)
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let rest = seconds - days * 86_400
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        return (year, month, day, rest / 3_600, rest % 3_600 / 60, rest % 60)
    }

    package static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    package static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// `YYYY-MM-DD` of `date` in UTC (years 0 to 9999), or nil outside them.
    package static func dayStamp(_ date: Date) -> String? {
        guard let c = components(date), (0...9999).contains(c.year) else { return nil }
        return pad(c.year, 4) + "-" + pad(c.month, 2) + "-" + pad(c.day, 2)
    }

    /// `YYYY-MM-DDTHH` of `date` in UTC (years 0 to 9999), or nil outside them.
    package static func hourStamp(_ date: Date) -> String? {
        guard let c = components(date), (0...9999).contains(c.year) else { return nil }
        return pad(c.year, 4) + "-" + pad(c.month, 2) + "-" + pad(c.day, 2) + "T" + pad(c.hour, 2)
    }

    /// The start of the hour a `YYYY-MM-DDTHH` stamp names (exactly that form: ASCII digits, a real date).
    package static func parseHourStamp(_ text: String) -> Date? {
        let b = Array(text.utf8)
        guard b.count == 13, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"), b[10] == UInt8(ascii: "T") else {
            return nil
        }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for i in range {
                guard (0x30...0x39).contains(b[i]) else { return nil }
                value = value * 10 + Int(b[i] - 0x30)
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13)
        else { return nil }
        return date(year: year, month: month, day: day, hour: hour, minute: 0, second: 0)
    }

    private static func pad(_ value: Int, _ width: Int) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
}
