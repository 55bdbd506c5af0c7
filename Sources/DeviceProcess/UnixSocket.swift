import Foundation
import OrchardRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// The control socket's view of ``UnixDomainSocket``: its errors, timeouts and byte I/O.
enum UnixSocket {
    /// Connects to `path`; ``DeviceProcessError/Code/notRunning`` when nothing listens there.
    static func connect(_ path: String) throws(DeviceProcessError) -> Int32 {
        do {
            return try UnixDomainSocket.connect(path)
        } catch {
            throw map(error, path)
        }
    }

    /// Binds and listens on `path` with mode 0600. A stale socket file (nothing listening) is replaced; a
    /// live one is ``DeviceProcessError/Code/alreadyRunning``.
    static func listen(_ path: String) throws(DeviceProcessError) -> Int32 {
        do {
            return try UnixDomainSocket.listen(path, backlog: 64)
        } catch {
            throw map(error, path)
        }
    }

    private static func map(_ failure: UnixDomainSocket.Failure, _ path: String) -> DeviceProcessError {
        switch failure.kind {
        case .invalidPath: DeviceProcessError(.invalidPath, "control socket: \(failure.message)")
        case .notListening: DeviceProcessError(.notRunning, "no device process listens on \(path)")
        case .alreadyListening: DeviceProcessError(.alreadyRunning, "a device process already listens on \(path)")
        case .system: DeviceProcessError(.socketFailure, failure.message)
        }
    }

    /// The user ID of the process at the other end of a connected socket (`SO_PEERCRED`: the kernel's record
    /// of who connected, which the peer cannot forge); nil when the kernel does not say.
    static func peerUserID(_ fd: Int32) -> uid_t? {
        // Linux's `struct ucred` is { pid_t pid; uid_t uid; gid_t gid; }; Glibc exports it only under
        // _GNU_SOURCE, which Swift's module does not define, so it is read as its three 32-bit fields.
        var credentials: (pid: pid_t, uid: uid_t, gid: gid_t) = (0, 0, 0)
        var size = socklen_t(MemoryLayout<(pid_t, uid_t, gid_t)>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &size) == 0,
            size == socklen_t(MemoryLayout<(pid_t, uid_t, gid_t)>.size)
        else { return nil }
        return credentials.uid
    }

    /// Sets receive and send timeouts on a connected socket.
    static func setTimeouts(_ fd: Int32, seconds: Int) {
        var value = timeval(tv_sec: seconds, tv_usec: 0)
        let size = socklen_t(MemoryLayout<timeval>.size)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &value, size)
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &value, size)
    }

    /// Writes all of `bytes`.
    static func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws(DeviceProcessError) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written < 0 {
                if errno == EINTR { continue }
                throw errno == EAGAIN || errno == EWOULDBLOCK
                    ? DeviceProcessError(.timedOut, "the peer did not read in time") : failure("send")
            }
            offset += written
        }
    }

    /// Reads up to `count` bytes; an empty result is the end of the stream.
    static func read(_ fd: Int32, count: Int = 16 << 10) throws(DeviceProcessError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n >= 0 { return Array(buffer[0..<n]) }
            if errno == EINTR { continue }
            throw errno == EAGAIN || errno == EWOULDBLOCK
                ? DeviceProcessError(.timedOut, "the peer did not answer in time") : failure("recv")
        }
    }

    static func failure(_ what: String) -> DeviceProcessError {
        DeviceProcessError(.socketFailure, "\(what) failed: \(String(cString: strerror(errno)))")
    }
}
