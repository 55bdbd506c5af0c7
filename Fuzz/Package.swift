// swift-tools-version:5.3
// libFuzzer targets for Orchard's parsers. A separate package so `swift build` and `swift test` of the main
// package never build it. Run one with `Fuzz/run TARGET [SECONDS]`.
import PackageDescription

let package = Package(
    name: "OrchardFuzz",
    dependencies: [.package(name: "Orchard", path: "..")],
    targets: [
        // BER-TLV decoder and DOL parser (EMV).
        .target(name: "FuzzEMVTLV", dependencies: [.product(name: "EMV", package: "Orchard")]),
        // Command/response APDU parsers and the card applet fed with APDU sequences (EMV).
        .target(name: "FuzzEMVAPDU", dependencies: [.product(name: "EMV", package: "Orchard")]),
    ]
)
