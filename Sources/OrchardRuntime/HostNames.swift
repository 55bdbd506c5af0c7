/// The host names a deployment serves (`config.json` section `names`): each maps to the loopback port that
/// answers for it, so clients keep the name in URLs (SNI, certificate checks and browser origins carry no
/// port) and connect with libcurl's connect-to mapping, `curl --connect-to NAME::127.0.0.1:PORT` or a browser's
/// host-resolver rules:
///
/// ```json
/// "names": {"apple-pay-gateway.orchard.test": 8441, "pay.orchard.test": 8441, "store.orchard.test": 8444}
/// ```
public enum HostNames {
    /// The `config.json` section.
    public static let section = "names"

    /// The key for `host` in the `names` section: a port (`ORCHARD_NAMES_<HOST>` overrides it, the host's dots
    /// and hyphens as underscores).
    public static func port(_ host: String) -> ConfigurationKey<Int> { .port(section, host) }

    /// Whether `name` is a DNS host name: dot-separated labels of lowercase letters, digits and inner hyphens,
    /// at least two labels, at most 253 characters.
    public static func isHostName(_ name: String) -> Bool {
        let labels = name.split(separator: ".", omittingEmptySubsequences: false)
        guard name.utf8.count <= 253, labels.count >= 2 else { return false }
        return labels.allSatisfy { label in
            let bytes = Array(label.utf8)
            return (1...63).contains(bytes.count) && bytes.first != UInt8(ascii: "-")
                && bytes.last != UInt8(ascii: "-")
                && bytes.allSatisfy { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D }
        }
    }
}

extension Configuration {
    /// Every host name of the `names` section that has a port, with that port.
    public var hostNames: [String: Int] {
        var names: [String: Int] = [:]
        for name in schema.sections[HostNames.section]?.keys.sorted() ?? [] {
            let port = self[HostNames.port(name)]
            if port != 0 { names[name] = port }
        }
        return names
    }
}
