public import Device
import Foundation
import NFCLink
import OrchardHTTP
public import OrchardRuntime
import PayClient
import SecureElement
import Wallet

#if canImport(Glibc)
    import Glibc
#endif

/// What one device process runs with, checked when it is made: a value of this type is a configuration the
/// process can start from.
public struct DeviceProcessConfiguration: Sendable {
    /// The longest a payment sheet may wait for the user, and the longest interval between two syncs.
    public static let longest: Duration = .seconds(3600)

    public let deployment: DeploymentDirectory
    /// The device's name in the deployment.
    public let name: String
    /// In a field or on a payment sheet, the user's actions the device plays at once; nil: a person drives it.
    public let autoAuthentication: AutoAuthentication?
    /// A payment sheet not completed in this time is cancelled.
    public let sheetTimeout: Duration
    /// How often the Pay server's token-status notifications are applied.
    public let syncInterval: Duration
    /// The browser agent at `https://agent.orchard.test` (docs/web.md), or nil for none.
    public var browserAgent: BrowserAgentConfiguration?
    /// How long an advertisement heard on the radio medium keeps a device near (docs/handoff.md, "Proximity").
    public let proximityWindow: Duration

    /// Throws ``DeviceError/Code/invalidArgument`` when a duration is not from 1 second to ``longest``.
    public init(
        deployment: DeploymentDirectory, name: String, autoAuthentication: AutoAuthentication? = nil,
        sheetTimeout: Duration = .seconds(120), syncInterval: Duration = .seconds(5),
        proximityWindow: Duration = .seconds(5)
    ) throws(DeviceError) {
        for (label, duration) in [
            ("sheet timeout", sheetTimeout), ("sync interval", syncInterval), ("proximity window", proximityWindow),
        ]
        where duration < .seconds(1) || duration > Self.longest {
            throw DeviceError(.invalidArgument, "the \(label) is 1 to 3600 seconds")
        }
        self.deployment = deployment
        self.name = name
        self.autoAuthentication = autoAuthentication
        self.sheetTimeout = sheetTimeout
        self.syncInterval = syncInterval
        self.proximityWindow = proximityWindow
    }
}

/// The device process (`orchard device run`): the device's control API on DIR/devices/NAME/control.sock, its NFC
/// antenna for terminals (a phone or a watch), the payment-sheet service apps present to, and the sync of the Pay
/// server's token-status notifications, started together and stopped together.
public enum DeviceProcessRunner {
    /// Starts the device process for `configuration`, runs until SIGTERM or SIGINT, then stops every part and
    /// removes its sockets. Either every part starts or none is left running: a failure stops what had started
    /// before it is thrown.
    ///
    /// - Parameters:
    ///   - connect: the device's connection to the Pay server, opened when an app presents a payment sheet.
    ///   - output: one JSON line per event (`listening`, `antenna`, field and sheet events, `stopped`).
    ///   - trace: human-readable progress.
    public static func run(
        configuration: DeviceProcessConfiguration,
        connect: @escaping @Sendable () async throws -> PaymentSheetService.PayServerConnection,
        output: @escaping @Sendable (String) -> Void, trace: @escaping @Sendable (String) -> Void
    ) async throws {
        let deployment = configuration.deployment
        let name = configuration.name
        let automatic = configuration.autoAuthentication
        let device = try await Device.open(in: deployment, name: name)
        let path = Device.controlSocketPath(of: name, in: deployment)
        let antenna = try NFCFieldSession.startAntenna(
            device: device, deployment: deployment, autoAuthentication: automatic,
            events: { event in if let line = jsonLine(event) { output(line) } })
        let sheets = PaymentSheetService(
            device: device, automatic: automatic, timeout: configuration.sheetTimeout, connect: connect,
            events: { event in if let line = jsonLine(event) { output(line) } }, trace: trace)
        let relayAlerts = RelayJoinAlerts()
        let handoff = Handoff(
            device: device, deployment: deployment, window: configuration.proximityWindow, sheets: sheets,
            sessions: configuration.browserAgent?.sessions, sheetTimeout: configuration.sheetTimeout, trace: trace)
        let server: ControlSocketServer
        do {
            server = try ControlSocketServer(
                path: path,
                control: DeviceControl(device: device, sheets: sheets, relayAlerts: relayAlerts, handoff: handoff))
        } catch {
            antenna?.stop()
            throw error
        }
        handoff.start()
        let poller = NotificationPoller(
            device: device, deployment: deployment, interval: configuration.syncInterval, alerts: relayAlerts,
            trace: trace)
        var agent: BrowserAgent?
        if let agentConfiguration = configuration.browserAgent {
            do {
                let started = try BrowserAgent(
                    configuration: agentConfiguration, sheets: sheets,
                    canMakePayments: {
                        // A Mac that cannot authenticate a payment itself pays with a phone or watch near it.
                        guard !device.profile.authorizesPayments else { return true }
                        return device.profile.kind == .mac ? await handoff.offersCards() : false
                    },
                    activeCard: { merchant, domain in
                        await device.wallet.answer(.canMakePaymentsWithActiveCard(networks: [])) {
                            trace("agent: canMakePaymentsWithActiveCard asks the Pay server's capability statement")
                            return await agentConfiguration.activeCard?(merchant, domain) ?? false
                        }
                    }, handoff: device.profile.kind == .mac ? handoff : nil, trace: trace)
                try started.server.start()
                try Data(#"{"port":\#(started.server.port)}"#.utf8).write(
                    to: URL(fileURLWithPath: agentFile(of: name, in: deployment)), options: .atomic)
                agent = started
            } catch {
                antenna?.stop()
                server.stop()
                poller.stop()
                await handoff.stop()
                throw error
            }
        }
        trace("device \(name) (\(device.profile)) listening on \(path)")
        output(#"{"event":"listening","socket":"\#(path)"}"#)
        if let antenna { output(#"{"event":"antenna","socket":"\#(antenna.path)"}"#) }
        if let agent {
            trace("browser agent: https://agent.orchard.test on 127.0.0.1:\(agent.server.port)")
            output(#"{"event":"browser-agent","port":\#(agent.server.port)}"#)
        }
        let signal = await TerminationSignal.wait()
        trace("received \(signal == SIGTERM ? "SIGTERM" : "SIGINT"): stopping")
        poller.stop()
        await handoff.stop()
        antenna?.stop()
        server.stop()
        if let agent {
            await agent.server.shutdown()
            try? FileManager.default.removeItem(atPath: agentFile(of: name, in: deployment))
        }
        output(#"{"event":"stopped"}"#)
    }

    /// `DIR/devices/NAME/agent.json`: `{"port": N}`, the browser agent's port while the device process runs.
    public static func agentFile(of name: String, in deployment: DeploymentDirectory) -> String {
        (Device.controlSocketPath(of: name, in: deployment) as NSString).deletingLastPathComponent + "/agent.json"
    }

    /// One line of JSON (sorted keys, slashes unescaped), or nil if the event does not encode.
    static func jsonLine(_ event: some Encodable) -> String? {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(event)).map { String(decoding: $0, as: UTF8.self) }
    }
}

/// A browser agent (``BrowserAgentConfiguration``) with its own payment-sheet service, outside a device process:
/// what `orchard demo` runs for the Mac that buys in headless Chromium. A person (or WebDriver) drives the sheet page.
public final class BrowserAgentHost: Sendable {
    private let agent: BrowserAgent

    /// Starts the agent on 127.0.0.1 for `device`.
    /// - Parameter connect: the device's connection to the Pay server, opened when a sheet is presented.
    public init(
        device: Device, configuration: BrowserAgentConfiguration, sheetTimeout: Duration = .seconds(120),
        connect: @escaping @Sendable () async throws -> PaymentSheetService.PayServerConnection,
        trace: @escaping @Sendable (String) -> Void
    ) throws {
        let sheets = PaymentSheetService(
            device: device, automatic: nil, timeout: sheetTimeout, connect: connect, trace: trace)
        agent = try BrowserAgent(
            configuration: configuration, sheets: sheets, canMakePayments: { device.profile.authorizesPayments },
            activeCard: { merchant, domain in
                await device.wallet.answer(.canMakePaymentsWithActiveCard(networks: [])) {
                    await configuration.activeCard?(merchant, domain) ?? false
                }
            }, trace: trace)
        try agent.server.start()
    }

    /// The agent's loopback port.
    public var port: Int { agent.server.port }

    /// Stops the agent.
    public func stop() async { await agent.server.shutdown() }
}
