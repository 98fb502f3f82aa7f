//! Attacks through repositories a command creates during its run (`git
//! init sub`, a hand-made `.git`, a `.git` file pointing at a git dir of
//! its own, a bare-looking directory): it plants a config key or a hook
//! that runs a program, then real host git is run there the way the user
//! would, and the program must not have run (its marker lies outside the
//! root) while the result's warnings name what toolgate took out. Under
//! both backends, as root. Ordinary repositories a command makes (`git
//! init` and a commit, `git clone` of a local repository) keep their config.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use toolgate_sandbox::{
    BackendChoice, Sandbox, SandboxCommand, SandboxConfig, SandboxOutcome, SandboxSpec,
};

const BACKENDS: [BackendChoice; 2] = [BackendChoice::Bwrap, BackendChoice::Landlock];

/// A root that is a repository with one commit, and a directory outside
/// it for the attacker's programs and their markers.
struct World {
    _dir: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
    outside: PathBuf,
    sandbox: Sandbox,
}

impl World {
    fn new(backend: BackendChoice) -> World {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let root = base.join("root");
        let outside = base.join("outside");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(outside.join("home")).unwrap();
        let stage2 = PathBuf::from(env!("CARGO_BIN_EXE_toolgate-sandbox-stage2"));
        let sandbox =
            Sandbox::new(SandboxConfig::new(stage2, base.join("state")).backend(backend)).unwrap();
        let world = World {
            _dir: dir,
            base,
            root,
            outside,
            sandbox,
        };
        world.host_git_ok(&world.root, &["init", "-q", "-b", "main"]);
        std::fs::write(world.root.join("README"), "hello\n").unwrap();
        world.host_git_ok(&world.root, &["add", "README"]);
        world.host_git_ok(&world.root, &["commit", "-qm", "init"]);
        world
    }

    /// A program outside the root that leaves `ran-NAME` there when run.
    fn evil(&self, name: &str) -> String {
        use std::os::unix::fs::PermissionsExt;
        let path = self.outside.join(format!("evil-{name}"));
        let marker = self.marker(name);
        std::fs::write(
            &path,
            format!("#!/bin/sh\ntouch '{}'\nexit 0\n", marker.display()),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.display().to_string()
    }

    fn marker(&self, name: &str) -> PathBuf {
        self.outside.join(format!("ran-{name}"))
    }

    async fn run(&self, script: &str) -> SandboxOutcome {
        common::run_shell(&self.sandbox, &self.root, script).await
    }

    /// Host git as the user runs it: no system or global config of the
    /// machine, nothing of the test's environment.
    fn host_git(&self, dir: &Path, args: &[&str], stdin: &str) -> Output {
        use std::io::Write;
        // Bounded: a planted program that did run may leave git waiting.
        let mut child = Command::new("timeout")
            .args(["-k", "5", "30", "git"])
            .args(args)
            .current_dir(dir)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", self.outside.join("home"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CEILING_DIRECTORIES", &self.base)
            .env("GIT_AUTHOR_NAME", "u")
            .env("GIT_AUTHOR_EMAIL", "u@example.com")
            .env("GIT_COMMITTER_NAME", "u")
            .env("GIT_COMMITTER_EMAIL", "u@example.com")
            // Fallbacks below the keys under attack, which never wait for a
            // person: without them git would start vi or less, or prompt.
            .env("EDITOR", "true")
            .env("VISUAL", "true")
            .env("PAGER", "cat")
            .env("GIT_TERMINAL_PROMPT", "0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        let _ = input.write_all(stdin.as_bytes());
        drop(input);
        child.wait_with_output().unwrap()
    }

    fn host_git_ok(&self, dir: &Path, args: &[&str]) -> String {
        let out = self.host_git(dir, args, "");
        assert!(
            out.status.success(),
            "git {args:?} in {}: {out:?}",
            dir.display()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

/// A new repository `sub` with a commit of `f` and `f` changed since.
const NEW_REPO: &str = "git init -q -b main sub && cd sub && echo a > f && git add f && \
     git -c user.name=a -c user.email=a@b commit -qm init && echo b > f";

/// What one attack plants in `sub` (`EVIL` stands for its program), and
/// the host git command that would run it.
struct Attack {
    name: &'static str,
    plant: &'static str,
    trigger: &'static [&'static str],
    stdin: &'static str,
    /// What the warnings must name.
    named: &'static str,
}

const ATTACKS: &[Attack] = &[
    Attack {
        name: "fsmonitor",
        plant: "git config core.fsmonitor EVIL",
        trigger: &["status"],
        stdin: "",
        named: "core.fsmonitor",
    },
    Attack {
        name: "hookspath",
        plant: "mkdir ../h && printf '#!/bin/sh\\nEVIL\\n' > ../h/pre-commit && chmod +x ../h/pre-commit && git config core.hooksPath ../h",
        trigger: &["commit", "--allow-empty", "-qm", "x"],
        stdin: "",
        named: "core.hookspath",
    },
    Attack {
        name: "include",
        plant: "printf '[core]\\n\\tfsmonitor = EVIL\\n' > ../inc.cfg && git config include.path ../../inc.cfg",
        trigger: &["status"],
        stdin: "",
        named: "include.path",
    },
    Attack {
        name: "includeif",
        plant: "printf '[core]\\n\\tfsmonitor = EVIL\\n' > ../inc2.cfg && git config 'includeIf.gitdir:/.path' ../../inc2.cfg",
        trigger: &["status"],
        stdin: "",
        named: "includeif.gitdir:/.path",
    },
    Attack {
        name: "alias",
        plant: "git config alias.st '!EVIL'",
        trigger: &["st"],
        stdin: "",
        named: "alias.st",
    },
    Attack {
        name: "editor",
        plant: "git config core.editor EVIL",
        trigger: &["commit", "--allow-empty"],
        stdin: "",
        named: "core.editor",
    },
    Attack {
        name: "sequence-editor",
        plant: "git checkout -q -- f && git config sequence.editor EVIL",
        trigger: &["rebase", "-i", "HEAD"],
        stdin: "",
        named: "sequence.editor",
    },
    Attack {
        name: "diff-external",
        plant: "git config diff.external EVIL",
        trigger: &["diff"],
        stdin: "",
        named: "diff.external",
    },
    Attack {
        name: "textconv",
        plant: "echo 'f diff=x' > .gitattributes && git config diff.x.textconv EVIL",
        trigger: &["diff"],
        stdin: "",
        named: "diff.x.textconv",
    },
    Attack {
        name: "diff-command",
        plant: "echo 'f diff=x' > .gitattributes && git config diff.x.command EVIL",
        trigger: &["diff"],
        stdin: "",
        named: "diff.x.command",
    },
    Attack {
        name: "clean",
        plant: "echo 'f filter=x' > .gitattributes && git config filter.x.clean EVIL",
        trigger: &["add", "f"],
        stdin: "",
        named: "filter.x.clean",
    },
    Attack {
        name: "process",
        plant: "echo 'f filter=x' > .gitattributes && git config filter.x.process EVIL",
        trigger: &["add", "f"],
        stdin: "",
        named: "filter.x.process",
    },
    Attack {
        name: "smudge",
        plant: "echo 'f filter=x' > .gitattributes && git config filter.x.smudge EVIL && rm f",
        trigger: &["checkout", "--", "f"],
        stdin: "",
        named: "filter.x.smudge",
    },
    Attack {
        name: "uploadpack",
        plant: "git remote add o \"$PWD/..\" && git config remote.o.uploadpack EVIL",
        trigger: &["fetch", "-q", "o"],
        stdin: "",
        named: "remote.o.uploadpack",
    },
    Attack {
        name: "receivepack",
        plant: "git init -q --bare ../target.git && git remote add o \"$PWD/../target.git\" && git config remote.o.receivepack EVIL",
        trigger: &["push", "-q", "o", "main"],
        stdin: "",
        named: "remote.o.receivepack",
    },
    Attack {
        name: "sshcommand",
        plant: "git remote add o ssh://example.invalid/x && git config core.sshCommand EVIL",
        trigger: &["fetch", "-q", "o"],
        stdin: "",
        named: "core.sshcommand",
    },
    Attack {
        name: "credential",
        plant: "git config credential.helper '!EVIL'",
        trigger: &["credential", "fill"],
        stdin: "protocol=https\nhost=example.invalid\n\n",
        named: "credential.helper",
    },
    Attack {
        name: "credential-url",
        plant: "git config credential.https://example.invalid.helper '!EVIL'",
        trigger: &["credential", "fill"],
        stdin: "protocol=https\nhost=example.invalid\n\n",
        named: "credential.https://example.invalid.helper",
    },
    Attack {
        name: "gpg",
        plant: "git config gpg.program EVIL",
        trigger: &["commit", "-S", "--allow-empty", "-qm", "x"],
        stdin: "",
        named: "gpg.program",
    },
    Attack {
        name: "gpg-format",
        plant: "git config gpg.format ssh && git config gpg.ssh.program EVIL && git config user.signingkey key::x",
        trigger: &["commit", "-S", "--allow-empty", "-qm", "x"],
        stdin: "",
        named: "gpg.ssh.program",
    },
];

/// Keys whose programs host git runs only in situations a test cannot
/// stage cheaply (a terminal for pagers and colour filters, a server, a
/// merge): they must be gone from the config and named.
const REMOVED_KEYS: &[(&str, &str)] = &[
    ("core.pager", "EVIL"),
    ("pager.log", "EVIL"),
    ("interactive.diffFilter", "EVIL"),
    ("core.askPass", "EVIL"),
    ("core.gitProxy", "EVIL"),
    ("core.alternateRefsCommand", "EVIL"),
    ("core.worktree", "/"),
    ("merge.x.driver", "EVIL"),
    ("uploadpack.packObjectsHook", "EVIL"),
    ("protocol.ext.allow", "always"),
    ("difftool.x.cmd", "EVIL"),
    ("mergetool.x.path", "EVIL"),
    ("submodule.m.update", "!EVIL"),
    ("sendemail.sendmailCmd", "EVIL"),
    ("imap.tunnel", "EVIL"),
    ("gpg.ssh.defaultKeyCommand", "EVIL"),
    ("init.templateDir", "/"),
];

#[tokio::test]
async fn keys_planted_in_a_new_repository_run_nothing_on_the_host() {
    let mut failures = Vec::new();
    for backend in BACKENDS {
        let world = World::new(backend);
        for attack in ATTACKS {
            let evil = world.evil(attack.name);
            let plant = attack.plant.replace("EVIL", &evil);
            let script = format!(
                "set -e; mkdir {n} && cd {n} && {NEW_REPO} && {plant}",
                n = attack.name
            );
            let outcome = world.run(&script).await;
            assert_eq!(
                outcome.outcome.exit_code, 0,
                "{backend:?} {}: {outcome:?}",
                attack.name
            );
            let sub = world.root.join(attack.name).join("sub");
            let _ = world.host_git(&sub, attack.trigger, attack.stdin);
            if world.marker(attack.name).exists() {
                failures.push(format!(
                    "{backend:?} {}: the planted program ran",
                    attack.name
                ));
            }
            if !outcome.warnings.iter().any(|w| w.contains(attack.named)) {
                failures.push(format!(
                    "{backend:?} {}: no warning names {}: {:?}",
                    attack.name, attack.named, outcome.warnings
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
async fn other_program_keys_are_removed_and_named() {
    for backend in BACKENDS {
        let world = World::new(backend);
        let evil = world.evil("other");
        let sets: Vec<String> = REMOVED_KEYS
            .iter()
            .map(|(key, value)| format!("git config '{key}' '{}'", value.replace("EVIL", &evil)))
            .collect();
        let script = format!("set -e; {NEW_REPO} && {}", sets.join(" && "));
        let outcome = world.run(&script).await;
        assert_eq!(outcome.outcome.exit_code, 0, "{backend:?}: {outcome:?}");
        let config = world.root.join("sub/.git/config");
        let left = world.host_git_ok(
            &world.root,
            &[
                "config",
                "--file",
                config.to_str().unwrap(),
                "--no-includes",
                "--list",
            ],
        );
        for (key, _) in REMOVED_KEYS {
            let listed = key.to_ascii_lowercase();
            assert!(
                !left.contains(&format!("{listed}=")),
                "{backend:?}: {key} left in\n{left}"
            );
            assert!(
                outcome
                    .warnings
                    .iter()
                    .any(|w| w.contains(&format!("`{listed}`"))),
                "{backend:?}: {key} not named: {:?}",
                outcome.warnings
            );
        }
        // What an ordinary repository has stays.
        assert!(left.contains("core.repositoryformatversion=0"), "{left}");
    }
}

#[tokio::test]
async fn hooks_planted_in_a_new_repository_never_run() {
    for backend in BACKENDS {
        let world = World::new(backend);
        let mut plant = String::from("set -e; git init -q -b main sub && cd sub");
        let hooks = [
            "pre-commit",
            "post-commit",
            "reference-transaction",
            "post-checkout",
        ];
        for hook in hooks {
            let evil = world.evil(hook);
            plant.push_str(&format!(
                " && printf '#!/bin/sh\\n{evil}\\n' > .git/hooks/{hook} && chmod +x .git/hooks/{hook}"
            ));
        }
        // A symlinked hook and a hook directory that is a symlink elsewhere.
        let linked = world.evil("linked");
        plant.push_str(&format!(" && ln -s {linked} .git/hooks/post-merge"));
        let outcome = world.run(&plant).await;
        assert_eq!(outcome.outcome.exit_code, 0, "{backend:?}: {outcome:?}");
        let sub = world.root.join("sub");
        world.host_git_ok(&sub, &["commit", "--allow-empty", "-qm", "x"]);
        world.host_git_ok(&sub, &["checkout", "-qb", "other"]);
        for hook in hooks {
            assert!(!world.marker(hook).exists(), "{backend:?}: {hook} ran");
            assert!(
                outcome
                    .warnings
                    .iter()
                    .any(|w| w.contains(&format!("hooks/{hook}"))),
                "{backend:?}: {hook} not named: {:?}",
                outcome.warnings
            );
        }
        assert!(std::fs::symlink_metadata(sub.join(".git/hooks/post-merge")).is_err());
        // git init's samples stay; they run by no name.
        assert!(sub.join(".git/hooks/pre-commit.sample").exists());
    }
}

#[tokio::test]
async fn hand_made_pointed_at_and_bare_repositories_are_neutralised_too() {
    for backend in BACKENDS {
        let world = World::new(backend);
        let evil: Vec<String> = (0..4).map(|n| world.evil(&format!("kind{n}"))).collect();
        let script = format!(
            "set -e; \
             mkdir -p hand/.git/objects hand/.git/refs hand/.git/hooks && echo 'ref: refs/heads/main' > hand/.git/HEAD && \
             printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = {e0}\\n' > hand/.git/config; \
             mkdir store && git init -q --separate-git-dir=\"$PWD/store/gd\" pointed && git -C pointed config core.fsmonitor {e1}; \
             git init -q --bare bare.git && git -C bare.git config alias.x '!{e2}'; \
             mkdir away && echo 'gitdir: /tmp/toolgate-not-there/gd' > away/.git; \
             mkdir worktree-src && cd worktree-src && git init -q -b main && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m i && \
             git worktree add -q ../wt && printf '[core]\\n\\tfsmonitor = {e3}\\n' > .git/worktrees/wt/config.worktree && \
             git config extensions.worktreeConfig true",
            e0 = evil[0],
            e1 = evil[1],
            e2 = evil[2],
            e3 = evil[3],
        );
        let outcome = world.run(&script).await;
        assert_eq!(outcome.outcome.exit_code, 0, "{backend:?}: {outcome:?}");
        let _ = world.host_git(&world.root.join("hand"), &["status"], "");
        let _ = world.host_git(&world.root.join("pointed"), &["status"], "");
        let _ = world.host_git(&world.root.join("bare.git"), &["x"], "");
        let _ = world.host_git(&world.root.join("wt"), &["status"], "");
        for n in 0..4 {
            assert!(
                !world.marker(&format!("kind{n}")).exists(),
                "{backend:?}: kind{n} ran"
            );
        }
        let named = |part: &str| outcome.warnings.iter().any(|w| w.contains(part));
        for part in [
            "hand/.git/config",
            "store/gd/config",
            "bare.git/config",
            "away/.git",
            "worktrees/wt/config.worktree",
        ] {
            assert!(
                named(part),
                "{backend:?}: {part} not named: {:?}",
                outcome.warnings
            );
        }
        assert!(!world.root.join("away/.git").exists());
        assert!(world.root.join("away/.git.disabled-by-toolgate").exists());
    }
}

#[tokio::test]
async fn ordinary_new_repositories_keep_their_config() {
    for backend in BACKENDS {
        let world = World::new(backend);
        let root = world.root.display().to_string();
        let script = format!(
            "set -e; git init -q -b main sub && cd sub && echo x > f && git add f && \
             git -c user.name=a -c user.email=a@b commit -qm one && cd .. && \
             git clone -q '{root}' c && git -C c config branch.main.description kept"
        );
        let outcome = world.run(&script).await;
        assert_eq!(outcome.outcome.exit_code, 0, "{backend:?}: {outcome:?}");
        assert_eq!(outcome.warnings, Vec::<String>::new(), "{backend:?}");
        let clone = world.root.join("c");
        assert_eq!(
            world
                .host_git_ok(&clone, &["config", "remote.origin.url"])
                .trim(),
            root
        );
        assert_eq!(
            world
                .host_git_ok(&clone, &["config", "branch.main.remote"])
                .trim(),
            "origin"
        );
        world.host_git_ok(&clone, &["status"]);
        world.host_git_ok(
            &world.root.join("sub"),
            &["commit", "--allow-empty", "-qm", "two"],
        );
        assert_eq!(
            world
                .host_git_ok(&world.root.join("sub"), &["rev-list", "--count", "HEAD"])
                .trim(),
            "2"
        );
        // And a later run finds them as they are, with nothing to say.
        let again = world.run("git -C sub status --porcelain").await;
        assert_eq!(again.warnings, Vec::<String>::new(), "{backend:?}");
    }
}

#[tokio::test]
async fn a_cancelled_run_is_neutralised_too() {
    for backend in BACKENDS {
        let world = World::new(backend);
        let evil = world.evil("cancelled");
        let script = format!(
            "git init -q sub && git -C sub config core.fsmonitor {evil} && touch planted && sleep 60"
        );
        let spec = SandboxSpec::for_root(&world.root);
        let run = world.sandbox.run(&spec, SandboxCommand::shell(&script));
        let planted = world.root.join("planted");
        tokio::select! {
            _ = run => panic!("{backend:?}: the run ended by itself"),
            () = async {
                while !planted.exists() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            } => {}
        }
        let _ = world.host_git(&world.root.join("sub"), &["status"], "");
        assert!(
            !world.marker("cancelled").exists(),
            "{backend:?}: fsmonitor ran"
        );
        let left = world.host_git(&world.root.join("sub"), &["config", "core.fsmonitor"], "");
        assert!(left.stdout.is_empty(), "{backend:?}: {left:?}");
    }
}

#[tokio::test]
async fn configs_git_cannot_edit_safely_are_replaced_and_commondirs_followed() {
    for backend in BACKENDS {
        let world = World::new(backend);
        let evil: Vec<String> = (0..3).map(|n| world.evil(&format!("odd{n}"))).collect();
        let script = format!(
            "set -e; \
             mkdir -p mal/.git/objects mal/.git/refs && echo 'ref: refs/heads/main' > mal/.git/HEAD; \
             printf '[core]\\n\\tfsmonitor = {e0}\\n[broken\\n' > mal/.git/config; \
             git init -q linked; printf '[core]\\n\\tfsmonitor = {e1}\\n' > cfg; \
             rm linked/.git/config; ln -s ../../cfg linked/.git/config; \
             mkdir -p common/objects common/refs/heads cd1; \
             printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = {e2}\\n' > common/config; \
             echo 'ref: refs/heads/main' > cd1/HEAD; echo ../common > cd1/commondir; \
             mkdir wt2; echo 'gitdir: ../cd1' > wt2/.git",
            e0 = evil[0],
            e1 = evil[1],
            e2 = evil[2],
        );
        let outcome = world.run(&script).await;
        assert_eq!(outcome.outcome.exit_code, 0, "{backend:?}: {outcome:?}");
        for dir in ["mal", "linked", "wt2"] {
            let _ = world.host_git(&world.root.join(dir), &["status"], "");
        }
        for n in 0..3 {
            assert!(
                !world.marker(&format!("odd{n}")).exists(),
                "{backend:?}: odd{n} ran"
            );
        }
        let named = |part: &str| outcome.warnings.iter().any(|w| w.contains(part));
        assert!(
            named("replaced") && named("mal/.git/config"),
            "{backend:?}: {:?}",
            outcome.warnings
        );
        assert!(
            named("linked/.git/config"),
            "{backend:?}: {:?}",
            outcome.warnings
        );
        assert!(
            named("common/config"),
            "{backend:?}: {:?}",
            outcome.warnings
        );
        // The symlink's target, a file of the work tree, is left as it was.
        let cfg = std::fs::read_to_string(world.root.join("cfg")).unwrap();
        assert!(cfg.contains("fsmonitor"), "{cfg}");
        assert!(
            !std::fs::symlink_metadata(world.root.join("linked/.git/config"))
                .unwrap()
                .is_symlink()
        );
    }
}
