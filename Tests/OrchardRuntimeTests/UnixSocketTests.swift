import Foundation
import OrchardRuntime
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The device control socket and the NFC link sockets (both `UnixDomainSocket.listen`) exist
/// as 0600 from the moment `bind` creates their file under the usual umask (022): there is no moment at which
/// another user may connect.
@Suite("Unix sockets: created 0600 with no window")
struct UnixSocketTests {
    @Test("S8: The socket file is 0600 as soon as bind returns, before any chmod, under umask 022")
    func socketFileIsPrivateFromBind() throws {
        for mask: mode_t in [0o022] {
            let path = "/tmp/orchard-socket-\(UUID().uuidString.prefix(8)).sock"
            defer { unlink(path) }
            // The umask is process-wide: set and restored around `bound` only.
            let previous = umask(mask)
            let bound = Result { () throws(UnixDomainSocket.Failure) in try UnixDomainSocket.bound(path) }
            umask(previous)
            let fd = try bound.get()
            defer { close(fd) }
            var info = stat()
            try #require(lstat(path, &info) == 0)
            #expect(info.st_mode & S_IFMT == S_IFSOCK)
            #expect(info.st_mode & 0o777 == 0o600, "umask \(String(mask, radix: 8)): \(String(info.st_mode, radix: 8))")
        }
    }

    @Test("A listening socket is 0600 and takes connections from its owner")
    func listeningSocketIsPrivate() throws {
        let path = "/tmp/orchard-socket-\(UUID().uuidString.prefix(8)).sock"
        defer { unlink(path) }
        let fd = try UnixDomainSocket.listen(path, backlog: 1)
        defer { close(fd) }
        #expect(SecureFile.mode(of: path) == 0o600)
        #expect(UnixDomainSocket.isListening(path))
    }
}
