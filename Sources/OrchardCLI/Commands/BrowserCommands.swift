import BrowserAgentAPI
import Device
import DeviceProcess
import Foundation
import OrchardCrypto
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import OrchardX509
import PayClient
import SecureElement
import WebDriverClient
import WebMerchantAPI

#if canImport(Glibc)
    import Glibc
#endif

/// `orchard browser`: a real browser (Chromium) against the deployment (docs/web.md, "Apple Pay in a browser").
enum BrowserCommands {
    static let command = Command(
        name: "browser", summary: "Set up a browser (Chromium) to use the deployment's websites and a device's agent.",
        subcommands: [setup, open, buy])

    static let buy = Command(
        name: "buy",
        summary: "Buy Tea (4.50 USD) at store.orchard.test from a device without a browser, as the demo's web row.",
        discussion: """
            Makes the calls a browser on the device and its browser agent would: the store's merchant session (its
            server asks the Pay server's gateway with its identity certificate), the device's check of the session,
            the payment sheet (the device's own authentication), the token posted to the store, the charge. Uses the
            services running for DIR, and the other parties' at their imported addresses for a Pay side deployed on
            its own (docs/deployment.md, "Each party on its own"). The device must not run in its own process
            (`orchard device run`) meanwhile. With --chromium, the demo's web row in a real browser instead: the
            demo Mac (made if missing, Touch ID) buys in headless Chromium with its own browser agent; its NSS profile
            trusts the deployment's root and every imported party root. Prints the payment's row as JSON.
            """,
        options: [buyDeviceOption, buyChromiumOption, buyHandoffOption]
    ) { arguments, context in
        let deployment = DeploymentDirectory(path: context.dataDirectory.path)
        var chromium: String?
        if arguments[buyChromiumOption] || arguments[buyHandoffOption] {
            guard let found = DemoWeb.locateChromium(context.environment) else {
                throw CLIError.failure("Chromium or certutil was not found: \(Chromium.installHint)")
            }
            chromium = found
        }
        let connections = try await DeploymentCommands.connect(
            [.network, .pay, .merchant], of: deployment, context: context)
        do {
            if arguments[buyHandoffOption] {
                var devices: [String: Device] = [:]
                for name in ["demo-phone", "demo-watch"] {
                    devices[name] = try await Device.open(in: deployment, name: name)
                }
                if let watch = devices["demo-watch"] {
                    // As the demo's user does before its watch authorizes: on the wrist, unlocked with its passcode.
                    try? await watch.secureEnclave.putOnWrist()
                    _ = try await watch.unlock(.passcode(SecureBytes(Array(DemoWebHandoff.passcode.utf8))))
                    context.trace("user: puts demo-watch on the wrist and unlocks it with the demo passcode")
                }
                let rows = try await DemoWebHandoff.rows(
                    deployment: deployment, connections: connections, devices: devices, context: context)
                await connections.close()
                try context.outputJSON(rows)
                return
            }
            let row: DemoInStore.Row
            if let chromium {
                row = try await DemoWeb.inChromium(
                    deployment: deployment, connections: connections, chromium: chromium, context: context)
            } else {
                let device = try await Device.open(in: deployment, name: arguments[buyDeviceOption])
                row = try await DemoWeb.run(
                    deployment: deployment, connections: connections, device: device, trace: { context.trace($0) })
            }
            await connections.close()
            try context.outputJSON(row)
        } catch {
            await connections.close()
            throw error
        }
    }

    static let buyDeviceOption = Option.text(
        "device", "NAME", default: "demo-phone", help: "The device that pays (opened in this process).")
    static let buyHandoffOption = Option.flag(
        "handoff",
        help: "Buy as the demo's web-handoff rows: a Mac without Touch ID in headless Chromium, demo-phone then "
            + "demo-watch (put on the wrist, unlocked with the demo passcode 123456) authorizing; prints both rows.")
    static let buyChromiumOption = Option.flag(
        "chromium",
        help:
            "Buy as the demo's web row in Chromium instead: demo-mac (Touch ID) in headless Chromium, --device unused.")

    static let deviceOption = Option.required(
        "device", "NAME", help: "The device whose browser agent (orchard device run) the browser uses.")
    static let profileOption = Option.required(
        "profile", "DIR2",
        help: "The browser's home: DIR2/.pki/nssdb trusts the deployment's root (run it with HOME=DIR2).")

    static let setup = Command(
        name: "setup",
        summary: "Write an NSS database trusting the deployment's root and print Chromium's arguments, one per line.",
        discussion: """
            Writes DIR2/.pki/nssdb (certutil from libnss3-tools) trusting DIR/pki/root/root-ca.pem for websites, and
            prints the arguments to start Chromium with HOME=DIR2: host-resolver rules mapping every name of config.json
            `names` to its loopback port and agent.orchard.test to the browser agent of --device (which must be
            running: `orchard device run --name NAME`), the profile directory, and --no-sandbox when run as root.
            Certificate errors are never ignored. Then: HOME=DIR2 chromium $(orchard browser setup ...) \
            https://store.orchard.test/
            """,
        options: [deviceOption, profileOption]
    ) { arguments, context in
        let deployment = try MerchantCommands.initializedDeployment(context)
        let device = arguments[deviceOption]
        let profile = URL(fileURLWithPath: arguments[profileOption]).standardizedFileURL.path
        let lines = try await chromiumArguments(deployment: deployment, device: device, profile: profile, context)
        for line in lines { context.output(line) }
        context.trace(
            "NSS database \(profile)/.pki/nssdb trusts the Orchard root; start Chromium with HOME=\(profile) "
                + "and these arguments, then open https://store.orchard.test/")
    }

    static let openProfileOption = Option.optional(
        "profile", "DIR2", help: "The browser's home (default DIR/browser/NAME), set up as `browser setup` does.")

    /// The pages `open` shows: the device's screen and the store.
    static let openedPages = [
        BrowserAgentAPI.origin + BrowserAgentAPI.Page.screen, "https://" + WebMerchantAPI.HostNames.store + "/",
    ]

    static let open = Command(
        name: "open",
        summary: "Start Chromium on the device's screen and the store; print their URLs. Runs until Chromium ends.",
        discussion: """
            Sets up the browser's home as `browser setup` does (DIR2, default DIR/browser/NAME) and starts Chromium
            (from PATH) on https://agent.orchard.test/screen (the device's screen: its wallet's cards, recent
            payments, a sheet waiting) and https://store.orchard.test/, whose URLs it prints. The device's process
            must be running (`orchard device run --name NAME`). With a display (DISPLAY or WAYLAND_DISPLAY)
            Chromium shows a window; without one it runs headless (said on stderr) and this command opens the store
            through Chromium's DevTools over a pipe (no DevTools port another user could reach). SIGTERM or SIGINT
            ends Chromium and the command.
            """,
        options: [deviceOption, openProfileOption]
    ) { arguments, context in
        let deployment = try MerchantCommands.initializedDeployment(context)
        let device = arguments[deviceOption]
        guard Device.names(in: deployment).contains(device) else {
            throw CLIError.failure(
                "no device \(device) in \(deployment.path): create it with `orchard device create --data-dir "
                    + "\(deployment.path) --name \(device) ...`")
        }
        guard let chromium = Chromium.locateBrowser(searchPath: context.environment["PATH"]) else {
            throw CLIError.failure("Chromium was not found on PATH: \(Chromium.installHint)")
        }
        let profile = URL(
            fileURLWithPath: arguments[openProfileOption] ?? deployment.path + "/browser/" + device
        ).standardizedFileURL.path
        var lines = try await chromiumArguments(deployment: deployment, device: device, profile: profile, context)
        let display = ["DISPLAY", "WAYLAND_DISPLAY"].contains { !(context.environment[$0] ?? "").isEmpty }
        var devTools: DevToolsPipe?
        if !display {
            lines += ["--headless=new", "--remote-debugging-pipe"]
            do {
                devTools = try DevToolsPipe()
            } catch {
                throw CLIError.failure("Chromium's DevTools pipe could not be made: \(error)")
            }
            context.trace("no display (DISPLAY, WAYLAND_DISPLAY unset): Chromium runs headless")
        }
        // Handlers first: a signal right after the URLs appear must end Chromium too.
        let signals = ShutdownSignals.shared
        let log = profile + "/chromium.log"
        let browser: Subprocess
        do {
            // Headless Chromium opens one page from its command line; the store comes through its DevTools.
            browser = try Subprocess(
                chromium, lines + (display ? openedPages : [openedPages[0]]), environment: ["HOME": profile],
                stdoutPath: log, stderrPath: log, inherited: devTools?.childDescriptors ?? [])
            devTools?.browserStarted()
        } catch {
            throw CLIError.failure("Chromium could not be started: \((error as? RuntimeError)?.message ?? "\(error)")")
        }
        if let devTools {
            do {
                for page in openedPages.dropFirst() { _ = try await devTools.openPage(page) }
                // Said once every page has a title of its own that held for a second (loaded, and the screen
                // page drew the agent's answer), or after 30 s as they are.
                var titles: [String] = []
                var steady = 0
                for _ in 0..<300 where steady < 10 {
                    try await Task.sleep(for: .milliseconds(100))
                    let now = try await devTools.pageTitles()
                    let loaded =
                        now.count == openedPages.count
                        && !now.contains { $0.isEmpty || $0.hasPrefix("https://") || $0 == "about:blank" }
                    steady = loaded && now == titles ? steady + 1 : 0
                    titles = now
                }
                context.trace("headless Chromium's pages: \(titles.joined(separator: "; "))")
            } catch {
                browser.send(SIGKILL)
                _ = await browser.exit()
                throw CLIError.failure("headless Chromium did not open the store: \(error) (its log: \(log))")
            }
        }
        for page in openedPages { context.output(page) }
        context.trace("Chromium runs on \(device)'s screen and the store (its log: \(log)); Ctrl-C ends it")
        let stopped = StopFlag()
        Task {
            _ = await signals.next()
            stopped.set()
            browser.send(SIGTERM)
            if await browser.exit(within: 5) == nil { browser.send(SIGKILL) }
        }
        let ended = await browser.exit()
        guard stopped.isSet || ended == .exited(0) else {
            throw CLIError.failure("Chromium ended (\(ended)); its log: \(log)")
        }
    }

    /// Whether a signal ended `open`.
    private final class StopFlag: @unchecked Sendable {
        // @unchecked: guarded by `lock`.
        private let lock = NSLock()
        private var value = false
        func set() { lock.withLock { value = true } }
        var isSet: Bool { lock.withLock { value } }
    }

    /// Writes the NSS database and returns Chromium's arguments.
    static func chromiumArguments(
        deployment: DeploymentDirectory, device: String, profile: String, _ context: CommandContext
    ) async throws -> [String] {
        let agentPort = try agentPort(of: device, in: deployment)
        let configuration = try DeploymentCommands.registry().loadConfiguration(
            from: deployment, environment: context.environment)
        // A party deployed on its own reaches the other parties' names at their imported addresses.
        var names = PeerAddresses.read(from: deployment).hostNames.merging(configuration.hostNames) { $1 }
        names[BrowserAgentAPI.host] = agentPort
        return try await chromiumArguments(deployment: deployment, names: names, profile: profile)
    }

    /// Writes the NSS database and returns Chromium's arguments, `names` resolved to their loopback ports.
    static func chromiumArguments(
        deployment: DeploymentDirectory, names: [String: Int], profile: String
    ) async throws -> [String] {
        try await writeNSSDatabase(profile: profile, roots: try trustedRootFiles(of: deployment))
        let rules = names.sorted { $0.key < $1.key }.map { "MAP \($0.key):443 127.0.0.1:\($0.value)" }
        var lines = [
            "--host-resolver-rules=" + rules.joined(separator: ","),
            "--user-data-dir=" + profile + "/chromium",
            "--no-first-run", "--no-default-browser-check",
        ]
        if getuid() == 0 { lines.append("--no-sandbox") }
        return lines
    }

    /// The port of `device`'s running browser agent (`DIR/devices/NAME/agent.json`).
    static func agentPort(of device: String, in deployment: DeploymentDirectory) throws -> Int {
        struct AgentFile: Decodable { let port: Int }
        let path = DeviceProcessRunner.agentFile(of: device, in: deployment)
        // try?: a missing file, or one that is not {"port": N}, is an agent that does not run (the refusal below).
        guard let data = FileManager.default.contents(atPath: path), DuplicateJSONKeys.first(in: data) == nil,
            let port = (try? JSONDecoder().decode(AgentFile.self, from: data))?.port, (1...65535).contains(port)
        else {
            throw CLIError.failure(
                "the browser agent of \(device) is not running: start `orchard device run --data-dir "
                    + "\(deployment.path) --name \(device)` first")
        }
        return port
    }

    /// NSS's certutil (Debian's libnss3-tools), or nil when it is not installed.
    static var certutil: String? {
        ["/usr/bin/certutil", "/usr/local/bin/certutil"].first(where: {
            FileManager.default.isExecutableFile(atPath: $0)
        })
    }

    /// The roots the deployment's browser trusts for websites: `pki/root/root-ca.pem`, then every other party's root
    /// imported into `pki/peers/` (a party deployed on its own: the merchant's store is under the merchant's root).
    static func trustedRootFiles(of deployment: DeploymentDirectory) throws -> [(nickname: String, path: String)] {
        var files = [(nickname: "Orchard root", path: try deployment.certificatePath(named: PKIFiles.rootCA))]
        let folder = deployment.pkiFolderPath("peers")
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).sorted()
        for name in names where name.hasPrefix("peer-") && name.hasSuffix("-root.pem") {
            files.append((nickname: "Orchard " + String(name.dropLast(4)), path: folder + "/" + name))
        }
        return files
    }

    /// `certutil -N` (an empty password) and `certutil -A` of each root, trusted for TLS servers.
    static func writeNSSDatabase(profile: String, roots: [(nickname: String, path: String)]) async throws {
        let database = profile + "/.pki/nssdb"
        do {
            try FileManager.default.createDirectory(
                atPath: database, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw CLIError.failure("cannot create \(database): \(error.localizedDescription)")
        }
        guard let certutil else {
            throw CLIError.failure("certutil is not installed: apt-get install libnss3-tools (scripts/bootstrap)")
        }
        if !FileManager.default.fileExists(atPath: database + "/cert9.db") {
            try await run(certutil, ["-N", "-d", "sql:" + database, "--empty-password"])
        }
        for root in roots {
            // Replaces an earlier root of another deployment under the same nickname.
            _ = try? await run(certutil, ["-D", "-d", "sql:" + database, "-n", root.nickname], quiet: true)
            try await run(certutil, ["-A", "-d", "sql:" + database, "-n", root.nickname, "-t", "C,,", "-i", root.path])
        }
    }

    private static func run(_ executable: String, _ arguments: [String], quiet: Bool = false) async throws {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("orchard-certutil-\(UUID().uuidString)")
            .path
        defer { try? FileManager.default.removeItem(atPath: log) }
        let child = try Subprocess(executable, arguments, stdoutPath: log, stderrPath: log)
        let ended = await child.exit()
        guard ended == .exited(0) else {
            let detail = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            if quiet { throw CLIError.failure("certutil failed") }
            throw CLIError.failure(
                "certutil \(arguments.first ?? "") failed (\(ended)): "
                    + detail.trimmingCharacters(in: .whitespacesAndNewlines))
        }
    }

    // MARK: The browser agent of `orchard device run`

    /// `pki/devices/device-agent-tls`: the TLS identity of `agent.orchard.test`, issued by the Orchard root the first
    /// time a device process runs (as `terminal setup` issues a terminal's).
    static func agentIdentity(in deployment: DeploymentDirectory) throws -> TLSIdentity {
        let name = "device-agent-tls"
        if let identity = try? TLSIdentity.load(named: name, from: deployment) { return identity }
        let root = try CertificateAuthority.load(named: PKIFiles.rootCA, from: deployment)
        let key = try DeploymentPKI.newSigningKey()
        let now = Date()
        let certificate = try Certificate.issue(
            subject: DistinguishedName([.organization("Orchard"), .commonName("Orchard browser agent")]),
            publicKey: CertificatePublicKey(key.publicKey), issuer: root.issuer,
            notValidBefore: now.addingTimeInterval(-300), notValidAfter: now.addingTimeInterval(397 * 86_400),
            extensions: [
                .basicConstraints(isCA: false), .keyUsage([.digitalSignature]), .extendedKeyUsage([.serverAuth]),
                try .subjectAlternativeNames(dnsNames: [BrowserAgentAPI.host], ipAddresses: []),
            ], random: SystemRandom())
        try DeploymentPKI.writeSigningKey(key, named: name, to: deployment)
        try DeploymentPKI.writeCertificates([certificate], named: name, to: deployment)
        return try TLSIdentity.load(named: name, from: deployment)
    }

    /// The browser agent's configuration for `device run`.
    static func agentConfiguration(
        deployment: DeploymentDirectory, port: Int, handlerTimeout: Duration, context: CommandContext,
        payPort: Int? = nil
    ) throws -> BrowserAgentConfiguration {
        let identity = try agentIdentity(in: deployment)
        let tokenRoot = try DeploymentPKI.readCertificate(named: "token-root", from: deployment)
        let rootPEM = try deployment.readCertificate(named: PKIFiles.rootCA)
        let configuration = try DeploymentCommands.registry().loadConfiguration(
            from: deployment, environment: context.environment)
        let payPort = payPort ?? configuration.hostNames[WebMerchantAPI.HostNames.pay]
        let activeCard: (@Sendable (String, String) async -> Bool)?
        if let payPort {
            // Asked without any client certificate: the Pay server cannot tell which device visits which site.
            let client = try HTTPClient(
                configuration: HTTPClientConfiguration(
                    trustedRootsPEM: rootPEM, connectTimeout: .seconds(5), requestTimeout: .seconds(10),
                    maxAttempts: 1, connectTo: [WebMerchantAPI.HostNames.pay: payPort]))
            let check = try WebCapabilityCheck(
                client: client, baseURL: "https://" + WebMerchantAPI.HostNames.pay, tokenRoot: tokenRoot,
                clock: SystemClock())
            activeCard = { merchant, domain in
                (try? await check.isValidated(merchantIdentifier: merchant, domain: domain)) ?? false
            }
        } else {
            activeCard = nil
        }
        return BrowserAgentConfiguration(
            port: port, certificateChainPEM: identity.certificateChainPEM, privateKeyPEM: identity.privateKeyPEM,
            sessions: try MerchantSessionCheck(tokenRoot: tokenRoot, clock: SystemClock()),
            handlerTimeout: handlerTimeout, activeCard: activeCard)
    }
}
