public import Foundation
public import OrchardCrypto

#if canImport(Glibc)
    import Glibc
    private let systemWrite = Glibc.write
    private let systemRead = Glibc.read
#elseif canImport(Darwin)
    import Darwin
    private let systemWrite = Darwin.write
    private let systemRead = Darwin.read
#endif

/// File operations with exact permissions: atomic replacement, owner-only directories, and reads that
/// refuse secrets other users could have read or swapped.
public enum SecureFile {
    /// Writes `bytes` to `path` so that readers see the old file or the new one, never a part: the bytes go to
    /// a temporary file created with `mode` in the same directory, are synced, and the temporary file is
    /// renamed over `path`. The file never exists with a wider mode, whatever the umask.
    public static func write(_ bytes: some DataProtocol, to path: String, mode: UInt16) throws(RuntimeError) {
        let copy = Array(bytes)
        // Array.withUnsafeBytes only rethrows untyped errors: carry the typed one out in a Result.
        try copy.withUnsafeBytes { raw in Result { () throws(RuntimeError) in try write(raw, to: path, mode: mode) } }
            .get()
    }

    /// Writes a secret (a private key's PEM) with mode 0600, atomically; see ``write(_:to:mode:)``.
    public static func writeSecret(_ secret: SecureBytes, to path: String) throws(RuntimeError) {
        try secret.withUnsafeBytes { raw throws(RuntimeError) in try write(raw, to: path, mode: 0o600) }
    }

    static func write(_ bytes: UnsafeRawBufferPointer, to path: String, mode: UInt16) throws(RuntimeError) {
        let directory = (path as NSString).deletingLastPathComponent
        let name = (path as NSString).lastPathComponent
        var temporary = ""
        var descriptor: Int32 = -1
        // O_EXCL makes the temporary name ours alone; retry on the rare collision.
        for attempt in 0..<16 {
            temporary = "\(directory.isEmpty ? "." : directory)/.\(name).\(getpid()).\(attempt).tmp"
            descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode_t(mode))
            if descriptor >= 0 || errno != EEXIST { break }
        }
        guard descriptor >= 0 else { throw ioError("cannot create a temporary file for \(path)") }
        var renamed = false
        defer {
            if descriptor >= 0 { close(descriptor) }
            if !renamed { unlink(temporary) }
        }
        // The umask may have removed bits from `mode`; set it exactly.
        guard fchmod(descriptor, mode_t(mode)) == 0 else { throw ioError("cannot set the mode of \(path)") }
        var offset = 0
        while offset < bytes.count, let base = bytes.baseAddress {
            let written = systemWrite(descriptor, base + offset, bytes.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                throw ioError("cannot write \(path)")
            }
            offset += written
        }
        guard fsync(descriptor) == 0 else { throw ioError("cannot sync \(path)") }
        let closed = close(descriptor)
        descriptor = -1
        guard closed == 0 else { throw ioError("cannot write \(path)") }
        guard rename(temporary, path) == 0 else { throw ioError("cannot replace \(path)") }
        renamed = true
        // Sync the directory so the rename itself survives a crash.
        let directoryDescriptor = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryDescriptor >= 0 {
            fsync(directoryDescriptor)
            close(directoryDescriptor)
        }
    }

    /// Reads a file of at most `limit` bytes.
    public static func read(_ path: String, limit: Int = 16 << 20) throws(RuntimeError) -> [UInt8] {
        try withContents(of: path, limit: limit, requireOwnerOnly: false) { Array($0) }
    }

    /// Reads a secret file into `SecureBytes`, refusing it unless it is a regular file owned by this user
    /// with no permission for group or others (as ssh does with private keys).
    public static func readSecret(_ path: String, limit: Int = 1 << 20) throws(RuntimeError) -> SecureBytes {
        try withContents(of: path, limit: limit, requireOwnerOnly: true) { SecureBytes($0) }
    }

    private static func withContents<T>(
        of path: String, limit: Int, requireOwnerOnly: Bool, _ body: (UnsafeRawBufferPointer) -> T
    ) throws(RuntimeError) -> T {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else {
            if errno == ENOENT { throw RuntimeError(.notFound, "\(path) does not exist") }
            throw ioError("cannot open \(path)")
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw ioError("cannot inspect \(path)") }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw RuntimeError(.io, "\(path) is not a regular file")
        }
        if requireOwnerOnly {
            try requirePrivate(path, info, allowed: 0o600)
        }
        let size = Int(info.st_size)
        guard size <= limit else { throw RuntimeError(.io, "\(path) is larger than \(limit) bytes") }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(size, 1), alignment: 1)
        defer {
            // The buffer may have held a secret: wipe it before it returns to the allocator.
            buffer.initializeMemory(as: UInt8.self, repeating: 0)
            buffer.deallocate()
        }
        var offset = 0
        while offset < size, let base = buffer.baseAddress {
            let count = systemRead(descriptor, base + offset, size - offset)
            if count < 0 {
                if errno == EINTR { continue }
                throw ioError("cannot read \(path)")
            }
            if count == 0 { break }  // the file shrank meanwhile
            offset += count
        }
        return body(UnsafeRawBufferPointer(rebasing: buffer[0..<offset]))
    }

    /// Creates `path` (and missing parents) as a directory and sets its mode to exactly `mode`.
    public static func createDirectory(_ path: String, mode: UInt16 = 0o700) throws(RuntimeError) {
        do {
            try FileManager.default.createDirectory(
                atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: Int(mode)]
            )
        } catch {
            throw RuntimeError(.io, "cannot create directory \(path): \(error.localizedDescription)")
        }
        var info = stat()
        guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
            throw RuntimeError(.io, "\(path) exists and is not a directory")
        }
        guard chmod(path, mode_t(mode)) == 0 else { throw ioError("cannot set the mode of \(path)") }
    }

    /// The permission bits of `path` (not following a final symbolic link), or nil when it does not exist.
    public static func mode(of path: String) -> UInt16? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return UInt16(info.st_mode & 0o7777)
    }

    /// Throws ``RuntimeError/Code/insecurePermissions`` unless `path` belongs to this user and grants
    /// nothing beyond `allowed`.
    static func requirePrivate(_ path: String, _ info: stat, allowed: UInt16) throws(RuntimeError) {
        let bits = UInt16(info.st_mode & 0o7777)
        guard info.st_uid == geteuid() else {
            throw RuntimeError(.insecurePermissions, "\(path) belongs to another user (uid \(info.st_uid))")
        }
        guard bits & ~allowed == 0 else {
            let fix = "chmod \(String(allowed, radix: 8)) \(path)"
            throw RuntimeError(
                .insecurePermissions, "\(path) has mode \(String(bits, radix: 8)), open to other users: run `\(fix)`"
            )
        }
    }

    static func ioError(_ context: String) -> RuntimeError {
        RuntimeError(.io, "\(context): \(String(cString: strerror(errno)))")
    }
}
