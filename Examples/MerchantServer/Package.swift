// swift-tools-version:6.0
// A merchant's own server code using Orchard's merchant SDK: verify and decrypt an Apple Pay token, check it
// against the order, and hand the processor what it needs. It depends on Orchard by path, as a checkout of
// this repository would; a merchant writes `.package(url: "https://…/orchard.git", from: "0.1.0")` instead.
import PackageDescription

let package = Package(
    name: "MerchantServer",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "CheckoutService", targets: ["CheckoutService"])
    ],
    dependencies: [
        // Named, so that the products below resolve whatever the checkout's folder is called (a path
        // dependency's identity is otherwise its folder name).
        .package(name: "Orchard", path: "../..")
    ],
    targets: [
        .target(
            name: "CheckoutService",
            dependencies: [
                .product(name: "MerchantKit", package: "Orchard"),
                .product(name: "PaymentToken", package: "Orchard"),
                // Only for the trust roots and the clock a test (or a sandbox) passes in.
                .product(name: "OrchardCrypto", package: "Orchard"),
                .product(name: "OrchardX509", package: "Orchard"),
            ]
        ),
        .testTarget(
            name: "CheckoutServiceTests",
            dependencies: [
                "CheckoutService",
                .product(name: "MerchantKit", package: "Orchard"),
                .product(name: "PaymentToken", package: "Orchard"),
                .product(name: "OrchardCrypto", package: "Orchard"),
                .product(name: "OrchardX509", package: "Orchard"),
            ],
            resources: [.copy("Fixtures")]
        ),
    ]
)
