import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Small wrappers over AF_UNIX stream sockets (only what the control socket needs).
enum UnixSocket {
    /// The largest path a `sockaddr_un` holds (with its terminating zero).
    static let maximumPathLength = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    static func address(_ path: String) throws(DeviceProcessError) -> sockaddr_un {
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count <= maximumPathLength, !bytes.contains(0) else {
            throw DeviceProcessError(
                .invalidPath, "a control socket path is 1 to \(maximumPathLength) bytes: \(path) is \(bytes.count)")
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
            raw[bytes.count] = 0
        }
        return address
    }

    static func makeSocket() throws(DeviceProcessError) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw failure("socket()") }
        return fd
    }

    /// Connects to `path`; ``DeviceProcessError/Code/notRunning`` when nothing listens there.
    static func connect(_ path: String) throws(DeviceProcessError) -> Int32 {
        var address = try address(path)
        let fd = try makeSocket()
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard rc == 0 else {
            let code = errno
            close(fd)
            if code == ENOENT || code == ECONNREFUSED {
                throw DeviceProcessError(.notRunning, "no device process listens on \(path)")
            }
            throw DeviceProcessError(.socketFailure, "cannot connect to \(path): \(String(cString: strerror(code)))")
        }
        return fd
    }

    /// Binds and listens on `path` with mode 0600. A stale socket file (nothing listening) is replaced; a
    /// live one is ``DeviceProcessError/Code/alreadyRunning``.
    static func listen(_ path: String) throws(DeviceProcessError) -> Int32 {
        var address = try address(path)
        if FileManager.default.fileExists(atPath: path) {
            do throws(DeviceProcessError) {
                close(try connect(path))
                throw DeviceProcessError(.alreadyRunning, "a device process already listens on \(path)")
            } catch  where error.code == .notRunning {
                unlink(path)
            }
        }
        let fd = try makeSocket()
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard rc == 0 else {
            let error = failure("bind \(path)")
            close(fd)
            throw error
        }
        // Only the owner may talk to the device (the directory is 0700 as well).
        guard chmod(path, 0o600) == 0, Glibc.listen(fd, 64) == 0 else {
            let error = failure("listen on \(path)")
            close(fd)
            unlink(path)
            throw error
        }
        return fd
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
