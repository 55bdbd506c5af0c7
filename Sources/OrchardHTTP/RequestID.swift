import Foundation
import OrchardCrypto

extension UUID {
    /// A version 4 UUID from OpenSSL's CSPRNG. Foundation's `UUID()` opens /dev/urandom on every call on
    /// Linux, which costs a system call per request.
    static func random(using random: any RandomSource = SystemRandom()) -> UUID {
        var bytes = random.bytes(16)
        bytes[6] = (bytes[6] & 0x0F) | 0x40  // version 4
        bytes[8] = (bytes[8] & 0x3F) | 0x80  // RFC 4122 variant
        return UUID(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9],
                bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            ))
    }
}

extension UUID {
    /// `uuidString.lowercased()` without the formatted string and its lowercased copy: every response carries
    /// its request's id.
    var lowercasedString: String {
        withUnsafeBytes(of: uuid) { bytes in
            String(unsafeUninitializedCapacity: 36) { out in
                var index = 0
                for (position, byte) in bytes.enumerated() {
                    if position == 4 || position == 6 || position == 8 || position == 10 {
                        out[index] = UInt8(ascii: "-")
                        index += 1
                    }
                    (out[index], out[index + 1]) = Hex.digits(of: byte, lowercase: true)
                    index += 2
                }
                return index
            }
        }
    }
}
