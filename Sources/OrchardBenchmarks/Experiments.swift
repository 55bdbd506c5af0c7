internal import CBenchmarks
internal import COpenSSL
internal import OrchardCrypto

enum Experiments {
    static func figures() -> [BenchmarkFigure] {
        let keyBytes = SystemRandom().bytes(32)
        let key = SymmetricKey(data: keyBytes)
        let plaintext = CryptoBenchmarks.kilobyte
        let iv = CryptoBenchmarks.zeroIV
        let raw: @Sendable (Int) throws -> Void = { n in
            var out = [UInt8](repeating: 0, count: 1024)
            var tag = [UInt8](repeating: 0, count: 16)
            _ = orchard_bench_aes_gcm_seal(Fetched.aes256GCM, keyBytes, iv, 16, plaintext, 1024, &out, &tag, n)
        }
        return [
            BenchmarkFigure(name: "exp seal generic", swift: { n in for _ in 0..<n { _ = try AES.GCM.seal(plaintext, using: key, iv: iv) } }, raw: raw),
            BenchmarkFigure(name: "exp seal bytes", swift: { n in
                try plaintext.withUnsafeBytes { p in try iv.withUnsafeBytes { i in
                    for _ in 0..<n { _ = try AES.GCM.seal(bytes: p, key: key, iv: i, aad: UnsafeRawBufferPointer(start: nil, count: 0)) } } }
            }, raw: raw),
            BenchmarkFigure(name: "exp raw+alloc", swift: { n in
                for _ in 0..<n {
                    let a = [UInt8](unsafeUninitializedCapacity: 1040) { b, c in
                        var tag = [UInt8](repeating: 0, count: 16)
                        _ = orchard_bench_aes_gcm_seal(Fetched.aes256GCM, keyBytes, iv, 16, plaintext, 1024, b.baseAddress, &tag, 1)
                        c = 1040
                    }
                    _ = a
                }
            }, raw: raw),
            BenchmarkFigure(name: "exp raw single calls", swift: { n in
                var out = [UInt8](repeating: 0, count: 1024)
                var tag = [UInt8](repeating: 0, count: 16)
                for _ in 0..<n { _ = orchard_bench_aes_gcm_seal(Fetched.aes256GCM, keyBytes, iv, 16, plaintext, 1024, &out, &tag, 1) }
            }, raw: raw),
        ]
    }
}

internal import Foundation
extension Experiments {
    static func runFromEnvironment() {
        guard let side = ProcessInfo.processInfo.environment["ORCHARD_EXP_SIDE"],
              let name = ProcessInfo.processInfo.environment["ORCHARD_EXP_FIGURE"] else { return }
        let n = Int(ProcessInfo.processInfo.environment["ORCHARD_EXP_N"] ?? "") ?? 1_000_000
        let figures = Experiments.figures() + [try! CryptoBenchmarks.aesGCMSeal(), try! CryptoBenchmarks.aesGCMOpen(), try! CryptoBenchmarks.sha256(), try! CryptoBenchmarks.ecdh()]
        guard let f = figures.first(where: { $0.name == name }) else { print("no figure"); exit(2) }
        if side == "none" { exit(0) }
        if side == "swift" { try! f.swift(n) } else { try! f.raw!(n) }
        exit(0)
    }
}
