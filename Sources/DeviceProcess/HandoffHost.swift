public import Device
public import DeviceControlAPI
import OrchardHTTP
public import OrchardRuntime
public import PayClient
import SecureElement
import Wallet

/// Handoff (docs/handoff.md) for one device outside a device process: its radio and relay loop, its payment sheets
/// and, on a Mac, a browser agent whose sheet offers the phones and watches it hears. What `orchard demo` runs for the
/// Mac without Touch ID that buys in headless Chromium and for the phone and watch that authorize its payments.
public final class HandoffHost: Sendable {
    private let handoff: Handoff
    private let agent: BrowserAgent?

    /// Starts the device's radio and relay loop and, when `browserAgent` is given, its browser agent on 127.0.0.1.
    ///
    /// - Parameters:
    ///   - automatic: how this device's user authorizes every sheet at once (a phone's Face ID, a watch's
    ///     double-click); nil: no sheet is authorized.
    ///   - sessions: the merchant-session check a phone or watch verifies a Mac's payment with.
    ///   - payServer: the device's client of the Pay server for the relay (long polls of 1 s: the demo stops the Pay
    ///     server it started right after, and a stopping server waits for the polls in flight).
    ///   - connect: the device's connection to the Pay server, opened when a sheet is presented.
    public init(
        device: Device, deployment: DeploymentDirectory, automatic: AutoAuthentication?,
        sessions: MerchantSessionCheck, browserAgent: BrowserAgentConfiguration? = nil,
        proximityWindow: Duration = .seconds(5), payServer: @escaping @Sendable () -> PayServerClient?,
        connect: @escaping @Sendable () async throws -> PaymentSheetService.PayServerConnection,
        trace: @escaping @Sendable (String) -> Void
    ) throws {
        let sheets = PaymentSheetService(device: device, automatic: automatic, connect: connect, trace: trace)
        let handoff = Handoff(
            device: device, deployment: deployment, window: proximityWindow, sheets: sheets, sessions: sessions,
            payServer: payServer, relayWaitSeconds: 1, trace: trace)
        self.handoff = handoff
        handoff.start()
        guard let browserAgent else {
            agent = nil
            return
        }
        do {
            let started = try BrowserAgent(
                configuration: browserAgent, sheets: sheets,
                canMakePayments: {
                    guard !device.profile.authorizesPayments else { return true }
                    return device.profile.kind == .mac ? await handoff.offersCards() : false
                },
                activeCard: { merchant, domain in
                    await device.wallet.answer(.canMakePaymentsWithActiveCard(networks: [])) {
                        await browserAgent.activeCard?(merchant, domain) ?? false
                    }
                }, handoff: device.profile.kind == .mac ? handoff : nil, trace: trace)
            try started.server.start()
            agent = started
        } catch {
            let stopping = handoff
            Task { await stopping.stop() }
            throw error
        }
    }

    /// The browser agent's loopback port, if it runs one.
    public var agentPort: Int? { agent?.server.port }

    /// The devices of its account this device hears on the radio medium.
    public var nearby: [String] { handoff.radio.near().map(\.device) }

    /// A Mac's discovery: the phones and watches it hears, and the cards they offer it.
    public func discover() async -> HandoffDevicesAnswer { await handoff.discover() }

    /// A Mac's payment on a phone or watch it hears: its token, or the refusal.
    public func pay(_ request: HandoffPayment) async -> HandoffPaymentAnswer { await handoff.pay(request) }

    /// Stops the browser agent, the relay loop and the radio.
    public func stop() async {
        await agent?.server.shutdown()
        await handoff.stop()
    }
}
