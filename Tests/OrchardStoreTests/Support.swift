import CommandTestSupport
import Foundation
import OrchardStore
import Testing

/// A fresh directory under the system's temporary directory, removed when released.
final class TemporaryDirectory {
    let path: String

    init() throws {
        let base = FileManager.default.temporaryDirectory.path
        path = "\(base)/orchard-store-tests-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
    }

    func file(_ name: String) -> String { "\(path)/\(name)" }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// Awaits `body` run on a Dispatch thread, so blocking work never holds a Swift concurrency thread.
func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(with: Result { try body() }) }
    }
}

/// Expects `body` to throw a `StoreError` with `code`; returns it for more checks.
@discardableResult
func expectStoreError<T>(
    _ code: StoreError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> T
) -> StoreError? {
    do {
        _ = try body()
        Issue.record("expected StoreError \(code), nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as StoreError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected StoreError \(code), got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

/// The async form of `expectStoreError`.
@discardableResult
func expectStoreError<T>(
    _ code: StoreError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> T
) async -> StoreError? {
    do {
        _ = try await body()
        Issue.record("expected StoreError \(code), nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as StoreError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected StoreError \(code), got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

/// A thread-safe counter for side effects run from store closures.
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func increment() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}

/// The backends the store's guarantees are proven on: SQLite always, PostgreSQL when it is installed (always with
/// `CI=true`, where a missing PostgreSQL fails `PostgreSQLServerTests`).
enum StoreBackend: String, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgreSQL

    static let all: [StoreBackend] = TestPostgreSQL.enabled ? [.sqlite, .postgreSQL] : [.sqlite]

    var testDescription: String { rawValue }

    /// A location of its own: a file in `directory`, or a fresh schema on the test run's PostgreSQL server.
    func location(in directory: TemporaryDirectory, _ name: String = "store.sqlite") async throws -> StoreLocation {
        switch self {
        case .sqlite: return .file(directory.file(name))
        case .postgreSQL:
            let server = try await TestPostgreSQL.shared()
            return .postgreSQL(try PostgreSQLLocation(url: server.url, schema: TestPostgreSQL.freshSchema()))
        }
    }
}
