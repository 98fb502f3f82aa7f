# Waits for a host program to make `.vscode/tasks.json` and `.mcp.json`
# (protected names, absent when the run started), then tries every way to
# write them; prints what succeeded, then `done`.
touch started
while [ ! -e .vscode/tasks.json ] || [ ! -e .mcp.json ]; do sleep 0.05; done
sleep 0.1
echo evil > .vscode/tasks.json && echo "wrote tasks"
echo evil >> .vscode/tasks.json && echo "appended tasks"
python3 -c 'open(".vscode/tasks.json","r+").write("evil")' 2>/dev/null && echo "r+ tasks"
echo evil > .vscode/new.json && echo "created new"
mkdir .vscode/d && echo "mkdir"
ln -s .vscode v && echo evil > v/tasks.json && echo "via symlink"
ln .vscode/tasks.json hard && echo evil > hard && echo "via hardlink"
python3 -c '
import os
fd = os.open(".vscode/tasks.json", os.O_RDONLY)
os.open(f"/proc/self/fd/{fd}", os.O_WRONLY)
print("reopen")' 2>/dev/null
python3 -c '
import os, ctypes
fd = os.open(".vscode/tasks.json", os.O_RDONLY)
r = ctypes.CDLL(None, use_errno=True).linkat(fd, b"", -100, b"hard2", 0x1000)
if r == 0:
    print("linkat-empty-path")' 2>/dev/null
(cd .vscode && echo evil > tasks.json && echo "from cwd")
echo x > m.tmp && mv m.tmp .vscode/tasks.json && echo "renamed in"
echo evil > .mcp.json && echo "wrote mcp"
python3 -c 'open(".mcp.json","r+").write("evil")' 2>/dev/null && echo "r+ mcp"
echo done
