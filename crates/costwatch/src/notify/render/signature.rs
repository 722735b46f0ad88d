//! The webhook signature: HMAC-SHA256 of the exact body bytes under a
//! shared secret, sent as `X-Costwatch-Signature: sha256=<hex>`.

use hmac::{KeyInit, Mac};
use sha2::{Digest, Sha256};

/// The signature header's value for `body`: `sha256=` followed by the
/// lower-case hex HMAC-SHA256 of the exact bytes under `secret`.
pub fn signature(secret: &str, body: &[u8]) -> String {
    format!(
        "sha256={}",
        hex::encode(hmac_sha256(secret.as_bytes(), body))
    )
}

/// Whether `header` (an `X-Costwatch-Signature` value) is the signature of
/// `body` under `secret`. The comparison takes constant time.
pub fn verify_signature(secret: &str, body: &[u8], header: &str) -> bool {
    let Some(hex_digest) = header.trim().strip_prefix("sha256=") else {
        return false;
    };
    let Ok(claimed) = hex::decode(hex_digest) else {
        return false;
    };
    hmac_instance(secret.as_bytes(), body)
        .verify_slice(&claimed)
        .is_ok()
}

type HmacSha256 = hmac::Hmac<Sha256>;

/// SHA-256's block size: HMAC keys are padded (or first hashed) to it.
const SHA256_BLOCK: usize = 64;

pub(super) fn hmac_sha256(key: &[u8], body: &[u8]) -> Vec<u8> {
    hmac_instance(key, body).finalize().into_bytes().to_vec()
}

/// An HMAC-SHA256 over `body`, keyed without a fallible call: RFC 2104 pads a
/// key to the block size with zeros and first hashes a longer one, so the
/// padded block keys exactly the same MAC as the original key.
fn hmac_instance(key: &[u8], body: &[u8]) -> HmacSha256 {
    let mut block = hmac::digest::Key::<HmacSha256>::default();
    if key.len() > SHA256_BLOCK {
        let hashed = Sha256::digest(key);
        block[..hashed.len()].copy_from_slice(&hashed);
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let mut mac = <HmacSha256 as KeyInit>::new(&block);
    mac.update(body);
    mac
}
