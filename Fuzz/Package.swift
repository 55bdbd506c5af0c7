// swift-tools-version:5.3
// libFuzzer targets for Orchard's parsers. A separate package so `swift build` and `swift test` of the main
// package never build it; run with `Fuzz/run TARGET [SECONDS]`.
// (Tools 5.3 and plain `.target`s: an `.executableTarget` in a tools-6 manifest fails to link with
// `-parse-as-library`, and without that flag `LLVMFuzzerTestOneInput` is never called.)
import PackageDescription

let package = Package(
    name: "OrchardFuzz",
    dependencies: [.package(name: "Orchard", path: "..")],
    targets: [
        .target(name: "FuzzTokenJSON", dependencies: [.product(name: "PaymentToken", package: "Orchard")]),
        // DER/BER reader, X.509 certificate parser and the CMS SignedData verifier (OrchardX509).
        .target(
            name: "FuzzCMS",
            dependencies: [
                .product(name: "OrchardX509", package: "Orchard"), .product(name: "MerchantKit", package: "Orchard"),
            ]),
        // The domain-association file parser (WebMerchantAPI): hex, the flat JSON object, the canonical form.
        .target(name: "FuzzAssociationFile", dependencies: [.product(name: "WebMerchantAPI", package: "Orchard")]),
        // The merchant session and capability statement parsers (WebMerchantAPI).
        .target(name: "FuzzMerchantSession", dependencies: [.product(name: "WebMerchantAPI", package: "Orchard")]),
        .target(name: "FuzzCapabilityStatement", dependencies: [.product(name: "WebMerchantAPI", package: "Orchard")]),
        // BER-TLV decoder and DOL parser (EMV).
        .target(name: "FuzzEMVTLV", dependencies: [.product(name: "EMV", package: "Orchard")]),
        // Command/response APDU parsers and the card applet fed with APDU sequences (EMV).
        .target(name: "FuzzEMVAPDU", dependencies: [.product(name: "EMV", package: "Orchard")]),
        // The sealed payment credential: the signed layout inside the envelope and the credential (PaymentCredential).
        .target(
            name: "FuzzPaymentCredential",
            dependencies: [
                .product(name: "PaymentCredential", package: "Orchard"),
                .product(name: "OrchardCrypto", package: "Orchard"),
            ]),
        // The token service's card-data payload (PaymentCredential.CardDataPayload).
        .target(name: "FuzzCardData", dependencies: [.product(name: "PaymentCredential", package: "Orchard")]),
        // The Secure Element's personalisation and the signed install that wraps it (PaymentCredential).
        .target(name: "FuzzPersonalisation", dependencies: [.product(name: "PaymentCredential", package: "Orchard")]),
        // NFC link frames and their JSON payloads (NFCLink).
        .target(name: "FuzzNFCFrame", dependencies: [.product(name: "NFCLink", package: "Orchard")]),
        // The relay's frames between a user's devices and their routing header (RelayAPI).
        .target(name: "FuzzRelayFrame", dependencies: [.product(name: "RelayAPI", package: "Orchard")]),
        // The proximity advertisements devices broadcast on the simulated radio medium, and their body (RelayAPI).
        .target(
            name: "FuzzProximityAdvertisement", dependencies: [.product(name: "RelayAPI", package: "Orchard")]),
        // The device control socket's HTTP parser (DeviceProcess).
        .target(name: "FuzzControlHTTP", dependencies: [.product(name: "DeviceProcess", package: "Orchard")]),
        // What a page's frame sends the browser agent: its bodies and a begin()'s request (DeviceProcess).
        .target(name: "FuzzAgentMessage", dependencies: [.product(name: "DeviceProcess", package: "Orchard")]),
    ]
)
