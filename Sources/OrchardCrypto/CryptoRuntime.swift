internal import COpenSSL

/// Process-wide settings of the crypto library, for this package's executables to apply before anything else.
package enum CryptoRuntime {
    /// Keeps OpenSSL's global state until the process is gone, instead of freeing it in an `atexit` handler.
    ///
    /// `exit` runs `atexit` handlers while the process's other threads still run; OpenSSL's handler frees
    /// its locks and default context, and a thread still in OpenSSL at that moment (an HTTP client's thread
    /// polling a TLS connection, a server's event loop) then crashes on a freed lock, turning a successful
    /// command into a signal. The kernel reclaims the memory anyway. Call it first thing in `main`: OpenSSL's
    /// first initialisation decides, so a call after any other OpenSSL use changes nothing.
    package static func keepStateUntilExit() {
        // Returns 0 only when OpenSSL cannot initialise at all; the first real use reports that properly.
        _ = OPENSSL_init_crypto(UInt64(OPENSSL_INIT_NO_ATEXIT), nil)
    }
}
