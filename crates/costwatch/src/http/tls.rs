//! TLS whose root certificates are read on the first HTTPS connection.
//!
//! reqwest's own rustls set-up reads the system's CA certificates (about
//! 150 on a Debian system) when a client is built, for every client, even
//! when every URL is plain `http://` on loopback. Here the same platform
//! verifier is built once, the first time a server certificate is checked,
//! and shared by every client of the process.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, Error, SignatureScheme};
use std::sync::{Arc, OnceLock};

/// The platform verifier, built on first use.
#[derive(Debug)]
pub struct LazyRoots {
    provider: Arc<CryptoProvider>,
    verifier: OnceLock<Result<rustls_platform_verifier::Verifier, Error>>,
}

impl LazyRoots {
    /// A verifier that has read no certificate yet.
    pub fn new(provider: Arc<CryptoProvider>) -> LazyRoots {
        LazyRoots {
            provider,
            verifier: OnceLock::new(),
        }
    }

    /// Whether the system's roots were read.
    #[cfg(test)]
    pub fn loaded(&self) -> bool {
        self.verifier.get().is_some()
    }

    fn get(&self) -> Result<&rustls_platform_verifier::Verifier, Error> {
        self.verifier
            .get_or_init(|| rustls_platform_verifier::Verifier::new(self.provider.clone()))
            .as_ref()
            .map_err(Clone::clone)
    }
}

impl ServerCertVerifier for LazyRoots {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        self.get()?
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The verifier every client of the process shares.
pub fn shared_roots() -> Arc<LazyRoots> {
    static ROOTS: OnceLock<Arc<LazyRoots>> = OnceLock::new();
    ROOTS
        .get_or_init(|| {
            Arc::new(LazyRoots::new(Arc::new(
                rustls::crypto::aws_lc_rs::default_provider(),
            )))
        })
        .clone()
}

/// The rustls configuration of a client: TLS 1.2 and 1.3, HTTP/1.1 by
/// ALPN, server certificates checked against the system's roots.
pub fn client_config(roots: Arc<LazyRoots>) -> Result<ClientConfig, Error> {
    let provider = roots.provider.clone();
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(rustls::ALL_VERSIONS)?
        .dangerous()
        .with_custom_certificate_verifier(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn building_a_client_reads_no_root_certificate() {
        let roots = Arc::new(LazyRoots::new(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        )));
        let config = client_config(roots.clone()).unwrap();
        assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
        let _client = reqwest::Client::builder()
            .tls_backend_preconfigured(config)
            .build()
            .unwrap();
        assert!(!roots.supported_verify_schemes().is_empty());
        assert!(!roots.loaded());
    }

    #[test]
    fn every_client_shares_one_verifier() {
        assert!(Arc::ptr_eq(&shared_roots(), &shared_roots()));
    }
}
