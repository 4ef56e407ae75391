import Foundation

/// A self-signed certificate for 127.0.0.1 and its key (PEM), made by `openssl`, for a test server's
/// HTTPS port (nginx's, HAProxy's).
enum SelfSignedCertificate {
    /// Writes the certificate to `certificate` and its key to `key`.
    static func make(certificate: URL, key: URL) async throws {
        let openssl = try ChildProcess(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key.path, "-out", certificate.path,
            ]
        )
        guard await openssl.exited() == 0 else {
            throw TestFailure("openssl could not make a certificate (run the README's test command)")
        }
    }
}
