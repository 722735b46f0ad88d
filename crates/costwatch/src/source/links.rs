//! A session's link in the team's own tool: the page of the system the
//! source reads that shows the session (LiteLLM's log page, Langfuse's
//! session page, the reference gateway's), or a page `source.ui_url`
//! names with `{session_id}` in it.

use super::SourceKind;
use url::Url;

/// What `source.ui_url` may hold besides a base URL.
pub const PLACEHOLDERS: [&str; 2] = ["{session_id}", "{project_id}"];

/// How a session id becomes a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionLinks {
    /// A URL with `{session_id}` and perhaps `{project_id}` in it.
    template: String,
}

impl SessionLinks {
    /// The links of a `kind` source: `ui_url` itself when it holds
    /// `{session_id}`; otherwise the kind's session page below `ui_url`,
    /// or below `api_url`'s origin for a system whose UI is served on its
    /// API's host. `None` for a kind with no session page and no template.
    pub fn new(kind: SourceKind, api_url: Option<&Url>, ui_url: Option<&str>) -> Option<Self> {
        if let Some(t) = ui_url.filter(|u| u.contains("{session_id}")) {
            return Some(SessionLinks {
                template: t.to_owned(),
            });
        }
        let facts = kind.facts();
        let page = facts.session_page?;
        let base = match (ui_url, api_url) {
            (Some(base), _) => base.to_owned(),
            (None, Some(api)) if facts.ui_on_api_host => api.origin().ascii_serialization(),
            _ => return None,
        };
        Some(Self::below(&base, page))
    }

    /// `page` below `base`, one slash between them.
    pub fn below(base: &str, page: &str) -> Self {
        SessionLinks {
            template: format!("{}/{page}", base.trim_end_matches('/')),
        }
    }

    /// Whether it needs the project's id (Langfuse's pages do).
    pub fn needs_project(&self) -> bool {
        self.template.contains("{project_id}")
    }

    /// The links with the project's id in place.
    pub fn with_project(&self, project_id: &str) -> Self {
        SessionLinks {
            template: self.template.replace("{project_id}", &encode(project_id)),
        }
    }

    /// The link of `session_id`; `None` while the project's id is missing.
    pub fn session(&self, session_id: &str) -> Option<String> {
        (!self.needs_project()).then(|| self.template.replace("{session_id}", &encode(session_id)))
    }
}

/// `value` percent-encoded for a path segment or a query value.
fn encode(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

/// Why `ui_url` is no link: it is not an http(s) URL once its
/// placeholders are filled in, or names one costwatch does not fill.
pub fn problem(ui_url: &str) -> Option<String> {
    let mut filled = ui_url.to_owned();
    for p in PLACEHOLDERS {
        filled = filled.replace(p, "x");
    }
    if let Some(at) = filled.find('{') {
        let name: String = filled[at..].chars().take_while(|c| *c != '}').collect();
        return Some(format!(
            "`{name}}}` is not filled in; use {}",
            PLACEHOLDERS.join(" or ")
        ));
    }
    match Url::parse(&filled) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => None,
        Ok(_) => Some("must be an http(s) URL".to_owned()),
        Err(e) => Some(format!("must be an http(s) URL: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn each_kind_links_its_own_page_with_no_setting() {
        let litellm = SessionLinks::new(
            SourceKind::Litellm,
            Some(&url("http://proxy.internal:4000/")),
            None,
        )
        .unwrap();
        assert_eq!(
            litellm.session("s 1/a").as_deref(),
            Some("http://proxy.internal:4000/ui/logs?session_id=s%201%2Fa")
        );
        let langfuse = SessionLinks::new(
            SourceKind::Langfuse,
            Some(&url("https://cloud.langfuse.com")),
            None,
        )
        .unwrap();
        assert!(langfuse.needs_project());
        assert_eq!(langfuse.session("s-1"), None, "not without the project");
        assert_eq!(
            langfuse.with_project("cm1x").session("s-1").as_deref(),
            Some("https://cloud.langfuse.com/project/cm1x/sessions/s-1")
        );
        // The reference gateway's UI is not its API: it takes ui_url.
        let gw = Some(url("https://gateway.example/v1"));
        assert_eq!(
            SessionLinks::new(SourceKind::Reference, gw.as_ref(), None),
            None
        );
        let ui = SessionLinks::new(
            SourceKind::Reference,
            gw.as_ref(),
            Some("https://ui.example/"),
        );
        assert_eq!(
            ui.unwrap().session("s-1").as_deref(),
            Some("https://ui.example/sessions/s-1")
        );
        assert_eq!(SessionLinks::new(SourceKind::Otlp, None, None), None);
    }

    #[test]
    fn a_template_overrides_the_kinds_page() {
        let t = SessionLinks::new(
            SourceKind::Otlp,
            None,
            Some("https://grafana.example/explore?session={session_id}"),
        )
        .unwrap();
        assert_eq!(
            t.session("conv-9").as_deref(),
            Some("https://grafana.example/explore?session=conv-9")
        );
        assert_eq!(
            problem("https://grafana.example/explore?session={session_id}"),
            None
        );
        assert_eq!(problem("https://x.example/{project_id}/{session_id}"), None);
        assert!(
            problem("https://x.example/{trace}")
                .unwrap()
                .contains("`{trace}`")
        );
        assert!(problem("ftp://x.example/").is_some());
        assert!(problem("not a url").is_some());
    }
}
