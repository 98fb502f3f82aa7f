# Every route to creating an absent protected name that a command has
# without a shell: run inside the sandbox, in a root that is a repository
# with `a.txt` in it. Prints one line per attempt: `<route> refused <errno>`
# or `<route> CREATED`.
import ctypes
import errno
import os
import threading

libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
AT_EMPTY_PATH = 0x1000
AT_SYMLINK_FOLLOW = 0x400
RENAME_NOREPLACE = 1


def attempt(route, action):
    try:
        action()
    except OSError as e:
        print(f"{route} refused {errno.errorcode.get(e.errno, e.errno)}", flush=True)
        return
    print(f"{route} CREATED", flush=True)


def check(ret):
    if ret < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def renameat2(old, new, flags):
    check(libc.renameat2(AT_FDCWD, old.encode(), AT_FDCWD, new.encode(), flags))


os.mkdir("d")
os.symlink(".", "here")
os.symlink(".mcp.json", "dangling")
os.symlink("/proc/self/cwd", "cwdlink")
os.mkfifo("fifo")

attempt("mkdir", lambda: os.mkdir(".git/modules"))
attempt("mkdir-top", lambda: os.mkdir(".vscode"))
attempt("open-creat", lambda: os.close(os.open(".mcp.json", os.O_CREAT | os.O_WRONLY, 0o644)))
attempt("open-excl", lambda: os.close(os.open("opencode.json", os.O_CREAT | os.O_EXCL | os.O_WRONLY)))
attempt("creat-dotdot", lambda: os.close(os.open("d/../.mcp.json", os.O_CREAT | os.O_WRONLY)))
attempt("through-symlinked-dir", lambda: os.mkdir("here/.claude"))
attempt("follow-dangling-symlink", lambda: open("dangling", "w").close())
attempt("proc-self-cwd", lambda: os.mkdir("/proc/self/cwd/.gemini"))
attempt("proc-thread-self-cwd", lambda: os.mkdir("/proc/thread-self/cwd/.codex"))
attempt("symlink-to-proc-self", lambda: os.mkdir("cwdlink/.kiro"))
attempt("absolute", lambda: os.mkdir(os.getcwd() + "/.roo"))
dirfd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
attempt("dirfd", lambda: os.mkdir(".zed", dir_fd=dirfd))
attempt("proc-fd", lambda: os.mkdir(f"/proc/self/fd/{dirfd}/.continue"))
attempt("symlink", lambda: os.symlink("a.txt", ".cursor"))
attempt("hardlink", lambda: os.link("a.txt", ".aider.conf.yml"))
attempt("mknod-fifo", lambda: os.mkfifo(".windsurf"))
attempt("rename", lambda: os.rename("d", ".idea"))
attempt("rename-noreplace", lambda: renameat2("a.txt", ".amazonq", RENAME_NOREPLACE))
attempt("rename-in-git-dir", lambda: os.rename(".git/description", ".git/worktrees"))


def tmpfile_linked():
    fd = os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o644)
    os.write(fd, b"{}")
    check(libc.linkat(fd, b"", AT_FDCWD, b".devcontainer.json", AT_EMPTY_PATH))


def tmpfile_linked_via_proc():
    fd = os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o644)
    os.write(fd, b"{}")
    os.link(f"/proc/self/fd/{fd}", ".clinerules", follow_symlinks=True)


attempt("tmpfile-linkat-empty-path", tmpfile_linked)
attempt("tmpfile-link-proc-fd", tmpfile_linked_via_proc)


def racing(route, call):
    """One thread calls with a buffer another thread keeps flipping between
    a harmless name and the protected one: whatever the kernel reads last
    must not be what gets created unchecked."""
    buf = ctypes.create_string_buffer(64)
    harmless, protected = b"harmless-name\0", b".opencode\0\0\0\0\0"
    stop = threading.Event()

    def flip():
        while not stop.is_set():
            ctypes.memmove(buf, protected, len(protected))
            ctypes.memmove(buf, harmless, len(harmless))

    flipper = threading.Thread(target=flip)
    flipper.start()
    try:
        for _ in range(3000):
            call(buf)
            if os.path.lexists(".opencode"):
                print(f"{route} CREATED", flush=True)
                return
            for name in ("harmless-name",):
                if os.path.isdir(name):
                    os.rmdir(name)
                elif os.path.lexists(name):
                    os.unlink(name)
    finally:
        stop.set()
        flipper.join()
    print(f"{route} refused race", flush=True)


racing("race-mkdir", lambda buf: libc.mkdir(buf, 0o755))


def open_and_close(buf):
    fd = libc.open(buf, os.O_CREAT | os.O_WRONLY, 0o644)
    if fd >= 0:
        os.close(fd)


racing("race-open", open_and_close)
