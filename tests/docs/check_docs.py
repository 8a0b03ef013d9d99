#!/usr/bin/env python3
"""Checks that the documentation says what is true (ctest -R Docs).

usage: check_docs.py links SOURCE_DIR
       check_docs.py readme-commands SOURCE_DIR BUILD_DIR
       check_docs.py results SOURCE_DIR
       check_docs.py readme-length SOURCE_DIR
       check_docs.py method-lists SOURCE_DIR BUILD_DIR

links            every relative link in the repository's Markdown files resolves
readme-commands  every command in README.md's sh blocks that starts with dist/ and needs
                 neither root nor a GPU (a line's "# needs a GPU" says so; a line with a
                 <placeholder> shows a form and is not run) runs and exits
                 0, with dist/ read as BUILD_DIR (the build tree has the installed layout)
results          docs/results/<gpu>.md regenerates byte for byte from the recorded
                 results folders in docs/results/<gpu>/
readme-length    README.md is a front door: at most 200 lines
method-lists     no script or test keeps its own list of the methods: none names four or
                 more of the registry's methods (`harness --list --json`) in one comma-separated
                 list; they name a group (`--method compared`, `--method all`) instead
"""
import difflib
import glob
import os
import re
import shlex
import subprocess
import sys
import tempfile

SKIP_DIRS = {".git", "build", "build-gpu", "dist", "dist-gpu", ".devkit", "results", "node_modules"}
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def markdown_files(root):
    for here, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith("build")]
        for f in files:
            if f.endswith(".md"):
                yield os.path.join(here, f)


def check_links(root):
    bad = []
    for md in markdown_files(root):
        with open(md) as f:
            text = f.read()
        # Links inside code blocks are examples, not links.
        text = re.sub(r"```.*?```", "", text, flags=re.S)
        for target in LINK.findall(text):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            path = target.split("#", 1)[0]
            if not os.path.exists(os.path.normpath(os.path.join(os.path.dirname(md), path))):
                bad.append(f"{os.path.relpath(md, root)}: {target}")
    for b in bad:
        print("broken link:", b)
    print(f"links: {len(bad)} broken")
    return 1 if bad else 0


def readme_commands(root):
    with open(os.path.join(root, "README.md")) as f:
        text = f.read()
    out = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            command, _, comment = line.partition("#")
            command = command.strip()
            # A command with a <placeholder> (results/<run-id>) shows a form, not a runnable line.
            if command.startswith("dist/") and "needs a GPU" not in comment and not re.search(r"<[a-z-]+>", command):
                out.append(command)
    return out


def run_readme_commands(root, build):
    commands = readme_commands(root)
    if not commands:
        print("README.md has no dist/ command that needs neither root nor a GPU: nothing to check")
        return 1
    failed = 0
    with tempfile.TemporaryDirectory(prefix="cudatrace-readme-") as cwd:
        for command in commands:
            argv = shlex.split(command)
            argv[0] = os.path.join(build, argv[0][len("dist/"):])
            r = subprocess.run(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            print(f"{'ok  ' if r.returncode == 0 else 'FAIL'} (exit {r.returncode}) {command}")
            if r.returncode != 0:
                failed += 1
                print(r.stdout[-3000:])
    return 1 if failed else 0


def check_results(root):
    docs = os.path.join(root, "docs", "results")
    pages = sorted(glob.glob(os.path.join(docs, "*.md")))
    if not pages:
        print("no docs/results/*.md")
        return 1
    failed = 0
    for page in pages:
        inputs = sorted(glob.glob(os.path.join(page[:-3], "*")))
        # Written beside the page, so that it names its inputs by the same relative paths.
        out = os.path.join(docs, ".regenerated-" + os.path.basename(page))
        try:
            subprocess.run([sys.executable, os.path.join(root, "docs", "make_results_doc.py"), *inputs, "-o", out],
                           check=True)
            with open(out) as f:
                fresh = f.read()
        finally:
            if os.path.exists(out):
                os.remove(out)
        with open(page) as f:
            kept = f.read()
        if fresh != kept:
            failed += 1
            sys.stdout.writelines(difflib.unified_diff(kept.splitlines(True), fresh.splitlines(True), page, "regenerated"))
        print(f"{os.path.relpath(page, root)}: {'identical' if fresh == kept else 'DIFFERS'} ({len(inputs)} inputs)")
    return 1 if failed else 0


README_MAX_LINES = 200
# A selection of up to three methods for one purpose (`--method none,devhook,devhook-thread`)
# is a choice; four or more is a copy of the registry that a new method would miss.
LIST_OF_METHODS = 4


def check_readme_length(root):
    with open(os.path.join(root, "README.md")) as f:
        n = len(f.read().splitlines())
    print(f"README.md: {n} lines (at most {README_MAX_LINES})")
    return 0 if n <= README_MAX_LINES else 1


def check_method_lists(root, build):
    import json
    listed = subprocess.run([os.path.join(build, "bin", "harness"), "--list", "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, check=True)
    names = {m["name"] for m in json.loads(listed.stdout)["methods"]}
    token = re.compile(r"[A-Za-z0-9_-]+")
    bad = []
    patterns = ("ci/*.sh", "ci/*.py", "bench/*.cu", "reports/*.py", "docs/*.py", "analysis/**/*.py", "harness/*.cpp",
                "tests/**/*.sh", "tests/**/*.py", "tests/**/*.cpp", "tests/**/CMakeLists.txt")
    for pattern in patterns:
        for path in glob.glob(os.path.join(root, pattern), recursive=True):
            with open(path, errors="replace") as f:
                for number, line in enumerate(f, 1):
                    # "a,b,c" in a script and {"a", "b", "c"} in a test read alike.
                    flat = re.sub(r"[\"'\s]", "", line)
                    for candidate in re.findall(r"[A-Za-z0-9_,-]+", flat):
                        words = [w for w in candidate.split(",") if token.fullmatch(w)]
                        if len({w for w in words if w in names}) >= LIST_OF_METHODS:
                            bad.append(f"{os.path.relpath(path, root)}:{number}: {candidate}")
    for b in bad:
        print("a hand-kept list of methods:", b)
    print(f"method-lists: {len(bad)} found ({len(names)} methods in the registry)")
    return 1 if bad else 0


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    what, root = sys.argv[1], os.path.abspath(sys.argv[2])
    if what == "links":
        return check_links(root)
    if what == "readme-commands" and len(sys.argv) == 4:
        return run_readme_commands(root, os.path.abspath(sys.argv[3]))
    if what == "results":
        return check_results(root)
    if what == "readme-length":
        return check_readme_length(root)
    if what == "method-lists" and len(sys.argv) == 4:
        return check_method_lists(root, os.path.abspath(sys.argv[3]))
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
