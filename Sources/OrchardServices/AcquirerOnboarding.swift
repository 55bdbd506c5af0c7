import Foundation

/// The acquirer's merchant onboarding, as `init` uses it: open a merchant's account with the terminals it
/// accepts payments from.
///
/// The network's init step provides it (``InitializationContext/provideAcquirer(_:)``); the merchant's step,
/// which runs later, onboards itself and its store's terminal. Without a network in the registry there is
/// none, and the merchant's step skips it.
public protocol AcquirerOnboarding: Sendable {
    /// Opens the account `merchantIdentifier` (name on statements, ISO 18245 category code, ISO 3166-1 numeric
    /// country) with `terminalIDs`, allowed to charge in-app and web payments made for `appleMerchantIDs`
    /// (`merchant.…`); onboarding an existing merchant again adds the terminals and merchant IDs it lacks.
    func onboardMerchant(
        identifier merchantIdentifier: String, name: String, categoryCode: String, countryCode: String,
        terminalIDs: [String], appleMerchantIDs: [String]
    ) async throws
}
