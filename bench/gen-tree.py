#!/usr/bin/env python3
"""Deterministic benchmark tree: ~4000 source-like files, ~40 MB, some
.gitignore'd directories and a few binaries. Usage: gen-tree.py OUT_DIR"""
import os, random, sys

out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/search-bench-tree"
rng = random.Random(42)
WORDS = ("let mut fn struct impl match return self value result error config "
         "buffer index count parse write read open close thread walker search "
         "pattern options report path file line offset limit handle stream").split()
EXT = [".rs", ".py", ".js", ".go", ".c", ".md", ".toml"]

def line(i):
    n = rng.randint(3, 14)
    words = [rng.choice(WORDS) for _ in range(n)]
    r = rng.random()
    if r < 0.02:
        words.append("TODO: fix error handling")
    if r > 0.9995:
        words.append("needle_XYZZY_rare")
    ind = " " * (4 * rng.randint(0, 3))
    return ind + " ".join(words) + (";" if rng.random() < 0.5 else "") + "\n"

def write(path, size):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    parts, total, i = [], 0, 0
    while total < size:
        l = line(i); parts.append(l); total += len(l); i += 1
    with open(path, "w") as f:
        f.write("".join(parts))

# A `.git` directory makes the tree a repository, so that plain `rg` honours
# its .gitignore like the engine does (the engine needs no repository).
os.makedirs(os.path.join(out, ".git"), exist_ok=True)
with open(os.path.join(out, ".gitignore"), "w") as f:
    f.write("target/\nnode_modules/\n*.log\n")
total = 0
for i in range(4000):
    d = os.path.join(out, "src", f"mod{i % 40}", f"sub{i % 7}")
    size = rng.randint(2000, 16000)
    write(os.path.join(d, f"file{i}{EXT[i % len(EXT)]}"), size)
    total += size
# ignored trees (must not be searched)
for i in range(300):
    write(os.path.join(out, "target", f"debug{i % 5}", f"gen{i}.rs"), 20000)
    write(os.path.join(out, "node_modules", f"pkg{i % 9}", f"index{i}.js"), 10000)
for i in range(20):
    write(os.path.join(out, "logs", f"run{i}.log"), 20000)
# binaries
for i in range(5):
    data = bytes(rng.randrange(256) for _ in range(200000)) + b"needle_XYZZY_rare TODO"
    with open(os.path.join(out, "src", f"blob{i}.bin"), "wb") as f:
        f.write(data)
print(f"{out}: ~{total // 1_000_000} MB searched files")
