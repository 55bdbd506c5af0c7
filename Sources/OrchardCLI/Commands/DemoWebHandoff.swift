import Device
import DeviceControlAPI
import DeviceProcess
import Foundation
import OrchardCrypto
import OrchardRuntime
import OrchardServices
import OrchardX509
import PayClient
import SecureElement
import WebDriverClient
import WebMerchantAPI

/// The demo's `web-handoff` rows (docs/handoff.md): a Mac without Touch ID and without a card buys in the demo store in
/// headless Chromium; its sheet lists the phone and the watch it hears on the radio medium, and the payment is
/// authorized on the phone (Face ID), then on the watch (double-click). The three devices are approved for each other
/// (their relay keys vouched for) and run their radio and relay loop in this process (``HandoffHost``).
enum DemoWebHandoff {
    static let channel = "web-handoff"
    /// The Mac that buys: no Touch ID, no card.
    static let mac = "demo-mac-handoff"
    static let passcode = "123456"

    /// The two rows, the phone's then the watch's; none (and a line on stderr) without Chromium.
    static func rows(
        deployment: DeploymentDirectory, connections: ServiceConnections, devices: [String: Device],
        context: CommandContext
    ) async throws -> [DemoInStore.Row] {
        guard let chromium = DemoWeb.locateChromium(context.environment) else {
            context.trace("Chromium was not found: no web-handoff rows (\(Chromium.installHint))")
            return []
        }
        guard let phone = devices["demo-phone"], let watch = devices["demo-watch"] else {
            throw CLIError.failure("the demo phone and watch are missing")
        }
        let trace: @Sendable (String) -> Void = { context.trace("  " + $0) }
        let computer = try await macWithoutTouchID(in: deployment, trace: trace)
        for paying in [phone, watch] {
            try await approve(paying, computer, deployment: deployment, connections: connections)
            trace("\(paying.name) and \(mac) approved for each other (relay keys vouched for by each Secure Enclave)")
        }
        let root = try Certificate(pemEncoded: connections.rootCertificatePEM)
        guard let payPort = connections.endpoints[.pay]?.port else { throw CLIError.failure("no Pay server") }
        let agent = try BrowserCommands.agentConfiguration(
            deployment: deployment, port: 0, handlerTimeout: .seconds(10), context: context, payPort: payPort)
        let tokenRoot = try DeploymentPKI.readCertificate(named: "token-root", from: deployment)
        var hosts: [HandoffHost] = []
        do {
            for (device, automatic) in [(computer, nil), (phone, "face-id"), (watch, "double-click")] {
                let name = device.name
                hosts.append(
                    try HandoffHost(
                        device: device, deployment: deployment,
                        automatic: try automatic.map { try AutoAuthentication(parsing: $0) },
                        // Each device checks merchant sessions itself (and marks them used) as its own.
                        sessions: device.name == mac
                            ? agent.sessions : try MerchantSessionCheck(tokenRoot: tokenRoot, clock: SystemClock()),
                        browserAgent: device.name == mac ? agent : nil,
                        payServer: { try? PaySession.client(device: name, in: deployment, connections: connections) },
                        connect: {
                            PaymentSheetService.PayServerConnection(
                                client: try PaySession.client(device: name, in: deployment, connections: connections),
                                root: root, close: {})
                        }, trace: { trace("\(name): " + $0) }))
            }
            let macHost = hosts[0]
            guard let agentPort = macHost.agentPort else {
                throw CLIError.failure("the Mac's browser agent is missing")
            }
            try await waitUntilNear(hosts, trace: trace)
            let orders = try await DemoWeb.inBrowser(
                deployment: deployment, connections: connections, chromium: chromium, agentPort: agentPort,
                context: context
            ) { browser in
                var orders: [String] = []
                for (paying, how) in [(phone.name, "Face ID"), (watch.name, "a double-click")] {
                    orders.append(try await buy(browser, with: paying, how: how, trace: trace))
                }
                return orders
            }
            for host in hosts { await host.stop() }
            hosts = []
            var rows: [DemoInStore.Row] = []
            for (order, paying) in zip(orders, [phone.name, watch.name]) {
                rows.append(
                    try await DemoWeb.paidRow(
                        orderID: order, channel: channel, device: paying, connections: connections))
            }
            return rows
        } catch {
            for host in hosts { await host.stop() }
            throw error
        }
    }

    /// The Mac: made by its factory without Touch ID for the demo account, its passcode set (kept between runs).
    static func macWithoutTouchID(
        in deployment: DeploymentDirectory, trace: @Sendable (String) -> Void
    ) async throws -> Device {
        if !Device.names(in: deployment).contains(mac) {
            _ = try Device.create(
                in: deployment, name: mac, profile: try DeviceProfile(kind: .mac, biometry: .none, account: "demo"))
            let device = try await Device.open(in: deployment, name: mac)
            try await device.secureEnclave.setPasscode(SecureBytes(Array(passcode.utf8)), current: nil)
            trace("factory: \(mac) (mac, no Touch ID, no card) of account demo; user: set its passcode")
            return device
        }
        return try await Device.open(in: deployment, name: mac)
    }

    /// `orchard device approve --name EXISTING --new NEW` in this process: each device's Secure Enclave vouches for
    /// the relay keys the other shows, and both publish theirs at the Pay server.
    static func approve(
        _ existing: Device, _ new: Device, deployment: DeploymentDirectory, connections: ServiceConnections
    ) async throws {
        for (voucher, subject) in [(existing, new), (new, existing)] {
            let shown = try DeviceCommands.answer(await DeviceControl(device: subject).send(GetRelayKeys()))
            let own = try DeviceCommands.answer(await DeviceControl(device: voucher).send(GetRelayKeys()))
            let signature = try DeviceCommands.answer(
                await DeviceControl(device: voucher).send(
                    VouchRelayDevice(
                        device: subject.name, encryptionKey: shown.encryptionKey, signingKey: shown.signingKey,
                        passcode: passcode)))
            let subjectIdentity = try Device.identity(of: subject.name, in: deployment)
            let subjectClient = try PaySession.client(device: subject.name, in: deployment, connections: connections)
            _ = try await subjectClient.register(
                secureElementCertificate: subjectIdentity.certificate,
                enclavePublicKey: subjectIdentity.enclavePublicKey)
            _ = try await subjectClient.publishRelayKeys(try DeviceCommands.relayKeys(shown))
            let identity = try Device.identity(of: voucher.name, in: deployment)
            let client = try PaySession.client(device: voucher.name, in: deployment, connections: connections)
            _ = try await client.register(
                secureElementCertificate: identity.certificate, enclavePublicKey: identity.enclavePublicKey)
            _ = try await client.publishRelayKeys(try DeviceCommands.relayKeys(own))
            _ = try await client.vouchRelayKeys(of: subject.name, signature: Array(signature.signature))
        }
    }

    /// Waits until the Mac hears the phone and the watch and each of them hears the Mac (their advertising keys came
    /// over the relay).
    static func waitUntilNear(_ hosts: [HandoffHost], trace: @Sendable (String) -> Void) async throws {
        let (computer, others) = (hosts[0], hosts.dropFirst())
        for _ in 0..<300 {
            let macHears = Set(computer.nearby)
            if others.count == macHears.count, others.allSatisfy({ $0.nearby.contains(mac) }) {
                trace("radio: \(mac) hears \(macHears.sorted().joined(separator: " and ")), and they hear it")
                return
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw CLIError.failure("the Mac and its phone and watch do not hear each other on the radio medium")
    }

    /// The store, Tea in the cart, Apple Pay; on the Mac's sheet the device `paying`, whose user authorizes at once;
    /// the confirmation: the order's identifier.
    static func buy(
        _ browser: DevToolsBrowser, with paying: String, how: String, trace: @Sendable (String) -> Void
    ) async throws -> String {
        try await browser.navigate("https://" + WebMerchantAPI.HostNames.store + "/")
        try await browser.wait("the Apple Pay button", until: "return document.body.dataset.applePay === 'available';")
        try await browser.click("button[data-item=Tea]")
        let store = try await browser.currentWindow
        let known = try await browser.windowHandles
        try await browser.click("#apple-pay")
        _ = try await browser.switchToNewWindow(besides: known)
        try await browser.wait(
            "\(paying) on the sheet", until: "return document.getElementById('handoff-\(paying)') !== null;")
        let offered = try await browser.string("return document.getElementById('handoff-\(paying)').innerText;")
        trace("Chromium: the Mac's sheet offers \(offered.split(separator: "\n").joined(separator: " "))")
        try await browser.click("#handoff-\(paying)")
        try await browser.wait("the Mac's sheet to finish", until: "return document.title === 'Apple Pay: Done';")
        trace("\(paying): authorized with \(how); the token went to the Mac and the store")
        try await browser.closeWindow()
        try await browser.switchTo(store)
        try await browser.wait("the confirmation", until: "return location.pathname === '/confirmation';")
        return try await browser.string("return new URLSearchParams(location.search).get('order') || '';")
    }
}
