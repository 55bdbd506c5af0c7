import CardBasics
import CommandTestSupport
import Device
import Foundation
import MerchantServer
import NetworkServer
import OrchardCrypto
import OrchardRuntime
import OrchardServices
import OrchardStore
import OrchardX509
import PayAPI
import PayClient
import PayServer
import SecureElement
import Testing
import TokenService
import Wallet

/// A deployment as `orchard init` makes it (network and Pay server), both services running in this process on
/// loopback over HTTPS, and devices made by the factory with passcode `123456`.
final class Sandbox: @unchecked Sendable {
    let path: String
    let deployment: DeploymentDirectory
    let connections: ServiceConnections
    let root: Certificate

    static let cvv = [
        "4111111111111111": "266", "5555555555554444": "667", "4000000000003220": "641",
        "4000000000000002": "346", "4000056655665556": "772",
    ]

    init() async throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("orchard-prov-\(UUID().uuidString)").path
        deployment = DeploymentDirectory(path: path)
        let registry = try ServiceRegistry([NetworkServerService(), PayService(), MerchantService()])
        _ = try await DeploymentInitializer.initialize(deployment, registry: registry)
        // Both services log at debug level; `close` scans their logs (V2).
        var environment = ServiceEnvironment()
        environment.variables.merge(LogScan.debugLogEnvironment) { current, _ in current }
        connections = try await ServiceConnections.connect(
            [.network, .pay], directory: deployment, registry: registry, environment: environment)
        root = try Certificate(pemEncoded: connections.rootCertificatePEM)
    }

    func close() async {
        await connections.close()
        // V2: no card number, DPAN, CVV, cryptogram, key or address in the network's or the Pay server's log.
        LogScan.expectCleanLogs(of: path, secrets: LogScan.Secrets(texts: Array(Self.cvv.keys)), requireDebug: true)
        try? FileManager.default.removeItem(atPath: path)
    }

    /// Makes a device with passcode 123456.
    @discardableResult
    func makeDevice(
        _ name: String, kind: DeviceKind, biometry: Biometry, account: String = "demo"
    ) async throws
        -> Device
    {
        _ = try Device.create(
            in: deployment, name: name, profile: try DeviceProfile(kind: kind, biometry: biometry, account: account))
        let device = try await Device.open(in: deployment, name: name)
        try await device.secureEnclave.setPasscode(SecureBytes(Array("123456".utf8)), current: nil)
        return device
    }

    func client(_ name: String) throws -> PayServerClient {
        try PayServerClient(
            baseURL: try connections.baseURL(of: .pay), trustedRootPEM: connections.rootCertificatePEM,
            identity: try Device.clientIdentity(of: name, in: deployment))
    }

    /// Registers device `name` with the Pay server through its own client certificate: its Secure Element
    /// certificate and Secure Enclave key, as the device does on its first sync.
    func register(_ name: String) async throws {
        let identity = try Device.identity(of: name, in: deployment)
        _ = try await client(name).register(
            secureElementCertificate: identity.certificate, enclavePublicKey: identity.enclavePublicKey)
    }

    /// Adds a test card to `device` through the Pay server.
    func addCard(
        _ pan: String, to device: Device, otp: String? = nil, key: String = AddCardFlow.newIdempotencyKey()
    ) async throws -> AddCardFlow.Outcome {
        let flow = AddCardFlow(
            client: try client(device.name), root: root, deviceID: device.name,
            secureElementCertificate: try Device.identity(of: device.name, in: deployment).certificate,
            enclavePublicKey: try Device.identity(of: device.name, in: deployment).enclavePublicKey)
        return try await flow.run(
            card: try CardEntry(
                number: pan, expiry: "12/34", verificationValue: Self.cvv[pan] ?? "000", cardholderName: "Alice Doe"),
            idempotencyKey: key, oneTimeCode: { _ in otp }, acceptTerms: { _ in true },
            install: { envelope, display in
                try await device.installCard(
                    envelope: envelope,
                    display: CardDisplayInput(
                        type: CardType(rawValue: display.type) ?? .credit, suffix: display.suffix,
                        displayName: display.description)
                ).id
            })
    }

    /// The network's tokens of a device (read from `network.sqlite` beside the running service).
    func networkTokens(of deviceID: String) async throws -> [TokenRecord] {
        let vault = try SQLiteTokenVaultStore(path: deployment.databasePath(for: .network))
        let tokens = try await vault.tokens(deviceID: deviceID)
        await vault.store.close()
        return tokens
    }

    /// Every file of the deployment (stores with their WAL and SHM, logs, keys), relative path → bytes.
    func files() throws -> [String: [UInt8]] {
        var result: [String: [UInt8]] = [:]
        let enumerator = FileManager.default.enumerator(atPath: path)
        while let relative = enumerator?.nextObject() as? String {
            var isDirectory: ObjCBool = false
            let full = path + "/" + relative
            guard FileManager.default.fileExists(atPath: full, isDirectory: &isDirectory), !isDirectory.boolValue,
                !relative.hasSuffix(".sock")
            else { continue }
            result[relative] = Array(try Data(contentsOf: URL(fileURLWithPath: full)))
        }
        return result
    }

    /// The files holding `digits` as ASCII or packed BCD.
    func filesHolding(_ digits: String) throws -> [String] {
        let ascii = Array(digits.utf8)
        var bcd: [UInt8] = []
        var index = digits.startIndex
        while index < digits.endIndex {
            let high = digits[index].wholeNumberValue ?? 0
            index = digits.index(after: index)
            let low = index < digits.endIndex ? digits[index].wholeNumberValue ?? 0 : 0xF
            if index < digits.endIndex { index = digits.index(after: index) }
            bcd.append(UInt8(high << 4 | low))
        }
        return try files().filter { _, bytes in Self.contains(bytes, ascii) || Self.contains(bytes, bcd) }.map(\.key)
            .sorted()
    }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, haystack.count >= needle.count else { return false }
        let first = needle[0]
        var index = 0
        while index <= haystack.count - needle.count {
            if haystack[index] == first, Array(haystack[index..<(index + needle.count)]) == needle { return true }
            index += 1
        }
        return false
    }
}
