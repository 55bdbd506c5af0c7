import Foundation
import OrchardRuntime
import OrchardServices

/// `orchard pki export` and `orchard pki import`: the files a party deployed on its own (`init --party`) and the
/// other parties exchange, since no party reads another's directory.
enum PKICommands {
    static let command = Command(
        name: "pki",
        summary: "Exchange public certificates between parties deployed on their own (init --party).",
        subcommands: [export, importBundle]
    )

    static let outOption = Option.optional("out", "FILE", help: "Write the bundle there instead of stdout.")
    static let answerOption = Option.optional(
        "out", "FILE", help: "Where to write the answer bundle, when the imported one asks this party for something.")
    static let oldRootOption = Option.optional(
        "signed-by-old-root", "DIR",
        help: "The party's previous directory: its root signs the new one, for peers' `pki import --replace`.")
    static let replaceOption = Option.optional(
        "replace", "FILE", help: "Import FILE as a known party's bundle under a new root (a re-key).")
    static let oldFingerprintOption = Option.optional(
        "old-root-fingerprint", "SHA256",
        help: "With --replace: the old root's SHA-256, checked with its party, when the old root cannot sign.")

    static let export = Command(
        name: "export",
        summary: "Write the party bundle of --data-dir: its root, published certificates, endpoints, requests.",
        discussion: """
            The bundle (JSON, format orchard-party-bundle, version 1) holds public material only: the party's root
            CA certificate, the certificates other parties pin (pay: device-ca, token-root; network:
            token-service-provisioning, token-service-personalisation), where its services listen, and what it
            asks of the other parties (certificate signing requests: the keys never leave DIR). Without --out it
            is printed on stdout. After a re-key (the party made again in a new directory, with a new root),
            --signed-by-old-root OLD-DIR adds the old root's signature of the new one (OLD-DIR keeps
            pki/root/root-ca.pem and .key), which the peers that know the party check with
            `orchard pki import --replace FILE`.
            """,
        options: [outOption, oldRootOption]
    ) { arguments, context in
        let directory = DeploymentDirectory(path: context.dataDirectory.path)
        let registry = try DeploymentCommands.registry(for: directory)
        let data: Data
        do throws(ServicesError) {
            data = try PartyBundles.export(
                directory, registry: registry, environment: context.environment,
                signedByOldRoot: arguments[oldRootOption].map { DeploymentDirectory(path: $0) }
            ).jsonData()
        } catch {
            throw CLIError.failure(error.message)
        }
        guard let out = arguments[outOption] else {
            context.output(String(decoding: data, as: UTF8.self))
            return
        }
        try SecureFile.write(Array(data), to: out, mode: 0o600)
        context.trace("bundle written to \(out)")
    }

    static let importBundle = Command(
        name: "import",
        summary: "Import another party's bundle into --data-dir: trust its root, store its certificates and endpoints.",
        discussion: """
            Checks the whole bundle first (its format and version, that it is another party's, that every
            certificate chains to its root, that certificates issued for this party are for the keys this party
            holds) and changes nothing when a check fails. Then answers the requests the bundle addresses to this
            party (the network: the Pay side's token requestor certificate, a merchant's acquirer account and
            acquiring certificate; the Pay side: a merchant's registration, processing and identity certificates
            and its app's entitlement), writing the answer bundle to --out FILE for the requester to import;
            stores the peer's root as pki/peers/peer-<party>-root.pem, its published certificates, the
            certificates it issued for this party, and its services' addresses and root in DIR/peers.json. Prints
            a JSON summary.

            The party's name and every identity its bundle registers here (a merchant ID, a merchant's terminals,
            the token requestor ID the network assigns) are bound to its root at the first import
            (DIR/registrations.json); a bundle under another root naming any of them is refused. The same bundle
            again is accepted. A known party's new root is accepted with --replace FILE (instead of the bundle
            argument) when FILE is signed by its old root (`pki export --signed-by-old-root`), or with
            --old-root-fingerprint SHA256 when the old root cannot sign; the certificates this party issued
            under the old root are revoked, and the re-key is recorded.
            """,
        options: [answerOption, replaceOption, oldFingerprintOption],
        positionals: ["bundle"]
    ) { arguments, context in
        let replacing = arguments[replaceOption]
        guard let file = replacing ?? arguments.positionals.first else {
            throw CLIError.usage("name the bundle file to import (or --replace FILE)")
        }
        guard replacing == nil || arguments.positionals.isEmpty else {
            throw CLIError.usage("give the bundle once: as --replace FILE or as the argument")
        }
        let fingerprint = arguments[oldFingerprintOption]
        guard fingerprint == nil || replacing != nil else {
            throw CLIError.usage("--old-root-fingerprint goes with --replace FILE")
        }
        let replace: PartyBundles.Replacement? =
            replacing == nil ? nil : fingerprint.map { .oldRootFingerprint($0) } ?? .signedByOldRoot
        let directory = DeploymentDirectory(path: context.dataDirectory.path)
        let bytes: [UInt8]
        do {
            bytes = try SecureFile.read(file, limit: 1 << 20)
        } catch {
            throw CLIError.failure("cannot read \(file): \(error)")
        }
        let registry = try DeploymentCommands.registry(for: directory)
        let services = try DeploymentCommands.registry()
        let summary: PartyBundles.ImportSummary
        do throws(ServicesError) {
            summary = try await PartyBundles.importBundle(
                Data(bytes), into: directory, registry: registry,
                answerPath: arguments[answerOption], replace: replace, services: services,
                environment: context.environment,
                trace: { context.trace("  " + $0) })
        } catch {
            throw CLIError.failure(error.message)
        }
        context.trace(
            "imported the \(summary.party) bundle: root \(summary.trustedRoot), peers "
                + summary.peers.joined(separator: ", ")
                + (summary.answer.map { "; answer written to \($0)" } ?? ""))
        try context.outputJSON(summary)
    }
}
