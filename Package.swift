// swift-tools-version:6.0
// Orchard: an open implementation of the Apple Pay card payment system, in Swift on Linux.
// Only the toolchain and Debian's C libraries are used; no Swift package is fetched.
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "Orchard",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "orchard", targets: ["orchard"]),
        // What a merchant, wallet or token-service builder imports; their public API is recorded in api/ (the four
        // documented ones) and versioned in CHANGELOG.md. Every other target is Orchard's own and not a product.
        .library(name: "MerchantKit", targets: ["MerchantKit"]),
        .library(name: "PaymentToken", targets: ["PaymentToken"]),
        .library(name: "EMV", targets: ["EMV"]),
        .library(name: "OrchardCrypto", targets: ["OrchardCrypto"]),
        .library(name: "OrchardX509", targets: ["OrchardX509"]),
        .library(name: "CardBasics", targets: ["CardBasics"]),
        // The domain-association file a web merchant hosts, and the Pay server's web merchant routes.
        .library(name: "WebMerchantAPI", targets: ["WebMerchantAPI"]),
        // For the fuzz package (Fuzz/Package.swift) only: the parsers of bytes from outside.
        .library(name: "PaymentCredential", targets: ["PaymentCredential"]),
        .library(name: "NFCLink", targets: ["NFCLink"]),
        .library(name: "DeviceProcess", targets: ["DeviceProcess"]),
        .library(name: "RelayAPI", targets: ["RelayAPI"]),
    ],
    targets: [
        // C libraries from Debian (scripts/bootstrap installs them).
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        // libpq, the PostgreSQL client: the store's second backend, for server parties on a shared database.
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        // What Swift cannot call directly: variadic functions, function-like macros.
        .target(name: "CShims", dependencies: ["COpenSSL", "CSQLite"]),
        // HTTP: libevent's evhttp with bufferevent_openssl (server), libcurl (client), and their shims.
        .systemLibrary(name: "CLibevent", pkgConfig: "libevent_openssl", providers: [.apt(["libevent-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .target(name: "CHTTPShims", dependencies: ["COpenSSL", "CLibevent", "CCurl"]),

        // Swift API over OpenSSL: primitives, keys, ciphers, KDFs, EMV-era DES.
        .target(name: "OrchardCrypto", dependencies: ["COpenSSL", "CShims"], swiftSettings: strict),
        // DER/BER in Swift, X.509 certificates and CSRs, CMS SignedData.
        .target(name: "OrchardX509", dependencies: ["OrchardCrypto", "COpenSSL", "CShims"], swiftSettings: strict),
        // Contactless EMV: TLV, APDU, DOL, key derivation, cryptograms, card applet, terminal kernel.
        .target(name: "EMV", dependencies: ["OrchardCrypto", "CardBasics"], swiftSettings: strict),
        // The card basics every party shares: card number, expiry, CVV, network, ISO 4217 currencies, amounts.
        .target(name: "CardBasics", dependencies: ["OrchardCrypto"], swiftSettings: strict),
        // Structured JSON-line logging and typed redaction (keys, cryptograms; card numbers are CardBasics').
        .target(name: "OrchardLogging", dependencies: ["CardBasics", "OrchardCrypto"], swiftSettings: strict),
        // Access policies as plain values: who may call a route and which request fields must name the caller.
        // Contract modules declare them, OrchardHTTP's router enforces them (no dependencies).
        .target(name: "AccessPolicy", swiftSettings: strict),
        // The service runtime: HTTPS server and client with mutual TLS, routing, error mapping, shutdown.
        .target(
            name: "OrchardHTTP",
            dependencies: [
                "OrchardCrypto", "OrchardX509", "OrchardLogging", "COpenSSL", "CLibevent", "CCurl", "CHTTPShims", "CShims",
                "AccessPolicy", "OrchardRuntime",
            ],
            swiftSettings: strict
        ),

        // The Apple Pay token format, both directions (used by MerchantKit and the Pay server).
        .target(name: "PaymentToken", dependencies: ["OrchardCrypto", "OrchardX509"], swiftSettings: strict),
        // The merchant side: token verification and decryption.
        .target(
            name: "MerchantKit", dependencies: ["PaymentToken", "OrchardCrypto", "OrchardX509"], swiftSettings: strict),

        // Benchmarks: each figure through the Swift API and through the same EVP calls written in C, and the
        // end-to-end harnesses (HTTP with wrk, in store, in app) over real parties; `orchard bench` runs them.
        .target(name: "CBenchmarks", dependencies: ["COpenSSL"]),
        .target(
            name: "OrchardBenchmarks",
            dependencies: [
                "CardBasics", "EMV",
                "OrchardCrypto", "OrchardX509", "PaymentToken", "MerchantKit", "CBenchmarks", "COpenSSL", "CShims",
                "PaymentCredential", "OrchardHTTP", "OrchardLogging", "OrchardRuntime", "OrchardServices", "PayAPI",
                "PayServer", "MerchantServer", "Issuer", "TokenService", "TokenRequestorAPI",
                "Device", "DeviceProcess", "NFCLink", "SecureElement", "Wallet", "Terminal", "WebMerchantAPI",
                "OrchardStore", "AccessPolicy", "NetworkServer",
            ],
            swiftSettings: strict),
        // The network side: issuer (accounts, decisions), token service (vault, HSM, lifecycle), acquirer.
        // Pure domain libraries: persistence, transport and cryptogram checks come in through protocols.
        .target(name: "Issuer", dependencies: ["CardBasics", "OrchardCrypto"], swiftSettings: strict),
        .target(
            name: "TokenService",
            dependencies: [
                "CardBasics",
                "Issuer", "EMV", "OrchardCrypto", "OrchardLogging", "PaymentCredential", "NetworkAuthorizationAPI",
            ],
            swiftSettings: strict),
        // The acquirer reaches the network only through NetworkAuthorizationAPI's `AcquiringNetwork`.
        .target(
            name: "Acquirer",
            dependencies: ["CardBasics", "NetworkAuthorizationAPI", "Issuer", "OrchardCrypto", "OrchardLogging"],
            swiftSettings: strict),

        // The command line: argument parser, command registry, one file per command group.
        .target(
            name: "OrchardCLI",
            dependencies: [
                "CardBasics",
                "OrchardCrypto", "OrchardX509", "EMV", "PaymentToken", "MerchantKit", "OrchardHTTP", "OrchardLogging",
                "OrchardRuntime", "SecureElement", "Wallet", "Device", "DeviceProcess", "OrchardBenchmarks",
                "OrchardServices", "PayServer", "MerchantServer", "NetworkServer", "NFCLink", "Terminal", "PayAPI",
                "PayClient", "AppPayments", "TokenService", "Issuer", "PaymentCredential", "MerchantAPI",
                "TokenRequestorAPI", "DeviceControlAPI", "DemoApp", "AccessPolicy", "Acquirer", "WebMerchantAPI",
                "RelayAPI", "BrowserAgentAPI", "WebDriverClient", "OrchardStore",
            ],
            swiftSettings: strict
        ),
        // The demo app's purchase: order at the merchant server, payment request, sheet, token, payment.
        .target(
            name: "DemoApp", dependencies: ["AppPayments", "MerchantAPI", "OrchardHTTP", "PaymentToken"],
            swiftSettings: strict),
        .executableTarget(name: "orchard", dependencies: ["OrchardCLI", "OrchardCrypto"], swiftSettings: strict),
        // A W3C WebDriver client (chromedriver) over OrchardHTTP: the demo's headless Chromium and the browser tests'.
        .target(name: "WebDriverClient", dependencies: ["OrchardHTTP"], swiftSettings: strict),

        // SQLite (or PostgreSQL through libpq): connections, cached statements, migrations, transactions, one writer thread, idempotency keys.
        .target(
            name: "OrchardStore", dependencies: ["OrchardCrypto", "CSQLite", "CShims", "CLibPQ"], swiftSettings: strict),
        // Configuration and the deployment directory (no C imports).
        .target(name: "OrchardRuntime", dependencies: ["OrchardCrypto"], swiftSettings: strict),
        // The service contract: the protocol every service implements, `orchard init`, hosting and run records.
        .target(
            name: "OrchardServices",
            dependencies: [
                "OrchardRuntime", "OrchardCrypto", "OrchardX509", "OrchardStore", "OrchardHTTP", "OrchardLogging",
                "AccessPolicy",
            ],
            swiftSettings: strict
        ),
        // The Orchard Pay server (the seeds' "Apple Pay servers") and the demo merchant's server.
        .target(
            name: "PayServer",
            dependencies: [
                "CardBasics",
                "OrchardServices", "OrchardRuntime", "OrchardStore", "OrchardCrypto", "OrchardX509", "PaymentToken",
                "OrchardHTTP", "OrchardLogging", "PayAPI", "PaymentCredential", "TokenRequestorAPI", "AccessPolicy",
                "WebMerchantAPI", "RelayAPI", "OrchardWeb",
            ],
            swiftSettings: strict
        ),
        // The card network as one service: the SQLite stores of token service, issuer and acquirer, their HTTPS
        // routes, the notification outbox, the device-CA key check, configuration, `orchard init` and onboarding.
        .target(
            name: "NetworkServer",
            dependencies: [
                "CardBasics",
                "OrchardServices", "TokenService", "Issuer", "Acquirer", "OrchardRuntime", "OrchardStore",
                "OrchardCrypto", "OrchardX509", "OrchardHTTP", "OrchardLogging", "PayAPI", "AcquirerAPI",
                "TokenRequestorAPI", "NetworkAuthorizationAPI", "AccessPolicy", "PaymentCredential",
            ],
            swiftSettings: strict
        ),
        .target(
            name: "MerchantServer",
            dependencies: [
                "OrchardServices", "OrchardRuntime", "OrchardStore", "OrchardCrypto", "OrchardX509", "MerchantKit",
                "OrchardHTTP", "OrchardLogging", "PaymentToken", "PaymentCredential", "CardBasics", "AcquirerAPI",
                "MerchantAPI", "AccessPolicy", "WebMerchantAPI", "OrchardWeb",
            ],
            swiftSettings: strict
        ),
        // Test support, not a product: `orchard serve network` that kills itself at a chosen step of an
        // authorization (the exactly-once tests).
        .executableTarget(
            name: "orchard-network-crasher",
            dependencies: [
                "NetworkServer", "NetworkAuthorizationAPI", "OrchardServices", "OrchardRuntime", "OrchardLogging",
                "OrchardHTTP", "PayServer", "MerchantServer",
            ],
            path: "Tests/NetworkCrasher",
            swiftSettings: strict
        ),
        // Test support, not a product: a SQLite VFS that simulates power loss and disk errors (C), and its Swift API.
        .target(name: "CSQLiteCrashVFS", dependencies: ["CSQLite"], path: "Tests/CSQLiteCrashVFS"),
        .target(
            name: "SQLiteCrashVFS", dependencies: ["CSQLiteCrashVFS"], path: "Tests/SQLiteCrashVFS",
            swiftSettings: strict),
        // Test support, not a product: a child process the store tests kill with SIGKILL inside a transaction.
        .executableTarget(
            name: "orchard-store-crasher",
            dependencies: ["OrchardStore", "SQLiteCrashVFS"],
            path: "Tests/OrchardStoreCrasher",
            swiftSettings: strict
        ),

        // The device: Secure Enclave and Secure Element as actors (no SQL, no HTTP), the wallet's display data,
        // and the wiring of both to the device's SQLite file and storage key.
        .target(
            name: "SecureElement",
            dependencies: ["CardBasics", "OrchardCrypto", "EMV", "PaymentCredential", "RelayAPI"],
            swiftSettings: strict),
        .target(name: "Wallet", dependencies: ["CardBasics", "OrchardCrypto"], swiftSettings: strict),
        .target(
            name: "Device",
            dependencies: [
                "CardBasics",
                "SecureElement", "Wallet", "OrchardStore", "OrchardRuntime", "OrchardX509", "OrchardCrypto",
                "PaymentCredential",
            ],
            swiftSettings: strict
        ),
        // The wire formats between devices and the Pay server (only AccessPolicy, for its routes' policies: both sides
        // import it).
        .target(name: "PayAPI", dependencies: ["AccessPolicy"], swiftSettings: strict),
        // The relay between the devices of one account (the seeds' IDS): its routes, bodies and frame format (only
        // AccessPolicy: devices and the Pay server import it).
        .target(name: "RelayAPI", dependencies: ["AccessPolicy"], swiftSettings: strict),
        // The wire format of the network's acquiring routes (only AccessPolicy: terminals and merchant servers import
        // it, the network reads the same JSON into its own types).
        .target(name: "AcquirerAPI", dependencies: ["AccessPolicy"], swiftSettings: strict),
        // The wire format between apps and the merchant server (only AccessPolicy: apps import it, the merchant
        // server registers its routes from it and reads and writes its types).
        .target(name: "MerchantAPI", dependencies: ["AccessPolicy"], swiftSettings: strict),
        // Apple Pay on the web, merchant side at the Pay server: domain routes and the association-file format.
        .target(name: "WebMerchantAPI", dependencies: ["AccessPolicy", "OrchardCrypto"], swiftSettings: strict),
        // The wire format between the Pay server and the network's token-requestor routes (only AccessPolicy: both
        // sides import it, the network converts to and from its token service's types).
        .target(name: "TokenRequestorAPI", dependencies: ["AccessPolicy"], swiftSettings: strict),
        // What the acquirer asks of the card network (authorize, reverse) as a protocol the token service
        // implements, and the cryptogram both carry (no dependencies: the acquirer links no other network module).
        .target(name: "NetworkAuthorizationAPI", swiftSettings: strict),
        // The wire format of the device's control socket (the payment sheet carries AppPayments' types, APDUs
        // travel as OrchardCrypto's hex): the device process serves it, the CLI, apps and tests send it.
        .target(
            name: "DeviceControlAPI", dependencies: ["AppPayments", "OrchardCrypto", "RelayAPI"], swiftSettings: strict),
        // The app-side payment API, shaped like PassKit (no dependencies: apps see only this).
        .target(name: "AppPayments", swiftSettings: strict),
        // The browser's files, the `web/` directory as resources: orchard-pay.js, the browser agent's frame and sheet
        // pages, the demo store's pages (docs/web.md, "Apple Pay in a browser").
        .target(
            name: "OrchardWeb", dependencies: ["OrchardCrypto"], path: "web", exclude: ["README.md"],
            resources: [.copy("jsapi"), .copy("agent"), .copy("store")], swiftSettings: strict),
        // The browser agent's frame and sheet page ↔ its server in the device process: routes, secrets, bodies.
        .target(
            name: "BrowserAgentAPI", dependencies: ["AccessPolicy", "DeviceControlAPI"], swiftSettings: strict),
        // The device's client of the Pay server: registration, adding a card, the owner's lifecycle actions and
        // token-status notifications.
        .target(
            name: "PayClient",
            dependencies: [
                "CardBasics",
                "PayAPI", "Device", "OrchardHTTP", "OrchardX509", "OrchardCrypto", "OrchardRuntime", "OrchardServices",
                "AppPayments", "SecureElement", "Wallet", "PaymentCredential", "DeviceControlAPI", "WebMerchantAPI",
                "RelayAPI",
            ],
            swiftSettings: strict
        ),
        // The device process: the control API on the device's Unix socket (HTTP/1.1 JSON, server and client).
        .target(
            name: "DeviceProcess",
            dependencies: [
                "Device", "NFCLink", "OrchardRuntime", "EMV", "OrchardHTTP", "OrchardCrypto", "PayClient",
                "AppPayments", "SecureElement", "Wallet", "OrchardX509", "CardBasics", "PayAPI", "DeviceControlAPI",
                "BrowserAgentAPI", "OrchardWeb", "OrchardLogging", "WebMerchantAPI", "AccessPolicy", "RelayAPI",
            ],
            swiftSettings: strict),
        // Test support, not a product: a device process the device tests kill with SIGKILL while it releases
        // cryptograms.
        .executableTarget(
            name: "orchard-device-crasher",
            dependencies: ["Device", "SecureElement", "EMV", "OrchardRuntime", "OrchardCrypto", "SQLiteCrashVFS"],
            path: "Tests/DeviceCrasher",
            swiftSettings: strict
        ),

        // The NFC link between a terminal's reader and a device's antenna: framed APDUs on a local Unix socket.
        .target(name: "NFCLink", dependencies: ["EMV", "OrchardCrypto", "OrchardRuntime"], swiftSettings: strict),

        // The point-of-sale terminal: settings, STAN and journal in DIR/terminal.sqlite, the EMV kernel over the NFC
        // link, online authorization through an acquirer gateway (with retries and reversals).
        .target(
            name: "Terminal",
            dependencies: [
                "EMV", "NFCLink", "OrchardCrypto", "OrchardLogging", "OrchardStore", "OrchardRuntime", "OrchardHTTP",
                "CardBasics", "AcquirerAPI",
            ],
            swiftSettings: strict
        ),

        // Test data copied from ../shared (see Tests/Fixtures/README.md for sources and licences).
        .target(
            name: "OrchardFixtures",
            path: "Tests/Fixtures",
            exclude: ["README.md"],
            resources: [
                .copy("wycheproof"), .copy("emv"), .copy("apple-pay"), .copy("crypto"), .copy("fuzz-regressions"),
                .copy("pki-test"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "OrchardCryptoTests", dependencies: ["OrchardCrypto", "OrchardFixtures"], swiftSettings: strict),
        .testTarget(
            name: "OrchardX509Tests",
            dependencies: ["OrchardX509", "OrchardCrypto", "OrchardFixtures"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "EMVTests", dependencies: ["EMV", "OrchardCrypto", "OrchardFixtures"], swiftSettings: strict),
        .testTarget(
            name: "MerchantKitTests",
            dependencies: ["MerchantKit", "PaymentToken", "OrchardCrypto", "OrchardX509", "OrchardFixtures"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "OrchardBenchmarksTests", dependencies: ["OrchardBenchmarks", "OrchardCrypto"], swiftSettings: strict),
        // Test doubles (cryptogram check, device CA) and the in-memory network, shared by the network's tests.
        .target(
            name: "CommandTestSupport", dependencies: ["OrchardRuntime"], path: "Tests/CommandTestSupport",
            swiftSettings: strict),
        // Test cards and devices for the device and device-process tests.
        .target(
            name: "DeviceTestSupport",
            dependencies: [
                "CardBasics",
                "Device", "EMV", "OrchardCrypto", "OrchardRuntime", "PaymentCredential", "SecureElement", "Wallet",
                "OrchardX509",
            ],
            path: "Tests/DeviceTestSupport",
            swiftSettings: strict
        ),
        .target(
            name: "NetworkTestSupport",
            dependencies: [
                "CardBasics",
                "TokenService", "Issuer", "EMV", "OrchardCrypto", "PaymentCredential", "NetworkAuthorizationAPI",
            ],
            path: "Tests/NetworkTestSupport",
            swiftSettings: strict
        ),
        .testTarget(
            name: "IssuerTests", dependencies: ["CardBasics", "Issuer", "OrchardCrypto"], swiftSettings: strict),
        .testTarget(
            name: "TokenServiceTests",
            dependencies: [
                "CardBasics",
                "TokenService", "Issuer", "EMV", "OrchardCrypto", "OrchardFixtures", "NetworkTestSupport",
                "PaymentCredential", "SecureElement", "NetworkAuthorizationAPI",
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "AcquirerTests",
            dependencies: [
                "CardBasics",
                "Acquirer", "TokenService", "Issuer", "OrchardCrypto", "NetworkTestSupport", "NetworkAuthorizationAPI",
                "PaymentCredential",
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "NetworkServerTests",
            dependencies: [
                "CardBasics",
                "NetworkServer", "TokenService", "Issuer", "Acquirer", "OrchardStore", "OrchardX509", "OrchardCrypto",
                "NetworkTestSupport", "Device", "SecureElement", "EMV", "OrchardRuntime", "OrchardHTTP",
                "OrchardLogging", "AcquirerAPI", "PaymentCredential", "TokenRequestorAPI", "NetworkAuthorizationAPI",
                "OrchardServices", "Wallet",
                "DeviceTestSupport", "CommandTestSupport",
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "OrchardCLITests",
            dependencies: [
                "OrchardCLI", "OrchardFixtures", "NetworkServer", "OrchardStore", "CommandTestSupport", "OrchardCrypto",
                "OrchardX509", "orchard",
            ],
            swiftSettings: strict),
        .testTarget(
            name: "OrchardStoreTests",
            dependencies: [
                "CommandTestSupport", "OrchardStore", "OrchardCrypto", "orchard-store-crasher", "SQLiteCrashVFS",
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "OrchardServicesTests",
            dependencies: [
                "CardBasics",
                "CommandTestSupport",
                "OrchardServices", "PayServer", "MerchantServer", "NetworkServer", "TokenService",
                "Issuer", "OrchardRuntime", "OrchardCrypto", "OrchardX509",
                "OrchardStore", "MerchantKit", "PaymentToken", "OrchardCLI", "OrchardHTTP", "OrchardLogging", "Device",
                "SecureElement", "orchard", "DeviceProcess", "PaymentCredential", "PayClient", "PayAPI",
                "TokenRequestorAPI", "AccessPolicy", "SQLiteCrashVFS", "MerchantAPI", "WebMerchantAPI", "WebDriverClient",
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "OrchardRuntimeTests",
            dependencies: ["OrchardRuntime", "OrchardCrypto"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "OrchardLoggingTests", dependencies: ["CardBasics", "OrchardLogging"], swiftSettings: strict),
        .testTarget(name: "CardBasicsTests", dependencies: ["CardBasics"], swiftSettings: strict),
        // The layer check (scripts/check-layers, run by CI on the real manifest) refuses each kind of violation.
        .testTarget(name: "LayerCheckTests", dependencies: ["CommandTestSupport"], swiftSettings: strict),
        // The public API record and the doc-comment check (scripts/api-surface, scripts/check-doc-comments) refuse
        // an unrecorded change and an undocumented public symbol.
        .testTarget(name: "APISurfaceTests", dependencies: ["CommandTestSupport"], swiftSettings: strict),
        // The docs that run: every fenced block of README.md and docs/*.md tagged, every `sh` block run in a deployment
        // of its file's own, every `usage` block and `--help` text checked against the command line.
        .testTarget(
            name: "DocTests", dependencies: ["CommandTestSupport", "OrchardCLI", "orchard"], swiftSettings: strict),
        .testTarget(
            name: "OrchardHTTPTests",
            dependencies: [
                "AccessPolicy", "CardBasics", "OrchardRuntime",
                "CommandTestSupport", "OrchardHTTP", "OrchardLogging", "OrchardCrypto", "OrchardX509",
                "OrchardFixtures",
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SecureElementTests",
            dependencies: [
                "SecureElement", "OrchardCrypto", "OrchardFixtures", "PaymentCredential", "EMV", "RelayAPI",
            ],
            swiftSettings: strict
        ),
        .testTarget(name: "WalletTests", dependencies: ["CardBasics", "Wallet"], swiftSettings: strict),
        .testTarget(
            name: "DeviceProcessTests",
            dependencies: [
                "CardBasics",
                "DeviceTestSupport",
                "CommandTestSupport", "DeviceProcess", "Device", "SecureElement", "OrchardRuntime", "OrchardCrypto",
                "DeviceControlAPI", "EMV", "Wallet", "PaymentCredential", "orchard", "OrchardFixtures",
                "OrchardX509", "RelayAPI", "BrowserAgentAPI", "AppPayments",
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "NFCLinkTests", dependencies: ["NFCLink", "EMV", "OrchardCrypto", "OrchardFixtures"],
            swiftSettings: strict),
        .testTarget(
            name: "TerminalTests",
            dependencies: [
                "CardBasics",
                "CommandTestSupport",
                "Terminal", "NFCLink", "EMV", "OrchardCrypto", "OrchardLogging", "OrchardRuntime", "OrchardStore",
                "OrchardHTTP", "Device", "DeviceProcess", "SecureElement", "NetworkServer", "NetworkTestSupport",
                "Acquirer", "TokenService", "Issuer", "orchard", "PaymentCredential", "TokenRequestorAPI",
                "DeviceControlAPI", "NetworkAuthorizationAPI", "orchard-network-crasher", "AcquirerAPI",
                "OrchardServices", "PayServer", "MerchantServer", "DeviceTestSupport",
                "OrchardX509", "SQLiteCrashVFS",
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "ProvisioningTests",
            dependencies: [
                "CardBasics",
                "CommandTestSupport",
                "PayServer", "PayClient", "PayAPI", "Device", "DeviceProcess", "NetworkServer",
                "TokenService", "Issuer", "OrchardServices", "OrchardRuntime", "OrchardStore", "OrchardCrypto",
                "OrchardX509", "OrchardHTTP", "SecureElement", "Wallet", "AppPayments", "MerchantKit", "PaymentToken",
                "MerchantServer", "DeviceControlAPI", "orchard", "RelayAPI", "AccessPolicy", "MerchantAPI",
                "WebMerchantAPI",
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "DeviceTests",
            dependencies: [
                "CardBasics",
                "DeviceTestSupport", "CommandTestSupport",
                "Device", "SecureElement", "Wallet", "EMV", "OrchardStore", "OrchardRuntime", "OrchardX509",
                "OrchardCrypto", "orchard-device-crasher", "SQLiteCrashVFS", "PaymentCredential",
            ],
            swiftSettings: strict
        ),

        // The in-app and web payment credential: the format the Secure Element seals to the Pay server and the
        // remote cryptogram inside it (docs/in-app.md). No dependency on TokenService, PayServer or Device.
        .target(
            name: "PaymentCredential", dependencies: ["CardBasics", "OrchardCrypto", "EMV"], swiftSettings: strict),
        .testTarget(
            name: "PaymentCredentialTests",
            dependencies: ["PaymentCredential", "OrchardCrypto", "EMV", "OrchardFixtures"],
            swiftSettings: strict
        ),

        // Apple Pay on the web, part 1: identity certificates, association files, sandbox host names, domains.
        .testTarget(
            name: "WebMerchantTests",
            dependencies: [
                "PayServer", "MerchantServer", "OrchardServices", "OrchardRuntime", "OrchardStore", "OrchardCrypto",
                "OrchardX509", "OrchardHTTP", "WebMerchantAPI", "PaymentToken", "AccessPolicy", "OrchardLogging",
                "OrchardCLI", "CommandTestSupport", "OrchardFixtures",
            ],
            swiftSettings: strict
        ),

        // Apple Pay on the web in a real Chromium over WebDriver (Debian's chromium and chromedriver), and the browser
        // agent's contract.
        .testTarget(
            name: "BrowserTests",
            dependencies: [
                "CommandTestSupport", "OrchardHTTP", "OrchardWeb", "BrowserAgentAPI", "DeviceControlAPI", "orchard",
                "AccessPolicy", "AppPayments", "WebMerchantAPI", "WebDriverClient",
            ],
            swiftSettings: strict
        ),

        // The merchant server (orchard serve merchant) end to end: real tokens from the Pay server, charges through
        // the network's acquirer.
        .testTarget(
            name: "MerchantServerTests",
            dependencies: [
                "CardBasics",
                "MerchantServer", "MerchantKit", "PaymentToken", "PaymentCredential", "PayServer", "PayClient",
                "PayAPI",
                "Device", "SecureElement", "Wallet", "NetworkServer", "OrchardServices", "OrchardRuntime",
                "OrchardStore", "OrchardCrypto", "OrchardX509", "OrchardHTTP", "MerchantAPI", "AccessPolicy",
                "AcquirerAPI", "TokenRequestorAPI", "SQLiteCrashVFS", "CommandTestSupport", "WebMerchantAPI",
                "RelayAPI", "OrchardLogging",
            ],
            swiftSettings: strict
        ),
    ]
)
