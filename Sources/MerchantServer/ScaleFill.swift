import CardBasics
package import Foundation
package import OrchardStore

extension MerchantOrderStore {
    /// Inserts an open order of `amountMinor` US cents for each of `orderIDs` in one transaction, through
    /// ``insert(_:in:)``: how `orchard bench scale` fills `merchant.sqlite`.
    package static func insertForBenchmark(
        orderIDs: [String], amountMinor: Int64, at now: Date, in store: Store
    )
        async throws
    {
        let amount = try Money(minorUnits: amountMinor, currency: try Currency("USD"))
        try await store.write { db in
            for id in orderIDs {
                try insert(
                    Order(
                        orderID: id, item: "bench", amount: amount, applicationData: Array(id.utf8), createdAt: now,
                        state: .open, chargeAttempts: 0, fulfilment: nil),
                    in: db)
            }
        }
    }

    /// The total of order `orderID` in minor units, nil when there is none (``order(_:in:)``, as a payment
    /// looks its order up).
    package static func amountForBenchmark(orderID: String, in store: Store) async throws -> Int64? {
        try await store.read { db in try order(orderID, in: db)?.amount.minorUnits }
    }
}
