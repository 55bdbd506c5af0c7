internal import Foundation

/// PEM armour (RFC 7468): `-----BEGIN <label>-----`, base64 in 64-column lines, `-----END <label>-----`.
public func pemEncode(_ der: [UInt8], label: String) -> String {
    let base64 = Data(der).base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
    return "-----BEGIN \(label)-----\n\(base64)\n-----END \(label)-----\n"
}

/// All PEM blocks in `text`, in order, as (label, DER). Text between blocks is ignored.
public func pemBlocks(_ text: String) throws(CryptoError) -> [(label: String, der: [UInt8])] {
    var blocks: [(String, [UInt8])] = []
    var label: String?
    var body = ""
    for rawLine in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) {
        let line = rawLine.trimmingCharacters(in: .whitespaces)
        if let current = label {
            if line == "-----END \(current)-----" {
                guard let der = Data(base64Encoded: body) else {
                    throw CryptoError(.invalidEncoding, "the base64 inside the PEM block \(current) is malformed")
                }
                blocks.append((current, Array(der)))
                label = nil
                body = ""
            } else if line.hasPrefix("-----") {
                throw CryptoError(.invalidEncoding, "the PEM block \(current) has no matching END line")
            } else if !line.contains(":") {  // skip RFC 1421 headers such as Proc-Type
                body += line
            }
        } else if line.hasPrefix("-----BEGIN "), line.hasSuffix("-----") {
            label = String(line.dropFirst(11).dropLast(5))
        }
    }
    if let label { throw CryptoError(.invalidEncoding, "the PEM block \(label) is not terminated") }
    return blocks
}

/// The DER of the first PEM block with `label`.
public func pemDecode(_ text: String, label: String) throws(CryptoError) -> [UInt8] {
    guard let block = try pemBlocks(text).first(where: { $0.label == label }) else {
        throw CryptoError(.invalidEncoding, "no PEM block labelled \(label)")
    }
    return block.der
}
