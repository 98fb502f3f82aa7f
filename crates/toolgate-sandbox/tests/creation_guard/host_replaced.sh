# Waits for a host program to replace protected entries that existed when
# the run started (`.git/config` by `git config`, which renames a new file
# over it; `.git/hooks` and `.vscode` removed and made again): that detaches
# their read-only mounts. Then tries every way to write them; prints what
# succeeded, then `done`.
touch started
while [ ! -e replaced ]; do sleep 0.05; done
printf '[core]\n\tfsmonitor = evil\n' >> .git/config && echo "appended config"
echo evil > .git/config && echo "wrote config"
python3 -c 'open(".git/config","r+").write("evil")' 2>/dev/null && echo "r+ config"
python3 -c '
import os
fd = os.open(".git/config", os.O_RDONLY)
os.open(f"/proc/self/fd/{fd}", os.O_WRONLY)
print("reopen config")' 2>/dev/null
ln .git/config hard && echo "hard link config"
python3 -c '
import os, ctypes
fd = os.open(".git/config", os.O_RDONLY)
r = ctypes.CDLL(None, use_errno=True).linkat(fd, b"", -100, b"hard2", 0x1000)
if r == 0:
    print("linkat-empty-path")' 2>/dev/null
echo x > m.tmp && mv m.tmp .git/config && echo "renamed over config"
mv .git/config moved && echo "moved config away"
ln -s .git g && echo evil >> g/config && echo "via symlink"
printf '#!/bin/sh\ntouch /tmp/pwned\n' > .git/hooks/pre-commit && echo "made a hook"
mkdir .git/hooks/d && echo "mkdir in hooks"
ln -s /bin/true .git/hooks/post-checkout && echo "symlinked a hook"
(cd .git/hooks && echo x > pre-push && echo "hook from cwd")
echo evil > .vscode/settings.json && echo "wrote settings"
echo evil > .vscode/tasks.json && echo "made tasks"
mv .vscode/settings.json .vscode/s2 && echo "renamed in vscode"
mv .vscode v2 && echo "moved vscode away"
echo done
