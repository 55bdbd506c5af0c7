import AccessPolicy
import Foundation
import OrchardServices

extension MerchantService {
    /// The store's contactless terminal the acquirer knows from `init` (what `orchard terminal setup` sets up).
    public static let demoTerminalIDs = ["T0001"]
    /// The merchant's ISO 18245 category (5814, fast food: the demo sells coffee) and ISO 3166-1 country (840).
    public static let demoCategoryCode = "5814"
    public static let demoCountryCode = "840"

    /// The merchant's TLS client certificate for the network's acquiring routes (`pki/merchant/merchant-acquiring`).
    public static let acquiringClientFile = "merchant-acquiring"

    /// `init`: the merchant opens its account at the acquirer with its terminal, allowed to charge for its own
    /// merchant ID (the account and the Apple merchant ID share the name in the demo), and gets the client
    /// certificate (role `acquiring`, CN the merchant ID, UID `merchant:<ID>`, from the root) its server charges
    /// with (the acquirer charges only in the name it carries). Without a
    /// network in the deployment there is no acquirer to onboard at, and only the certificate is issued.
    static func onboardAtAcquirer(
        _ context: InitializationContext, merchantID: String, displayName: String
    ) async throws {
        if let acquirer = context.acquirer() {
            try await acquirer.onboardMerchant(
                identifier: merchantID, name: displayName, categoryCode: demoCategoryCode, countryCode: demoCountryCode,
                terminalIDs: demoTerminalIDs, appleMerchantIDs: [merchantID])
            context.trace(
                "merchant: account at the acquirer for \(merchantID) with terminal "
                    + demoTerminalIDs.joined(separator: ", ") + ", charging for merchant ID \(merchantID)")
        }
        try ServiceAccess.issueClientIdentity(
            named: acquiringClientFile, role: .acquiring, commonName: merchantID,
            identity: CallerIdentity(kind: CallerIdentity.merchant, identifier: merchantID), by: context.rootCA,
            to: context.directory, clock: context.clock, random: context.random)
        context.trace("merchant: client certificate pki/\(acquiringClientFile).pem (acquiring) for its charges")
    }
}
