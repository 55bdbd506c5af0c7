import Foundation
import OrchardCLI
import OrchardCrypto

#if canImport(Glibc)
    import Glibc
#endif

@main
struct Orchard {
    static func main() async {
        // Before any OpenSSL use: `exit` below must not free OpenSSL under threads still running.
        CryptoRuntime.keepStateUntilExit()
        signal(SIGPIPE, SIG_IGN)
        let code = await CommandRunner.run(Array(CommandLine.arguments.dropFirst()))
        exit(code)
    }
}
