import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The Chrome DevTools Protocol over Chromium's `--remote-debugging-pipe`: JSON messages, each ended by a NUL byte,
/// on two pipes that Chromium holds as its descriptors 3 (commands in) and 4 (answers and events out). Unlike
/// `--remote-debugging-port`, nothing listens on a TCP port, so no other user of the machine can reach the browser.
///
/// Start Chromium with ``childDescriptors`` as its inherited descriptors 3 and 4, then call ``browserStarted()``.
/// Chromium ends when the pipe closes; ``close()`` closes it.
public final class DevToolsPipe: @unchecked Sendable {
    // @unchecked: `nextID`, `pending`, `ended` and `closed` are guarded by `lock`, writes by `writing`; the
    // descriptors are set once.
    /// The ends Chromium gets, in order: the one it reads commands from (its 3), the one it writes to (its 4).
    public let childDescriptors: [Int32]
    private let commands: Int32
    private let answers: Int32
    private let lock = NSLock()
    private let writing = NSLock()
    private var nextID = 1
    private var pending: [Int: CheckedContinuation<[String: Any], any Error>] = [:]
    private var ended = false
    private var closed = false

    /// Creates the two pipes (this process's ends close on exec).
    public init() throws(WebDriverError) {
        var toBrowser: [Int32] = [0, 0]
        var fromBrowser: [Int32] = [0, 0]
        guard pipe(&toBrowser) == 0 else { throw WebDriverError(.devToolsPipe, "pipe failed: errno \(errno)") }
        guard pipe(&fromBrowser) == 0 else {
            Glibc.close(toBrowser[0])
            Glibc.close(toBrowser[1])
            throw WebDriverError(.devToolsPipe, "pipe failed: errno \(errno)")
        }
        for descriptor in toBrowser + fromBrowser { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        childDescriptors = [toBrowser[0], fromBrowser[1]]
        commands = toBrowser[1]
        answers = fromBrowser[0]
    }

    /// Closes the browser's ends in this process (it holds its own copies) and starts reading its answers.
    public func browserStarted() {
        for descriptor in childDescriptors { Glibc.close(descriptor) }
        let reader = Thread { [self] in readAnswers() }
        reader.name = "devtools-pipe"
        reader.start()
    }

    /// Opens `url` in a new page of the browser (`Target.createTarget`); the page's target identifier.
    public func openPage(_ url: String) async throws -> String {
        let result = try await send("Target.createTarget", ["url": url])
        guard let target = result["targetId"] as? String else {
            throw WebDriverError(.devToolsPipe, "Target.createTarget answered no targetId")
        }
        return target
    }

    /// The titles of the browser's pages (`Target.getTargets`), sorted.
    public func pageTitles() async throws -> [String] {
        let result = try await send("Target.getTargets")
        let targets = result["targetInfos"] as? [[String: Any]] ?? []
        return targets.filter { $0["type"] as? String == "page" }.compactMap { $0["title"] as? String }.sorted()
    }

    /// Sends a command, to the page attached as `session` (`Target.attachToTarget` with `flatten`) or, without one,
    /// to the browser; its `result` object, or a ``WebDriverError`` with the browser's error message, or one of
    /// code ``WebDriverError/Code/timeout`` when no answer came within `timeout` (a late answer is dropped).
    public func send(
        _ method: String, _ parameters: [String: Any] = [:], session: String? = nil,
        timeout: Duration = .seconds(30)
    ) async throws -> [String: Any] {
        try await withCheckedThrowingContinuation { continuation in
            let id: Int? = lock.withLock {
                guard !ended, !closed else { return nil }
                defer { nextID += 1 }
                pending[nextID] = continuation
                return nextID
            }
            guard let id else {
                continuation.resume(throwing: WebDriverError(.devToolsPipe, "the browser's DevTools pipe is closed"))
                return
            }
            Task { [self] in
                try? await Task.sleep(for: timeout)
                if let waiting = lock.withLock({ pending.removeValue(forKey: id) }) {
                    waiting.resume(throwing: WebDriverError(.timeout, "DevTools: no answer to \(method) in \(timeout)"))
                }
            }
            do {
                var command: [String: Any] = ["id": id, "method": method, "params": parameters]
                if let session { command["sessionId"] = session }
                var message = try JSONSerialization.data(withJSONObject: command)
                message.append(0)
                // One message at a time: two commands sent at once must not interleave on the pipe.
                try writing.withLock {
                    try message.withUnsafeBytes { bytes in
                        var offset = 0
                        while offset < bytes.count {
                            let written = write(commands, bytes.baseAddress! + offset, bytes.count - offset)
                            if written < 0 && errno == EINTR { continue }
                            guard written > 0 else {
                                throw WebDriverError(.devToolsPipe, "writing to the DevTools pipe: errno \(errno)")
                            }
                            offset += written
                        }
                    }
                }
            } catch {
                if let waiting = lock.withLock({ pending.removeValue(forKey: id) }) { waiting.resume(throwing: error) }
            }
        }
    }

    /// Closes the pipe: Chromium ends, and commands still waiting fail. Closing it again does nothing.
    public func close() {
        let first = lock.withLock {
            defer { closed = true }
            return !closed
        }
        if first { Glibc.close(commands) }
    }

    private func readAnswers() {
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(answers, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            buffer += chunk[0..<count]
            while let end = buffer.firstIndex(of: 0) {
                let message = Data(buffer[..<end])
                buffer.removeSubrange(...end)
                deliver(message)
            }
        }
        Glibc.close(answers)
        let waiting = lock.withLock {
            ended = true
            defer { pending.removeAll() }
            return Array(pending.values)
        }
        for continuation in waiting {
            continuation.resume(throwing: WebDriverError(.devToolsPipe, "the browser closed its DevTools pipe"))
        }
    }

    /// An answer resumes its command (ids are unique across sessions); events (no `id`) are dropped.
    private func deliver(_ message: Data) {
        // try?: what is not JSON is no answer.
        guard let object = try? JSONSerialization.jsonObject(with: message) as? [String: Any],
            let id = object["id"] as? Int,
            let continuation = lock.withLock({ pending.removeValue(forKey: id) })
        else { return }
        if let error = object["error"] as? [String: Any] {
            let text = error["message"] as? String ?? "an error"
            continuation.resume(throwing: WebDriverError(.command, "DevTools: \(text)"))
        } else {
            continuation.resume(returning: object["result"] as? [String: Any] ?? [:])
        }
    }
}
