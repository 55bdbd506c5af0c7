import Acquirer
import Foundation
import NetworkAuthorizationAPI
public import OrchardRuntime
import OrchardServices
import OrchardStore

/// The acquirer's onboarding over `acquirer.sqlite`, for `init`'s later steps (the merchant's).
struct StoreAcquirerOnboarding: AcquirerOnboarding {
    let store: SQLiteAcquirerStore
    let acquirer: Acquirer

    func onboardMerchant(
        identifier merchantIdentifier: String, name: String, categoryCode: String, countryCode: String,
        terminalIDs: [String], appleMerchantIDs: [String]
    ) async throws {
        if var existing = try await store.merchant(id: merchantIdentifier) {
            existing.terminalIDs.formUnion(terminalIDs)
            try await store.saveMerchant(existing)
        } else {
            try await acquirer.registerMerchant(
                MerchantAccount(
                    merchantID: merchantIdentifier, name: name, categoryCode: categoryCode, countryCode: countryCode,
                    terminalIDs: Set(terminalIDs)))
        }
        for appleMerchantID in appleMerchantIDs {
            try await acquirer.allowAppleMerchantID(appleMerchantID, forMerchant: merchantIdentifier)
        }
    }
}

extension NetworkServerService {
    /// `orchard merchant register --acquiring-account`: lets the acquiring account `merchantID` of the deployment
    /// in `directory` charge in-app and web payments made for `appleMerchantID`, in `acquirer.sqlite` directly
    /// (the running network reads it per authorization). Allowing it again is a no-op; an unknown account, a
    /// malformed ID or one another account already charges for throws `AcquirerError` and stores nothing
    /// (a deployment without a network has no acquirer: ``AcquirerError/Code/unknownMerchant``).
    public static func allowAppleMerchantID(
        _ appleMerchantID: String, forAcquiringAccount merchantID: String, in directory: DeploymentDirectory
    ) async throws {
        let location = try StoreSettings.location(for: .acquirer, in: directory)
        if case .file(let path) = location, !FileManager.default.fileExists(atPath: path) {
            throw AcquirerError(.unknownMerchant, "this deployment has no acquirer: `orchard init` with a network")
        }
        let store = try SQLiteAcquirerStore(location: location)
        let acquirer = Acquirer(acquirerID: acquirerID, store: store, network: OfflineNetwork())
        do {
            try await acquirer.allowAppleMerchantID(appleMerchantID, forMerchant: merchantID)
        } catch {
            await store.store.close()
            throw error
        }
        await store.store.close()
    }
}

/// The network a merchant's onboarding never reaches (during `init`, or from the command line): the acquirer
/// only stores accounts then.
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
