import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Another user of the machine (`nobody`), for the tests of what a local attacker can reach: a client run as that
/// user with `runuser`, which needs root (CI runs as root).
public enum OtherUser {
    public static let name = "nobody"

    /// Whether this process can act as another user: root, with `runuser` and Debian's `python3`.
    public static var available: Bool {
        geteuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/sbin/runuser")
            && FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")
    }

    /// What `GET path` over TLS to 127.0.0.1:`port` (certificate not checked, as an attacker would; plain HTTP when
    /// `tls` is false) gets when another user sends it: `answered <status>` with an HTTP answer, `closed` when the
    /// connection ended without one, or `refused <error>`.
    public static func get(port: Int, path: String, host: String = "localhost", tls: Bool = true) async throws -> String
    {
        let process = try ChildProcess(
            "/usr/sbin/runuser",
            ["-u", name, "--", "/usr/bin/python3", "-c", client, String(port), path, host, tls ? "tls" : "plain"],
            stdout: .capture, stderr: .capture)
        let ended = await process.exit()
        guard ended.status == 0 else { return "failed \(ended): \(process.stderr)" }
        return process.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static let client = """
        import socket, ssl, sys
        port, path, host, tls = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4] == "tls"
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as plain:
                with (context.wrap_socket(plain, server_hostname=host) if tls else plain) as connection:
                    request = f"GET {path} HTTP/1.1\\r\\nHost: {host}\\r\\nSec-Fetch-Site: same-origin\\r\\n"
                    connection.sendall((request + "Connection: close\\r\\n\\r\\n").encode())
                    answer = b""
                    while True:
                        chunk = connection.recv(4096)
                        if not chunk:
                            break
                        answer += chunk
            if answer.startswith(b"HTTP/1.1 "):
                print("answered", answer[9:12].decode())
            else:
                print("closed")
        except (OSError, ssl.SSLError) as error:
            print("refused", type(error).__name__)
        """
}
