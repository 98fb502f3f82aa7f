//! Streamable HTTP servers: the bearer (static, or from an OAuth 2.1 client
//! credentials grant) injected into every request, and what a failed
//! connection tells the operator.
//!
//! The token is read per request, not fixed at connect: a refreshed token
//! is simply the next request's header, so a refresh never reconnects the
//! session. A 401 triggers one refresh and one retry of that request.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::{Error as SseError, Sse};
use tokio::sync::Mutex;

use super::config::{ClientCredentials, HttpAuth, HttpServer, Secret};

/// Refresh this long before the token's stated expiry.
const REFRESH_MARGIN: Duration = Duration::from_secs(60);
/// Lifetime assumed when the token endpoint states none.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(300);

/// Where the bearer comes from.
#[derive(Clone)]
enum Bearer {
    None,
    Static(Secret),
    Oauth(Arc<TokenCache>),
}

/// A reqwest client that sets the bearer on every request.
#[derive(Clone)]
pub struct AuthedClient {
    inner: reqwest::Client,
    bearer: Bearer,
}

impl AuthedClient {
    async fn header(&self) -> Result<Option<String>, StreamableHttpError<reqwest::Error>> {
        match &self.bearer {
            Bearer::None => Ok(None),
            Bearer::Static(token) => Ok(Some(token.expose().to_owned())),
            Bearer::Oauth(cache) => cache
                .token(false)
                .await
                .map(|t| Some(t.expose().to_owned()))
                .map_err(|e| StreamableHttpError::UnexpectedServerResponse(Cow::Owned(e))),
        }
    }

    /// Runs `request` with the current bearer; after a 401, once more with
    /// a freshly fetched token when there is a flow to get one (a static
    /// token stays wrong, and its 401 is the answer).
    async fn authorized<T, F, Fut>(
        &self,
        request: F,
    ) -> Result<T, StreamableHttpError<reqwest::Error>>
    where
        F: Fn(Option<String>) -> Fut,
        Fut: Future<Output = Result<T, StreamableHttpError<reqwest::Error>>>,
    {
        let first = request(self.header().await?).await;
        match (&first, &self.bearer) {
            (Err(error), Bearer::Oauth(cache)) if unauthorized(error) => {
                let token = cache
                    .token(true)
                    .await
                    .map_err(|e| StreamableHttpError::UnexpectedServerResponse(Cow::Owned(e)))?;
                request(Some(token.expose().to_owned())).await
            }
            _ => first,
        }
    }
}

fn unauthorized(error: &StreamableHttpError<reqwest::Error>) -> bool {
    match error {
        StreamableHttpError::AuthRequired(_) => true,
        StreamableHttpError::HttpStatus(status) => status.status == 401,
        _ => false,
    }
}

impl StreamableHttpClient for AuthedClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            None,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.authorized(|header| {
            self.inner.post_message_with_response_limits(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                header,
                custom_headers.clone(),
                limits,
            )
        })
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        let header = self.header().await?;
        self.inner
            .delete_session(uri, session_id, header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.authorized(|header| {
            self.inner.get_stream(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                header,
                custom_headers.clone(),
            )
        })
        .await
    }
}

/// The transport to `server`.
pub fn transport(
    name: &str,
    server: &HttpServer,
) -> Result<StreamableHttpClientTransport<AuthedClient>, String> {
    let mut headers = HashMap::new();
    for (key, value) in &server.headers {
        let header = HeaderName::try_from(key.as_str())
            .map_err(|_| format!("MCP server `{name}`: `{key}` is not a valid header name"))?;
        let value = HeaderValue::try_from(value.expose()).map_err(|_| {
            // The value is a secret: say which header, never what it held.
            format!("MCP server `{name}`: the value of header `{key}` is not a valid header value")
        })?;
        headers.insert(header, value);
    }
    let inner = reqwest::Client::builder()
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
    let bearer = match (&server.token, &server.auth) {
        (Some(token), _) => Bearer::Static(token.clone()),
        (None, Some(HttpAuth::OauthClientCredentials(grant))) => Bearer::Oauth(Arc::new(
            TokenCache::new(inner.clone(), grant.clone(), server.url.clone()),
        )),
        (None, None) => Bearer::None,
    };
    let config =
        StreamableHttpClientTransportConfig::with_uri(server.url.as_str()).custom_headers(headers);
    Ok(StreamableHttpClientTransport::with_client(
        AuthedClient { inner, bearer },
        config,
    ))
}

/// A failed initialize, in the operator's words: an endpoint that refuses
/// a Streamable HTTP POST is most often an old HTTP+SSE server.
pub fn explain_initialize_error(server: &HttpServer, error: &impl std::fmt::Display) -> String {
    let text = error.to_string();
    // The token flow's own message says what the authorization server
    // answered: keep it whole.
    if let Some(at) = ["the token endpoint", "no token_url is configured"]
        .iter()
        .find_map(|m| text.find(m))
    {
        let detail = one_line(&text[at..]);
        return format!("getting a token for {} failed: {detail}", server.url);
    }
    // The transport's error carries its type names and the response body
    // (often an HTML page): keep the status line, which says it all.
    let status = text.find("HTTP ").and_then(|at| {
        let rest = &text[at + 5..];
        let code: String = rest.chars().take_while(char::is_ascii_digit).collect();
        (code.len() == 3).then(|| {
            let reason: String = rest[3..]
                .chars()
                .take_while(|c| *c != ':' && *c != '\n' && *c != ',')
                .collect();
            format!("HTTP {code}{}", reason.trim_end())
        })
    });
    let refused_post = status
        .as_deref()
        .is_some_and(|s| s.starts_with("HTTP 404") || s.starts_with("HTTP 405"))
        || text.contains("Unexpected content type");
    let detail = status.unwrap_or_else(|| one_line(&text));
    if refused_post {
        format!(
            "initialize over Streamable HTTP failed ({detail} to a POST at {}): the server does \
             not speak the Streamable HTTP transport; a server that speaks only the old \
             HTTP+SSE transport is not supported: point `url` at its Streamable HTTP endpoint \
             (often /mcp)",
            server.url
        )
    } else {
        format!(
            "initialize over Streamable HTTP at {} failed: {detail}",
            server.url
        )
    }
}

/// The first 300 characters of `text` on one line, without the transport's
/// type names.
fn one_line(text: &str) -> String {
    let text = text.rsplit_once("] error: ").map_or(text, |(_, rest)| rest);
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(300)
        .collect()
}

/// Tokens of one client credentials grant: fetched on first use, kept until
/// `REFRESH_MARGIN` before they expire, fetched anew on demand after a 401.
pub struct TokenCache {
    http: reqwest::Client,
    grant: ClientCredentials,
    /// The MCP endpoint, where discovery starts.
    server_url: String,
    /// The token endpoint, configured or once discovered.
    endpoint: Mutex<Option<String>>,
    current: Mutex<Option<(Secret, Instant)>>,
}

/// The token endpoint's answer (RFC 6749 section 5.1).
#[derive(serde::Deserialize)]
struct TokenResponse {
    access_token: String,
    #[serde(default)]
    token_type: Option<String>,
    #[serde(default)]
    expires_in: Option<u64>,
}

impl TokenCache {
    fn new(http: reqwest::Client, grant: ClientCredentials, server_url: String) -> Self {
        TokenCache {
            http,
            endpoint: Mutex::new(grant.token_url.clone()),
            grant,
            server_url,
            current: Mutex::new(None),
        }
    }

    /// The token endpoint: configured, or found through the server's
    /// protected resource metadata (RFC 9728: at the path-suffixed
    /// well-known URL, then the root one) and its first authorization
    /// server's metadata (RFC 8414, then OpenID Connect discovery).
    async fn endpoint(&self) -> Result<String, String> {
        let mut endpoint = self.endpoint.lock().await;
        if let Some(url) = endpoint.as_ref() {
            return Ok(url.clone());
        }
        let server = reqwest::Url::parse(&self.server_url)
            .map_err(|e| format!("`url` {} is not a URL: {e}", self.server_url))?;
        let path = server.path().trim_end_matches('/');
        let resource = self
            .metadata(&server, "oauth-protected-resource", path)
            .await
            .map_err(|e| format!("no token_url is configured and {e}"))?;
        let issuer = resource["authorization_servers"][0]
            .as_str()
            .and_then(|s| reqwest::Url::parse(s).ok())
            .ok_or_else(|| {
                format!(
                    "no token_url is configured and the protected resource metadata of {} names \
                     no authorization server",
                    self.server_url
                )
            })?;
        let issuer_path = issuer.path().trim_end_matches('/').to_owned();
        let mut found = None;
        for kind in ["oauth-authorization-server", "openid-configuration"] {
            if let Ok(meta) = self.metadata(&issuer, kind, &issuer_path).await
                && let Some(url) = meta["token_endpoint"].as_str()
            {
                found = Some(url.to_owned());
                break;
            }
        }
        let url = found.ok_or_else(|| {
            format!("no token_url is configured and the authorization server {issuer} publishes no token_endpoint")
        })?;
        *endpoint = Some(url.clone());
        Ok(url)
    }

    /// `/.well-known/<kind><path>`, then `/.well-known/<kind>`, on `base`'s
    /// origin: the first that answers JSON.
    async fn metadata(
        &self,
        base: &reqwest::Url,
        kind: &str,
        path: &str,
    ) -> Result<serde_json::Value, String> {
        let mut candidates = vec![format!("/.well-known/{kind}{path}")];
        if !path.is_empty() {
            candidates.push(format!("/.well-known/{kind}"));
        }
        for candidate in &candidates {
            let Ok(url) = base.join(candidate) else {
                continue;
            };
            let Ok(response) = self.http.get(url).send().await else {
                continue;
            };
            if response.status().is_success()
                && let Ok(value) = response.json::<serde_json::Value>().await
            {
                return Ok(value);
            }
        }
        Err(format!(
            "no {kind} metadata was found at {} ({})",
            base.origin().ascii_serialization(),
            candidates.join(", ")
        ))
    }

    /// The current token, fetched when there is none, when it is due for
    /// refresh, or when `force` (the server refused it).
    async fn token(&self, force: bool) -> Result<Secret, String> {
        let mut current = self.current.lock().await;
        if !force
            && let Some((token, refresh_at)) = current.as_ref()
            && Instant::now() < *refresh_at
        {
            return Ok(token.clone());
        }
        let (token, lifetime) = self.fetch().await?;
        let refresh_at = Instant::now() + lifetime.saturating_sub(REFRESH_MARGIN);
        *current = Some((token.clone(), refresh_at));
        Ok(token)
    }

    async fn fetch(&self) -> Result<(Secret, Duration), String> {
        let grant = &self.grant;
        let token_url = self.endpoint().await?;
        let mut form = vec![("grant_type", "client_credentials".to_owned())];
        if !grant.scopes.is_empty() {
            form.push(("scope", grant.scopes.join(" ")));
        }
        if let Some(resource) = &grant.resource {
            form.push(("resource", resource.clone()));
        }
        let body = form
            .iter()
            .map(|(k, v)| format!("{k}={}", form_encode(v)))
            .collect::<Vec<_>>()
            .join("&");
        // client_secret_basic (RFC 6749 section 2.3.1): id and secret are
        // form-encoded before they are joined and base64-encoded.
        let response = self
            .http
            .post(&token_url)
            .basic_auth(
                form_encode(&grant.client_id),
                Some(form_encode(grant.client_secret.expose())),
            )
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| {
                format!(
                    "the token endpoint {token_url} is unreachable: {}",
                    e.without_url()
                )
            })?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        if !status.is_success() {
            // The error body of RFC 6749 section 5.2 names no secret; cut it
            // anyway, it is the server's text.
            let detail: String = text.chars().take(300).collect();
            return Err(format!(
                "the token endpoint {token_url} refused the client credentials grant for client \
                 `{}` (HTTP {status}): {detail}",
                grant.client_id
            ));
        }
        let parsed: TokenResponse = serde_json::from_str(&text).map_err(|e| {
            format!("the token endpoint {token_url} answered without a usable access_token ({e})")
        })?;
        if let Some(kind) = &parsed.token_type
            && !kind.eq_ignore_ascii_case("bearer")
        {
            return Err(format!(
                "the token endpoint {token_url} issued a `{kind}` token; only bearer tokens are \
                 supported"
            ));
        }
        let lifetime = parsed
            .expires_in
            .map_or(DEFAULT_LIFETIME, Duration::from_secs);
        Ok((Secret::new(parsed.access_token), lifetime))
    }
}

/// `application/x-www-form-urlencoded` encoding of one value.
fn form_encode(value: &str) -> String {
    use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
    const FORM: &AsciiSet = &NON_ALPHANUMERIC
        .remove(b'*')
        .remove(b'-')
        .remove(b'.')
        .remove(b'_');
    utf8_percent_encode(value, FORM)
        .to_string()
        .replace("%20", "+")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_encoding_escapes_what_basic_auth_and_forms_cannot_carry() {
        assert_eq!(form_encode("a b:c/d"), "a+b%3Ac%2Fd");
        assert_eq!(form_encode("Az09-._*"), "Az09-._*");
    }
}
