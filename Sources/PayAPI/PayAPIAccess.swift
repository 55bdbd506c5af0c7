public import AccessPolicy

extension PayAPI.Route {
    /// `GET` → `{"merchantIdentifier", "displayName"}`: the merchant a merchant-identity certificate names.
    public static let merchantIdentity = "/v1/merchant/identity"
}

extension PayAPI {
    /// The Pay server's routes with their policy, as it registers them. A device's routes need its client
    /// certificate from the device CA (the device is the certificate's, never the body's: no route takes a
    /// device ID from the body); an account owner's lifecycle action names a device of the same account, which the
    /// route checks. The anonymous purchase report needs no certificate (it must not identify the device).
    public enum Declared {
        static let device = AccessPolicy.role(CallerRoles.device)

        public static let register = DeclaredRoute("POST", Route.register, device)
        public static let provisioningKey = DeclaredRoute("GET", Route.provisioningKey, device)
        public static let checkCard = DeclaredRoute("POST", Route.checkCard, device)
        public static let oneTimeCode = DeclaredRoute("POST", Route.oneTimeCode, device)
        public static let terms = DeclaredRoute("GET", Route.terms + ":id", device)
        public static let link = DeclaredRoute("POST", Route.link, device)
        public static let cards = DeclaredRoute("GET", Route.cards, device)
        public static let notifications = DeclaredRoute("GET", Route.notifications, device)
        public static let appEntitlements = DeclaredRoute("GET", Route.appEntitlements(":app"), device)
        public static func lifecycle(_ action: LifecycleAction) -> DeclaredRoute {
            DeclaredRoute("POST", Route.lifecycle(device: ":device", action: action), device)
        }
        public static let resumeChallenge = DeclaredRoute("POST", Route.resumeChallenge(device: ":device"), device)
        public static let credentialCertificate = DeclaredRoute("GET", Route.credentialCertificate, device)
        public static let paymentNonce = DeclaredRoute("POST", Route.paymentNonce, device)
        public static let paymentCredential = DeclaredRoute("POST", Route.paymentCredential, device)
        public static let anonymousPurchases = DeclaredRoute("POST", Route.anonymousPurchases, .anyone)
        /// A merchant's identity certificate from the Pay server's merchant CA.
        public static let merchantIdentity = DeclaredRoute(
            "GET", Route.merchantIdentity, .role(CallerRoles.merchantIdentity))

        /// Every route of the contract.
        public static var all: [DeclaredRoute] {
            [
                register, provisioningKey, checkCard, oneTimeCode, terms, link, cards, notifications, appEntitlements,
                credentialCertificate, paymentNonce, paymentCredential, anonymousPurchases, merchantIdentity,
            ] + LifecycleAction.allCases.map(lifecycle) + [resumeChallenge]
        }
    }
}
