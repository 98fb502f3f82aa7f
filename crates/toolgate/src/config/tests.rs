use super::*;
use pretty_assertions::assert_eq;

fn parse_err(text: &str) -> String {
    parse(text, Path::new("/p/toolgate.toml"))
        .unwrap_err()
        .to_string()
}

#[test]
fn errors_name_the_file_line_and_what_is_expected() {
    assert_eq!(
        parse_err("policy = \"standard\"\nsurprise = 1\n"),
        "/p/toolgate.toml:2:1: unknown field `surprise`, expected one of `preset`, `policy`, `strict_tool_input`, `roots`, `root_aliases`, `output_dir`, `access`, `paths`, `commands`, `resources`, `rules`, `sandbox`, `limits`, `tools`, `network`, `serve`, `store`, `approvals`, `identity`, `mcp_servers`, `mcp_defer_threshold`, `catalog`"
    );
    assert_eq!(
        parse_err("policy = \"lenient\"\n"),
        "/p/toolgate.toml:1:10: unknown variant `lenient`, expected one of `permissive`, `standard`, `strict`, `readonly`"
    );
    assert_eq!(
        parse_err("[access]\ncap = \"medium\"\n"),
        "/p/toolgate.toml:2:7: unknown variant `medium`, expected one of `read`, `mutate-reversible`, `mutate-irreversible`, `destructive`"
    );
    assert_eq!(
        parse_err("strict_tool_input = \"yes\"\n"),
        "/p/toolgate.toml:1:21: invalid type: string \"yes\", expected a boolean"
    );
    assert_eq!(
        parse_err("[[rules]]\npattern = \"*\"\naction = \"maybe\"\n"),
        "/p/toolgate.toml:3:10: unknown variant `maybe`, expected one of `allow`, `ask`, `deny`"
    );
    assert_eq!(
        parse_err("[resources]\nmax_output_lines = -1\n"),
        "/p/toolgate.toml:2:20: invalid value: integer `-1`, expected usize"
    );
}

fn env(vars: &[(&str, &str)]) -> Environment {
    Environment {
        vars: vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        cwd: PathBuf::from("/nonexistent-cwd"),
    }
}

#[test]
fn environment_over_files_and_flags_over_environment() {
    let file = ConfigFile {
        policy: Some(PolicyPreset::Permissive),
        strict_tool_input: Some(false),
        ..ConfigFile::default()
    };
    let merged = || {
        Some(Merged {
            file: file.clone(),
            base_dir: PathBuf::from("/p"),
            origin: PathBuf::from("/p/toolgate.toml"),
        })
    };
    let none = Overrides::default();
    let s = resolve(merged(), &env(&[]), &none, Sources::default(), None).unwrap();
    assert_eq!(s.policy_preset, PolicyPreset::Permissive);
    assert_eq!(s.input_mode, InputMode::Coerce);

    let e = env(&[
        ("TOOLGATE_POLICY", "strict"),
        ("TOOLGATE_STRICT_TOOL_INPUT", "true"),
    ]);
    let s = resolve(merged(), &e, &none, Sources::default(), None).unwrap();
    assert_eq!(s.policy_preset, PolicyPreset::Strict);
    assert_eq!(s.input_mode, InputMode::Strict);
    assert_eq!(s.policy.access.cap, Some(EffectClass::MutateReversible));

    let flags = Overrides {
        policy: Some(PolicyPreset::Readonly),
        ..Overrides::default()
    };
    let s = resolve(merged(), &e, &flags, Sources::default(), None).unwrap();
    assert_eq!(s.policy_preset, PolicyPreset::Readonly);

    let bad = env(&[("TOOLGATE_STRICT_TOOL_INPUT", "maybe")]);
    let err = resolve(merged(), &bad, &none, Sources::default(), None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "environment variable TOOLGATE_STRICT_TOOL_INPUT=\"maybe\": expected true or false"
    );
}

#[test]
fn elevated_is_off_unless_the_file_or_the_environment_turns_it_on() {
    let with = |text: &str| {
        Some(Merged {
            file: parse(text, Path::new("/p/toolgate.toml")).unwrap(),
            base_dir: PathBuf::from("/p"),
            origin: PathBuf::from("/p/toolgate.toml"),
        })
    };
    let none = Overrides::default();
    let elevated = |text: &str, vars: &[(&str, &str)]| {
        resolve(with(text), &env(vars), &none, Sources::default(), None)
            .unwrap()
            .elevated
    };
    assert!(!elevated("", &[]));
    assert!(!elevated("[tools]\n", &[]));
    assert!(elevated("[tools]\nelevated = true\n", &[]));
    assert!(!elevated(
        "[tools]\nelevated = true\n",
        &[("TOOLGATE_ELEVATED", "false")]
    ));
    assert!(elevated("", &[("TOOLGATE_ELEVATED", "1")]));
    assert_eq!(
        parse_err("[tools]\nelevated = \"yes\"\n"),
        "/p/toolgate.toml:2:12: invalid type: string \"yes\", expected a boolean"
    );
}

#[test]
fn project_sections_replace_user_sections_and_rules_concatenate() {
    let user = parse(
        "policy = \"strict\"\npreset = \"coding\"\n[access]\ndeny = [\"bash\"]\ncap = \"read\"\n[[rules]]\npattern = \"a\"\naction = \"deny\"\n",
        Path::new("/u/config.toml"),
    )
    .unwrap();
    let project = parse(
        "policy = \"standard\"\n[access]\nallow = [\"read\"]\n[[rules]]\npattern = \"b\"\naction = \"ask\"\n",
        Path::new("/p/toolgate.toml"),
    )
    .unwrap();
    let merged = merge(vec![
        (user, PathBuf::from("/u/config.toml")),
        (project, PathBuf::from("/p/toolgate.toml")),
    ])
    .unwrap();
    assert_eq!(merged.file.policy, Some(PolicyPreset::Standard));
    assert_eq!(merged.file.preset, Some(ToolPreset::Coding));
    let s = resolve(
        Some(merged),
        &env(&[]),
        &Overrides::default(),
        Sources::default(),
        None,
    )
    .unwrap();
    // The project's [access] has no cap, so the layer has none.
    assert_eq!(s.policy.access.cap, None);
    assert_eq!(s.policy.access.allow, vec!["read".to_owned()]);
    assert!(s.policy.access.deny.is_empty());
    let patterns: Vec<&str> = s
        .policy
        .rules
        .rules()
        .iter()
        .map(|r| r.pattern.as_str())
        .collect();
    assert_eq!(patterns, ["elevated", "a", "b"]);
}
