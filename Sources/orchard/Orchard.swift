import Foundation
import OrchardCLI

#if canImport(Glibc)
    import Glibc
#endif

@main
struct Orchard {
    static func main() async {
        signal(SIGPIPE, SIG_IGN)
        let code = await CommandRunner.run(Array(CommandLine.arguments.dropFirst()))
        exit(code)
    }
}
