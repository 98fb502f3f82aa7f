//! Attack: toolgate's state directory lies inside the project root
//! (`XDG_STATE_HOME` set into the project, as a dev shell may do). A
//! checkpoint of the project is taken; the agent then tries to read the
//! checkpoint's record through `read`, find it with `grep` and `find`, and
//! print it from `bash`. Nothing of it comes back.

use pretty_assertions::assert_eq;

use super::*;

#[test]
fn the_state_directory_inside_a_root_is_out_of_every_tools_reach() {
    let s = Sandbox::new();
    let project = std::fs::canonicalize(s.project()).unwrap();
    std::fs::write(project.join("notes.txt"), "marker-in-project\n").unwrap();
    let state = project.join(".state");
    let state_env = state.to_str().unwrap();
    let env = [("XDG_STATE_HOME", state_env)];
    let o = s.run_in(&project, &["call", "snapshot", "{}", "--json"], &env);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let record = walkdir_files(&state.join("toolgate/snapshots"));
    assert!(!record.is_empty(), "no checkpoint record under {state:?}");
    let rel = record[0]
        .strip_prefix(&project)
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let before = std::fs::read(&record[0]).unwrap();

    let o = s.run_in(
        &project,
        &["call", "read", &json!({"path": rel}).to_string()],
        &env,
    );
    assert_ne!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("toolgate's own state") || stderr(&o).contains("toolgate's own state"),
        "{}{}",
        stdout(&o),
        stderr(&o)
    );
    let grep = json!({"pattern": "notes", "path": ".", "hidden": true, "no_ignore": true});
    let o = s.run_in(&project, &["call", "grep", &grep.to_string()], &env);
    assert!(!stdout(&o).contains(".state"), "{}", stdout(&o));
    let find = json!({"pattern": "**", "hidden": true, "no_ignore": true});
    let o = s.run_in(&project, &["call", "find", &find.to_string()], &env);
    assert!(stdout(&o).contains("notes.txt"), "{}", stdout(&o));
    assert!(!stdout(&o).contains(".state/toolgate"), "{}", stdout(&o));
    let script = format!("cat '{rel}'; ls -R .state; echo end");
    let o = s.run_in(
        &project,
        &["call", "bash", &json!({"command": script}).to_string()],
        &env,
    );
    assert!(stdout(&o).contains("end"), "{}{}", stdout(&o), stderr(&o));
    assert!(!stdout(&o).contains("notes.txt"), "{}", stdout(&o));
    assert!(!stdout(&o).contains("snapshots:"), "{}", stdout(&o));
    assert_eq!(std::fs::read(&record[0]).unwrap(), before);
}

/// The data directory inside the project, with the store of grants and the
/// audit log in it: commands run (before, the mask of a store file below
/// the masked directory could not be mounted and every command failed),
/// and see and change nothing of it.
#[test]
fn the_data_directory_inside_a_root_is_hidden_and_commands_still_run() {
    let s = Sandbox::new();
    let project = std::fs::canonicalize(s.project()).unwrap();
    let data = project.join(".data");
    let env = [("XDG_DATA_HOME", data.to_str().unwrap())];
    // The first call creates the store there.
    let o = s.run_in(&project, &["call", "ls", "{}"], &env);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let db = data.join("toolgate/toolgate.db");
    assert!(db.is_file(), "no store at {db:?}");
    let before = std::fs::read(&db).unwrap();
    let script = "echo \"[listed=$(ls -A .data/toolgate | wc -l)]\"; head -c 6 .data/toolgate/toolgate.db; \
                  echo x > .data/toolgate/toolgate.db; echo \"[write=$?]\"; echo end";
    let o = s.run_in(
        &project,
        &["call", "bash", &json!({"command": script}).to_string()],
        &env,
    );
    assert!(stdout(&o).contains("end"), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("[listed=0]"), "{}", stdout(&o));
    assert!(!stdout(&o).contains("SQLite"), "{}", stdout(&o));
    assert!(!stdout(&o).contains("[write=0]"), "{}", stdout(&o));
    assert!(std::fs::read(&db).unwrap().starts_with(&before[..16]));
}

/// Every file under `dir`.
fn walkdir_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out
}
