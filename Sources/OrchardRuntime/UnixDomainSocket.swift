package import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// AF_UNIX stream sockets for Orchard's local channels (the device control socket, the NFC link): one
/// implementation of addressing, connecting and listening; each channel maps ``Failure`` to its own error type.
package enum UnixDomainSocket {
    /// Why a socket operation failed, before a channel names it in its own terms.
    package struct Failure: Error {
        package enum Kind: Sendable { case invalidPath, notListening, alreadyListening, system }
        package let kind: Kind
        package let message: String
    }

    /// The largest path a `sockaddr_un` holds (with its terminating zero).
    package static let maximumPathLength = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    package static func address(_ path: String) throws(Failure) -> sockaddr_un {
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count <= maximumPathLength, !bytes.contains(0) else {
            throw Failure(
                kind: .invalidPath,
                message: "a socket path is 1 to \(maximumPathLength) bytes; this one is \(bytes.count)")
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
            raw[bytes.count] = 0
        }
        return address
    }

    /// Connects to `path`; `.notListening` when nothing listens there.
    package static func connect(_ path: String) throws(Failure) -> Int32 {
        var address = try address(path)
        let fd = try makeSocket()
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard rc == 0 else {
            let code = errno
            Glibc.close(fd)
            if code == ENOENT || code == ECONNREFUSED {
                throw Failure(kind: .notListening, message: "nothing listens at \(path)")
            }
            throw Failure(kind: .system, message: "cannot connect to \(path): \(String(cString: strerror(code)))")
        }
        return fd
    }

    /// Binds and listens on `path` with mode 0600 (only the owner's processes may connect). A stale socket
    /// file (nothing listening) is replaced; a live one is `.alreadyListening`.
    package static func listen(_ path: String, backlog: Int32) throws(Failure) -> Int32 {
        let fd = try bound(path)
        // Belt and braces: the mode is already 0600 (or stricter, under a strict umask).
        guard chmod(path, 0o600) == 0, Glibc.listen(fd, backlog) == 0 else {
            let error = system("listen on \(path)")
            Glibc.close(fd)
            unlink(path)
            throw error
        }
        return fd
    }

    /// A socket bound to `path`, not yet listening, whose file is created 0600 with no window: Linux gives the
    /// file the socket inode's mode less the umask, so the inode is made 0600 (`fchmod`) before `bind` creates
    /// the file, and the process-wide umask, which other threads rely on, is left alone. Between `bind` and a
    /// later `chmod`, another user could otherwise have connected through a file the umask left open.
    package static func bound(_ path: String) throws(Failure) -> Int32 {
        var address = try address(path)
        if FileManager.default.fileExists(atPath: path) {
            do throws(Failure) {
                Glibc.close(try connect(path))
                throw Failure(kind: .alreadyListening, message: "something already listens at \(path)")
            } catch  where error.kind == .notListening {
                unlink(path)
            }
        }
        let fd = try makeSocket()
        guard fchmod(fd, 0o600) == 0 else {
            let error = system("fchmod on the socket for \(path)")
            Glibc.close(fd)
            throw error
        }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard rc == 0 else {
            let error = system("bind \(path)")
            Glibc.close(fd)
            throw error
        }
        return fd
    }

    /// Whether something listens at `path`.
    package static func isListening(_ path: String) -> Bool {
        guard let fd = try? connect(path) else { return false }
        Glibc.close(fd)
        return true
    }

    private static func makeSocket() throws(Failure) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw system("socket()") }
        return fd
    }

    private static func system(_ what: String) -> Failure {
        Failure(kind: .system, message: "\(what) failed: \(String(cString: strerror(errno)))")
    }
}
