import Acquirer
import Foundation
import NetworkAuthorizationAPI
import OrchardServices

/// The acquirer's onboarding over `acquirer.sqlite`, for `init`'s later steps (the merchant's).
struct StoreAcquirerOnboarding: AcquirerOnboarding {
    let store: SQLiteAcquirerStore
    let acquirer: Acquirer

    func onboardMerchant(
        identifier merchantIdentifier: String, name: String, categoryCode: String, countryCode: String,
        terminalIDs: [String]
    ) async throws {
        if var existing = try await store.merchant(id: merchantIdentifier) {
            existing.terminalIDs.formUnion(terminalIDs)
            try await store.saveMerchant(existing)
            return
        }
        try await acquirer.registerMerchant(
            MerchantAccount(
                merchantID: merchantIdentifier, name: name, categoryCode: categoryCode, countryCode: countryCode,
                terminalIDs: Set(terminalIDs)))
    }
}

/// The network a merchant's onboarding never reaches during `init`: the acquirer only stores accounts then.
struct OfflineNetwork: AcquiringNetwork {
    func authorize(
        _ request: NetworkAuthorizationAPI.AuthorizationRequest
    ) async throws(NetworkAuthorizationAPI.Failure) -> NetworkAuthorizationAPI.AuthorizationAnswer {
        throw NetworkAuthorizationAPI.Failure(.unavailable, "the network does not run during init")
    }

    func reverse(
        _ request: NetworkAuthorizationAPI.ReversalRequest
    ) async throws(NetworkAuthorizationAPI.Failure) -> NetworkAuthorizationAPI.ReversalAnswer {
        throw NetworkAuthorizationAPI.Failure(.unavailable, "the network does not run during init")
    }
}
