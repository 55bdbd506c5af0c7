public import Foundation

/// Test data copied into the project (see README.md beside this file for sources and licences).
public enum Fixtures {
    /// The bytes of `path`, relative to `Tests/Fixtures` (e.g. `"wycheproof/aes_gcm_test.json"`).
    public static func data(_ path: String) throws -> Data {
        guard let url = Bundle.module.resourceURL?.appendingPathComponent(path) else {
            throw CocoaError(.fileNoSuchFile)
        }
        return try Data(contentsOf: url)
    }

    /// The file-system path of `path` (a file or a folder).
    public static func path(_ path: String) throws -> String {
        guard let url = Bundle.module.resourceURL?.appendingPathComponent(path) else {
            throw CocoaError(.fileNoSuchFile)
        }
        return url.path
    }

    /// The text of `path`.
    public static func string(_ path: String) throws -> String {
        String(decoding: try data(path), as: UTF8.self)
    }
}
