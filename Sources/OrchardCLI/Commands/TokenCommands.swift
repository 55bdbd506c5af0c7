import Foundation
import MerchantKit
import OrchardCrypto
import PaymentToken

/// `orchard token ...`: inspect, verify, decrypt and make Apple Pay payment tokens.
enum TokenCommands {
    static let command = Command(
        name: "token",
        summary: "Inspect, verify, decrypt and make Apple Pay payment tokens (EC_v1, RSA_v1).",
        subcommands: [inspect]
    )

    static let inspect = Command(
        name: "inspect",
        summary: "Print a token's structure (no secrets: sizes, hashes and identifiers only).",
        positionals: ["TOKEN.json"]
    ) { arguments, context in
        let token = try loadToken(arguments)
        let paymentData = token.paymentData
        let header = paymentData.header
        var report: [String: JSONValueEncodable] = [
            "version": .string(paymentData.version.rawValue),
            "shape": .string(token.paymentMethod == nil && token.transactionIdentifier == nil ? "paymentData" : "PKPaymentToken"),
            "dataBytes": .int(paymentData.data.count),
            "signatureBytes": .int(paymentData.signature.count),
            "signatureEncoding": .string(paymentData.signature.starts(with: [0x30, 0x80]) ? "BER (indefinite length)" : "DER"),
            "publicKeyHash": .string(StrictEncoding.base64Encode(header.publicKeyHash)),
            "transactionId": .string(header.transactionIdHex),
            "applicationDataHash": header.applicationData.map { .string(StrictEncoding.hexEncode($0)) } ?? .null,
        ]
        switch header.keyMaterial {
        case .ephemeralPublicKey(let spki): report["ephemeralPublicKeyBytes"] = .int(spki.count)
        case .wrappedKey(let wrapped): report["wrappedKeyBytes"] = .int(wrapped.count)
        }
        if let method = token.paymentMethod {
            report["paymentMethod"] = .object([
                "displayName": .string(method.displayName), "network": .string(method.network), "type": .string(method.type),
            ])
        }
        try context.outputJSON(report)
    }

    /// Reads and strictly parses the token file named by the first positional argument.
    static func loadToken(_ arguments: ParsedArguments) throws -> PaymentToken {
        guard let path = arguments.positionals.first else { throw CLIError.usage("missing TOKEN.json") }
        return try PaymentToken(jsonBytes: try readFile(path))
    }
}

/// Reads a whole file, with a one-line error naming it.
func readFile(_ path: String) throws -> [UInt8] {
    guard let data = FileManager.default.contents(atPath: path) else {
        throw CLIError.failure("cannot read \(path)")
    }
    return Array(data)
}

/// A small JSON value for command output (sorted keys come from the encoder).
indirect enum JSONValueEncodable: Encodable {
    case string(String)
    case int(Int)
    case bool(Bool)
    case object([String: JSONValueEncodable])
    case array([JSONValueEncodable])
    case null

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let s): try container.encode(s)
        case .int(let n): try container.encode(n)
        case .bool(let b): try container.encode(b)
        case .object(let o): try container.encode(o)
        case .array(let a): try container.encode(a)
        case .null: try container.encodeNil()
        }
    }
}
