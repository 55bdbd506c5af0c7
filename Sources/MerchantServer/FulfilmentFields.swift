import MerchantAPI

// What the merchant reads out of an app's contacts to fill a Fulfilment (not wire concerns: the contract only
// says which forms a contact may take).

extension MerchantAPI.Contact {
    /// The full name, else the given and family names joined.
    var recipientName: String? {
        if let full = name?.full, !full.isEmpty { return full }
        let parts = [givenName ?? name?.givenName, familyName ?? name?.familyName].compactMap { $0 }
            .filter { !$0.isEmpty }
        return parts.isEmpty ? nil : parts.joined(separator: " ")
    }
    var lines: [String]? {
        if let addressLines, !addressLines.isEmpty { return addressLines }
        guard let street = postalAddress?.street, !street.isEmpty else { return nil }
        return street.split(separator: "\n").map(String.init)
    }
    var city: String? { locality ?? postalAddress?.city }
    var area: String? { administrativeArea ?? postalAddress?.state }
    var postal: String? { postalCode ?? postalAddress?.postalCode }
    /// ISO 3166-1 alpha-2 (`country` counts only when it is two letters).
    var country: String? {
        let named = postalAddress?.country.flatMap { $0.count == 2 ? $0 : nil }
        return (countryCode ?? postalAddress?.isoCountryCode ?? named)?.uppercased()
    }

    /// Every string the merchant may keep of the contact, for the size checks.
    var strings: [String] {
        [
            givenName, familyName, name?.full, name?.givenName, name?.familyName, emailAddress, locality,
            administrativeArea, postalCode, countryCode, postalAddress?.street, postalAddress?.city,
            postalAddress?.state, postalAddress?.postalCode, postalAddress?.country, postalAddress?.isoCountryCode,
        ].compactMap { $0 } + (addressLines ?? [])
    }
}

extension MerchantAPI.Fulfilment {
    /// Whether nothing was kept (then the order stores no fulfilment).
    var isEmpty: Bool {
        recipientName == nil && addressLines == nil && locality == nil && administrativeArea == nil
            && postalCode == nil && countryCode == nil && receiptEmail == nil && shippingMethodIdentifier == nil
            && shippingMethodLabel == nil
    }
}
