import OrchardLogging
import Testing

@Suite("Card-number-shaped identifiers")
struct CardNumberShapeTests {
    @Test func runsOfThirteenDigitsOrMoreAreRefused() {
        #expect(containsCardNumberShape("order-4111111111111111"))
        #expect(containsCardNumberShape("x4222222222222y"))  // 13 digits: the shortest Visa number
        #expect(!containsCardNumberShape("x123456789012y"))
        #expect(!containsCardNumberShape("order-12345678901-2"))
        #expect(!containsCardNumberShape("chk_0f51fb3b6dda68c57bab4d148da7b71d"))
        #expect(!containsCardNumberShape(""))
    }

    /// A UUID's last group can be twelve digits; it is still a UUID, and clients are told to use one.
    @Test func everyCanonicalUUIDPasses() {
        #expect(!containsCardNumberShape("5C4A2B10-3F3E-4F4B-9A1D-123456789012"))
        #expect(!containsCardNumberShape("12345678-1234-1234-1234-123456789012"))
    }
}
