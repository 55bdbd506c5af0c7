import Foundation
public import OrchardRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// One process at a time per terminal: an exclusive `flock` on `DIR/run/terminal-<ID>.lock`, held for as
/// long as this value lives and released by the kernel if the process dies.
///
/// Without it a second `charge` would take the first one's transaction, still waiting for its answer, for
/// one an earlier run left open, and reverse it.
public final class TerminalLock: Sendable {
    private let descriptor: Int32

    /// Takes the lock of `terminalID`, or throws ``TerminalError/Code/invalidArgument`` when another process
    /// holds it.
    public init(terminalID: String, in deployment: DeploymentDirectory) throws(TerminalError) {
        do {
            try SecureFile.createDirectory(deployment.runPath, mode: 0o700)
        } catch {
            throw TerminalError(.storeFailure, "cannot create \(deployment.runPath): \(error.message)")
        }
        let path = "\(deployment.runPath)/terminal-\(terminalID).lock"
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            throw TerminalError(.storeFailure, "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            throw TerminalError(.invalidArgument, "terminal \(terminalID) is busy with a charge in another process")
        }
        descriptor = fd
    }

    deinit { close(descriptor) }
}
