//! permessage-deflate negotiation (RFC 7692 5 and 7.1): server choice, client offer and
//! strict validation of the server's response.
#![cfg(feature = "deflate")]

use std::sync::Arc;

use rapidws::deflate::negotiate::{client_accept, client_offer, server_negotiate};
use rapidws::deflate::{
    CompressorPolicy, CompressorPool, DeflateConfig, DeflateParams, NegotiationError,
};

fn server(offers: &[&str]) -> Option<(DeflateParams, String)> {
    server_with(&DeflateConfig::default(), offers)
}

fn server_with(config: &DeflateConfig, offers: &[&str]) -> Option<(DeflateParams, String)> {
    let values: Vec<&[u8]> = offers.iter().map(|s| s.as_bytes()).collect();
    server_negotiate(config, &values)
}

fn client(
    config: &DeflateConfig,
    response: &[&str],
) -> Result<Option<DeflateParams>, NegotiationError> {
    let values: Vec<&[u8]> = response.iter().map(|s| s.as_bytes()).collect();
    client_accept(config, &values)
}

fn params(snct: bool, cnct: bool, sbits: u8, cbits: u8) -> DeflateParams {
    DeflateParams {
        server_no_context_takeover: snct,
        client_no_context_takeover: cnct,
        server_max_window_bits: sbits,
        client_max_window_bits: cbits,
    }
}

// --- server ---------------------------------------------------------------------------------

#[test]
fn bare_offer_is_accepted_with_defaults() {
    let (p, response) = server(&["permessage-deflate"]).unwrap();
    assert_eq!(p, DeflateParams::default());
    assert_eq!(response, "permessage-deflate");
}

#[test]
fn no_offer_or_other_extensions_are_declined() {
    assert_eq!(server(&[]), None);
    assert_eq!(server(&["x-webkit-deflate-frame", "foo; bar=1"]), None);
    assert_eq!(server(&[""]), None);
}

#[test]
fn offer_parameters_are_stated_in_the_response() {
    let (p, response) = server(&[
        "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=10; client_max_window_bits=12",
    ])
    .unwrap();
    assert_eq!(p, params(true, true, 10, 12));
    assert_eq!(
        response,
        "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=10; client_max_window_bits=12"
    );
}

#[test]
fn bare_client_max_window_bits_is_accepted_and_limited_by_config() {
    let (p, response) = server(&["permessage-deflate; client_max_window_bits"]).unwrap();
    assert_eq!(p, params(false, false, 15, 15));
    assert_eq!(response, "permessage-deflate");

    let cfg = DeflateConfig::new().client_max_window_bits(10);
    let (p, response) = server_with(&cfg, &["permessage-deflate; client_max_window_bits"]).unwrap();
    assert_eq!(p.client_max_window_bits, 10);
    assert_eq!(response, "permessage-deflate; client_max_window_bits=10");
}

#[test]
fn config_limit_on_client_window_is_not_stated_without_the_offer_parameter() {
    // RFC 7692 7.1.2.2: no client_max_window_bits in the response unless offered.
    let cfg = DeflateConfig::new().client_max_window_bits(10);
    let (p, response) = server_with(&cfg, &["permessage-deflate"]).unwrap();
    assert_eq!(p.client_max_window_bits, 15);
    assert_eq!(response, "permessage-deflate");
}

#[test]
fn server_window_is_the_smaller_of_offer_and_config() {
    let cfg = DeflateConfig::new().server_max_window_bits(11);
    let (p, response) =
        server_with(&cfg, &["permessage-deflate; server_max_window_bits=13"]).unwrap();
    assert_eq!(p.server_max_window_bits, 11);
    assert_eq!(response, "permessage-deflate; server_max_window_bits=11");
    let (p, _) = server_with(&cfg, &["permessage-deflate; server_max_window_bits=9"]).unwrap();
    assert_eq!(p.server_max_window_bits, 9);
    // Without the parameter in the offer the server may still state its own limit.
    let (p, response) = server_with(&cfg, &["permessage-deflate"]).unwrap();
    assert_eq!(p.server_max_window_bits, 11);
    assert_eq!(response, "permessage-deflate; server_max_window_bits=11");
}

#[test]
fn server_window_of_8_is_accepted_and_stated() {
    // Our compressor cannot use 8 bits; the codec then sends uncompressed (see tests/deflate.rs).
    let (p, response) = server(&["permessage-deflate; server_max_window_bits=8"]).unwrap();
    assert_eq!(p.server_max_window_bits, 8);
    assert_eq!(response, "permessage-deflate; server_max_window_bits=8");
}

#[test]
fn config_requirements_are_added_to_the_response() {
    let cfg = DeflateConfig::new()
        .server_no_context_takeover(true)
        .client_no_context_takeover(true);
    let (p, response) = server_with(&cfg, &["permessage-deflate"]).unwrap();
    assert_eq!(p, params(true, true, 15, 15));
    assert_eq!(
        response,
        "permessage-deflate; server_no_context_takeover; client_no_context_takeover"
    );
}

#[test]
fn pooled_server_demands_server_no_context_takeover() {
    let cfg =
        DeflateConfig::new().policy(CompressorPolicy::Pooled(Arc::new(CompressorPool::new(8))));
    let (p, response) = server_with(&cfg, &["permessage-deflate"]).unwrap();
    assert!(p.server_no_context_takeover);
    assert_eq!(response, "permessage-deflate; server_no_context_takeover");
}

#[test]
fn first_acceptable_of_several_offers_wins() {
    // Autobahn 13.7 style: several offers in one header, and across headers.
    let (p, _) = server(&[
        "permessage-deflate; client_no_context_takeover; server_max_window_bits=9, permessage-deflate; client_no_context_takeover, permessage-deflate",
    ])
    .unwrap();
    assert_eq!(p, params(false, true, 9, 15));
    let (p, _) = server(&[
        "foo",
        "permessage-deflate; server_max_window_bits=12",
        "permessage-deflate",
    ])
    .unwrap();
    assert_eq!(p.server_max_window_bits, 12);
}

#[test]
fn malformed_offers_are_declined_and_the_next_one_taken() {
    let bad = [
        "permessage-deflate; server_max_window_bits=16",
        "permessage-deflate; server_max_window_bits=7",
        "permessage-deflate; server_max_window_bits=08",
        "permessage-deflate; server_max_window_bits",
        "permessage-deflate; client_max_window_bits=abc",
        "permessage-deflate; server_no_context_takeover=1",
        "permessage-deflate; client_no_context_takeover=\"x\"",
        "permessage-deflate; server_no_context_takeover; server_no_context_takeover",
        "permessage-deflate; client_max_window_bits=10; client_max_window_bits=11",
        "permessage-deflate; unknown_param",
        "permessage-deflate; server_max_window_bits=\"1 0\"",
        "permessage-deflate; ; server_no_context_takeover",
        "permessage-deflate; server_max_window_bits=",
        "permessage-deflate server_no_context_takeover",
    ];
    for offer in bad {
        assert_eq!(server(&[offer]), None, "{offer}");
        let two = format!("{offer}, permessage-deflate; client_no_context_takeover");
        let (p, _) = server(&[&two]).unwrap_or_else(|| panic!("{two}"));
        assert_eq!(p, params(false, true, 15, 15), "{two}");
    }
}

#[test]
fn unterminated_quote_declines_the_whole_header_value() {
    assert_eq!(
        server(&["permessage-deflate; server_max_window_bits=\"10, permessage-deflate"]),
        None
    );
    // Another header value is still considered.
    assert!(server(&["permessage-deflate; x=\"", "permessage-deflate"]).is_some());
}

#[test]
fn quoted_values_whitespace_and_case_are_accepted() {
    let (p, _) = server(&[
        " Permessage-Deflate ;\tSERVER_MAX_WINDOW_BITS = \"10\" ; client_max_window_bits=\"9\" ",
    ])
    .unwrap();
    assert_eq!(p, params(false, false, 10, 9));
}

// --- client offer ---------------------------------------------------------------------------

#[test]
fn default_offer_allows_the_server_to_limit_our_window() {
    assert_eq!(
        client_offer(&DeflateConfig::default()),
        "permessage-deflate; client_max_window_bits"
    );
}

#[test]
fn offer_carries_the_config() {
    let cfg = DeflateConfig::new()
        .server_no_context_takeover(true)
        .client_no_context_takeover(true)
        .server_max_window_bits(10)
        .client_max_window_bits(12);
    assert_eq!(
        client_offer(&cfg),
        "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=10; client_max_window_bits=12"
    );
}

#[test]
fn offer_and_server_agree() {
    for (snct, cnct, sbits, cbits) in [
        (false, false, 15, 15),
        (true, false, 9, 15),
        (false, true, 15, 10),
        (true, true, 12, 9),
    ] {
        let cfg = DeflateConfig::new()
            .server_no_context_takeover(snct)
            .client_no_context_takeover(cnct)
            .server_max_window_bits(sbits)
            .client_max_window_bits(cbits);
        let offer = client_offer(&cfg);
        let (server_params, response) = server(&[&offer]).unwrap();
        let client_params = client(&cfg, &[&response]).unwrap().unwrap();
        assert_eq!(server_params, client_params, "{offer} -> {response}");
        assert_eq!(client_params, params(snct, cnct, sbits, cbits));
    }
}

// --- client validation of the response ------------------------------------------------------

#[test]
fn no_extension_in_response_means_declined() {
    assert_eq!(client(&DeflateConfig::default(), &[]), Ok(None));
}

#[test]
fn valid_responses_are_accepted() {
    let cfg = DeflateConfig::default();
    assert_eq!(
        client(&cfg, &["permessage-deflate"]),
        Ok(Some(DeflateParams::default()))
    );
    assert_eq!(
        client(
            &cfg,
            &["permessage-deflate; server_no_context_takeover; client_no_context_takeover"]
        ),
        Ok(Some(params(true, true, 15, 15)))
    );
    // The server may limit its own window, and ours since we offered client_max_window_bits.
    assert_eq!(
        client(
            &cfg,
            &["permessage-deflate; server_max_window_bits=8; client_max_window_bits=8"]
        ),
        Ok(Some(params(false, false, 8, 8)))
    );
}

#[test]
fn response_values_larger_than_offered_are_refused() {
    let cfg = DeflateConfig::new()
        .server_max_window_bits(10)
        .client_max_window_bits(11);
    assert_eq!(
        client(&cfg, &["permessage-deflate; server_max_window_bits=11"]),
        Err(NegotiationError::InvalidValue)
    );
    assert_eq!(
        client(&cfg, &["permessage-deflate; client_max_window_bits=12"]),
        Err(NegotiationError::InvalidValue)
    );
    assert_eq!(
        client(
            &cfg,
            &["permessage-deflate; server_max_window_bits=10; client_max_window_bits=9"]
        ),
        Ok(Some(params(false, false, 10, 9)))
    );
    // Unstated windows are what we offered.
    assert_eq!(
        client(&cfg, &["permessage-deflate"]),
        Ok(Some(params(false, false, 10, 11)))
    );
}

#[test]
fn response_without_requested_server_no_context_takeover_is_refused() {
    let cfg = DeflateConfig::new().server_no_context_takeover(true);
    assert_eq!(
        client(&cfg, &["permessage-deflate"]),
        Err(NegotiationError::InvalidValue)
    );
}

#[test]
fn malformed_responses_are_refused() {
    let cfg = DeflateConfig::default();
    for (response, error) in [
        (
            "permessage-deflate; client_max_window_bits",
            NegotiationError::InvalidValue,
        ),
        (
            "permessage-deflate; server_max_window_bits",
            NegotiationError::InvalidValue,
        ),
        (
            "permessage-deflate; server_max_window_bits=16",
            NegotiationError::InvalidValue,
        ),
        (
            "permessage-deflate; client_max_window_bits=7",
            NegotiationError::InvalidValue,
        ),
        (
            "permessage-deflate; server_no_context_takeover=true",
            NegotiationError::Malformed,
        ),
        (
            "permessage-deflate; client_no_context_takeover; client_no_context_takeover",
            NegotiationError::Malformed,
        ),
        ("permessage-deflate; foo", NegotiationError::Malformed),
        (
            "permessage-deflate; server_max_window_bits=\"10",
            NegotiationError::Malformed,
        ),
        ("permessage-deflate;;", NegotiationError::Malformed),
        ("x-other", NegotiationError::Unexpected),
        (
            "permessage-deflate, permessage-deflate",
            NegotiationError::Unexpected,
        ),
    ] {
        assert_eq!(client(&cfg, &[response]), Err(error.clone()), "{response}");
    }
    assert_eq!(
        client(&cfg, &["permessage-deflate", "permessage-deflate"]),
        Err(NegotiationError::Unexpected)
    );
}

#[test]
fn pooled_client_offers_client_no_context_takeover() {
    let cfg =
        DeflateConfig::new().policy(CompressorPolicy::Pooled(Arc::new(CompressorPool::new(1))));
    assert_eq!(
        client_offer(&cfg),
        "permessage-deflate; client_no_context_takeover; client_max_window_bits"
    );
    // Even if the server does not echo it, our pooled compressor resets per message anyway.
    assert_eq!(
        client(&cfg, &["permessage-deflate"]),
        Ok(Some(DeflateParams::default()))
    );
}
